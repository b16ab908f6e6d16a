"""Real programs from Debian source packages, fetched and unpacked once, then copied.

Needs a deb-src entry for the main archive (`scripts/setup.sh --test` adds one).  The
downloads are cached under $AUTOPASS_BENCH_CACHE (default ~/.cache/autopass/debian);
no upstream code is ever committed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

CACHE = Path(os.environ.get("AUTOPASS_BENCH_CACHE",
                            Path.home() / ".cache" / "autopass" / "debian"))


@dataclass(frozen=True)
class Program:
    package: str                  # Debian source package
    build_dir: str                # where the build runs, inside the source tree
    build: tuple[str, ...]        # its own build command, as `autopass record -- BUILD` runs it
    plain_build: tuple[str, ...]  # the same build with plain clang-19 as the compiler
    clean: tuple[str, ...]        # back to a pristine tree
    binaries: tuple[str, ...]     # relative to build_dir; the first is the one benchmarked
    # After plain_build: remove the objects, and rebuild them (no configure step).
    soft_clean: tuple[str, ...] = ()
    rebuild: tuple[str, ...] = ()


LUA = Program(
    package="lua5.4", build_dir="src",
    build=("make", "posix", "-j2"),   # the Makefile hard-codes CC= gcc -std=gnu99
    plain_build=("make", "posix", "-j2", "CC=clang-19 -std=gnu99"),
    clean=("make", "clean"),
    binaries=("lua", "luac"),
    soft_clean=("make", "clean"),
    rebuild=("make", "posix", "-j2", "CC=clang-19 -std=gnu99"),
)
# A Makefile with CC=gcc and a program linked with -L. -lbz2 against its static library.
BZIP2 = Program(
    package="bzip2", build_dir=".",
    build=("make", "-j2", "libbz2.a", "bzip2", "bzip2recover"),
    plain_build=("make", "-j2", "libbz2.a", "bzip2", "bzip2recover", "CC=clang-19"),
    clean=("make", "clean"),
    binaries=("bzip2", "bzip2recover"),
    soft_clean=("make", "clean"),
    rebuild=("make", "-j2", "libbz2.a", "bzip2", "bzip2recover", "CC=clang-19"),
)
# autotools + libtool: configure probes, PIC and non-PIC compiles of every source, a
# shared library and programs linked against it.
LIBPNG = Program(
    package="libpng1.6", build_dir=".",
    build=("sh", "-c", "./configure -q && make -j2"),
    plain_build=("sh", "-c", "CC=clang-19 ./configure -q && make -j2"),
    clean=("sh", "-c", "make distclean >/dev/null"),
    binaries=(".libs/pngfix", ".libs/libpng16.so"),
    soft_clean=("make", "clean"),
    rebuild=("make", "-j2"),
)
# Its own Makefile builds at -O3; objects land in programs/obj/conf_<hash of flags>/;
# one assembly source (huf_decompress_amd64.S) is linked as it was built.  With -g, as
# Debian builds it: its hot loops are in helpers inlined into the match finders
# (ZSTD_count), which the profile tells apart by the line tables (evidence/inlined.py).
ZSTD = Program(
    package="libzstd", build_dir=".",
    build=("make", "-j2", "-C", "programs", "zstd", "MOREFLAGS=-g"),
    plain_build=("make", "-j2", "-C", "programs", "zstd", "MOREFLAGS=-g", "CC=clang-19"),
    clean=("make", "-C", "programs", "clean"),
    binaries=("programs/zstd",),
)
# autotools, then its own Makefile generates the amalgamation (sqlite3.c, shell.c) with
# tclsh.  Its `sqlite3` rule compiles both sources in one compile-and-link command, which
# autopass records but cannot tune per source, so the two compiles and the link are
# spelled out (same sources, the amalgamation's usual options).
_SQLITE_OPTS = "-O3 -DSQLITE_THREADSAFE=0 -DSQLITE_OMIT_LOAD_EXTENSION"
_SQLITE_STEPS = (f"make sqlite3.c shell.c >/dev/null && $CC {_SQLITE_OPTS} -c sqlite3.c && "
                 f"$CC {_SQLITE_OPTS} -c shell.c && $CC -o sqlite3 shell.o sqlite3.o -lm")
SQLITE = Program(
    package="sqlite3", build_dir=".",
    build=("sh", "-c", "./configure -q --disable-tcl --disable-readline && " + _SQLITE_STEPS),
    plain_build=("sh", "-c", "CC=clang-19; export CC; ./configure -q --disable-tcl "
                 "--disable-readline && " + _SQLITE_STEPS),
    clean=("sh", "-c", "make distclean >/dev/null; rm -f sqlite3 *.o"),
    binaries=("sqlite3",),
)
# A numeric codec whose hot code is spread over units (psymodel.c, vbrquantize.c,
# takehiro.c, fft.c, newmdct.c: ~5-28 % each at -V 2), plain C float loops where compiler
# options act; autotools, the encoder library linked statically into frontend/lame.
LAME = Program(
    package="lame", build_dir=".",
    build=("sh", "-c", "CFLAGS='-O3 -g' ./configure -q --disable-shared >/dev/null "
           "&& make -j2"),
    plain_build=("sh", "-c", "CC=clang-19 CFLAGS='-O3 -g' ./configure -q --disable-shared "
                 ">/dev/null && make -j2"),
    clean=("sh", "-c", "make distclean >/dev/null"),
    binaries=("frontend/lame",),
)
# The Opus codec's reference encoder and decoder (opus_demo), built by the plain makefile
# it ships (Makefile.unix: no configure, no SIMD intrinsics, so its float DSP loops are
# the compiler's to vectorize); CELT's hot code is spread over vq.c, kiss_fft.c, pitch.c,
# bands.c and analysis.c (each 5-25 % of an encode at 96 kb/s).
_OPUS_FLAGS = ("CFLAGS=-O3 -g -DUSE_ALLOCA -DHAVE_LRINTF -DOPUS_BUILD "
               "-Iinclude -Isilk -Icelt -Isilk/float")
OPUS = Program(
    package="opus", build_dir=".",
    build=("make", "-s", "-f", "Makefile.unix", "-j2", "opus_demo", _OPUS_FLAGS),
    plain_build=("make", "-s", "-f", "Makefile.unix", "-j2", "opus_demo", _OPUS_FLAGS,
                 "CC=clang-19"),
    clean=("make", "-s", "-f", "Makefile.unix", "clean"),
    binaries=("opus_demo",),
)
# Whole C++ applications, built by their own CMake with the Ninja generator at its
# Release setting (-O3).
_CMAKE = "cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release"
_PLAIN_CMAKE = _CMAKE + " -DCMAKE_C_COMPILER=clang-19 -DCMAKE_CXX_COMPILER=clang++-19"


def _cmake_program(package: str, options: str, binaries: tuple[str, ...],
                   targets: tuple[str, ...] = ()) -> Program:
    """A project CMake configures (`options` after its cache settings, then the Ninja
    build of `targets`, all when none) into build/, under autopass or plain clang-19."""
    return Program(
        package=package, build_dir=".",
        build=("sh", "-c", _CMAKE + options),
        plain_build=("sh", "-c", _PLAIN_CMAKE + options),
        clean=("rm", "-rf", "build"),
        binaries=binaries,
        soft_clean=("ninja", "-C", "build", "clean"),
        rebuild=("ninja", "-C", "build", "-j2", *targets),
    )


# GEOS: ~390 units, two shared libraries of the project (libgeos, libgeos_c: -fPIC,
# visibility), exceptions, RTTI, templates; its command-line tool geosop links libgeos.
_GEOS_OPTIONS = " -DBUILD_TESTING=OFF >/dev/null && ninja -C build -j2 >/dev/null"
GEOS = _cmake_program("geos", _GEOS_OPTIONS, ("build/bin/geosop", "build/lib/libgeos.so.3.11.1"))
# cppcheck: ~75 large units (the analyzer library, its command line, tinyxml2,
# simplecpp), one executable.  It finds its library configurations (std.cfg) in
# FILESDIR or beside its binary; a candidate runs from autopass's work folder, so
# FILESDIR names the build's own copy (a distribution sets /usr/share/cppcheck).
_CPPCHECK_OPTIONS = (' -DFILESDIR="$PWD/build/bin" >/dev/null && ninja -C build -j2 '
                     ">/dev/null")
CPPCHECK = _cmake_program("cppcheck", _CPPCHECK_OPTIONS, ("build/bin/cppcheck",))
# 7-Zip (Debian's 7zip, 26.01): ~310 units of C++ and C, one program (7zz), built by its
# own hand-written makefiles with no configure step; objects land in b/c/.  Under clang
# they build with -Weverything -Werror, so any warning new to clang fails the build
# (Debian's patch 0003 gives one): CFLAGS_WARN_WALL= drops -Werror.  Debian's source has no RAR
# code: DISABLE_RAR=1, as its debian/rules.  Upstream links with -s, which leaves BOLT
# nothing to work with (Debian's patches drop it and strip later): LFLAGS_STRIP=.
# CC=clang-19 under `autopass record` is record's own link of that name, first on PATH.
_SEVENZIP_MAKE = ("make", "-C", "CPP/7zip/Bundles/Alone2", "-f", "../../cmpl_clang.mak",
                  "-j2", "DISABLE_RAR=1", "CFLAGS_WARN_WALL=", "LFLAGS_STRIP=",
                  "CC=clang-19", "CXX=clang++-19")
SEVENZIP = Program(
    package="7zip", build_dir=".",
    build=_SEVENZIP_MAKE,
    plain_build=_SEVENZIP_MAKE,
    clean=("rm", "-rf", "CPP/7zip/Bundles/Alone2/b"),
    binaries=("CPP/7zip/Bundles/Alone2/b/c/7zz",),
    soft_clean=("rm", "-rf", "CPP/7zip/Bundles/Alone2/b"),
    rebuild=_SEVENZIP_MAKE,
)
# brotli (1.0.9): ~60 units of C, its command-line tool linked with the project's static
# libraries; at quality 9 nearly all the time is one hash-chain match search.
_BROTLI_OPTIONS = " -DBUILD_TESTING=OFF >/dev/null && ninja -C build -j2 brotli >/dev/null"
BROTLI = _cmake_program("brotli", _BROTLI_OPTIONS, ("build/brotli",), ("brotli",))
# GNU bc (1.07.1): ~20 units of C, autotools; its arbitrary-precision arithmetic is
# plain C loops over digit arrays (lib/number.c: multiplication and division).  Its
# manual needs makeinfo, which the build is told to skip.
_BC_STEPS = "make -j2 MAKEINFO=true >/dev/null"
BC = Program(
    package="bc", build_dir=".",
    build=("sh", "-c", "CFLAGS='-O3 -g' ./configure -q >/dev/null && " + _BC_STEPS),
    plain_build=("sh", "-c", "CC=clang-19 CFLAGS='-O3 -g' ./configure -q >/dev/null && "
                 + _BC_STEPS),
    clean=("sh", "-c", "make distclean >/dev/null"),
    binaries=("bc/bc",),
)
# Not from Debian: a dozen numeric loop kernels of our own (bench/workloads/kernels), for
# decisions carried in the IR (bench/decision_layer.py); copied from the repository.
KERNELS = Program(
    package="kernels", build_dir=".",
    build=("make", "-j2"),
    plain_build=("make", "-j2", "CC=clang-19"),
    clean=("make", "clean"),
    binaries=("kernels",),
)
LOCAL_SOURCES = {"kernels": Path(__file__).resolve().parent / "workloads" / "kernels"}
PROGRAMS = {p.package: p for p in (LUA, BZIP2, LIBPNG, ZSTD, SQLITE, LAME, OPUS,
                                    BROTLI, BC)}
APPLICATIONS = {p.package: p for p in (GEOS, CPPCHECK, SEVENZIP)}


class FetchError(Exception):
    pass


def _run(argv: list[str], cwd: Path) -> None:
    result = subprocess.run(argv, cwd=cwd, capture_output=True, text=True)
    if result.returncode != 0:
        raise FetchError(f"{' '.join(argv)} failed in {cwd}:\n{result.stderr[-2000:]}\n"
                         "Is deb-src enabled? `bash scripts/setup.sh --test` enables it.")


def unpacked(package: str) -> Path:
    """The pristine, unpacked upstream source of `package` (cached)."""
    folder = CACHE / package
    tree = folder / "source"
    if tree.is_dir():
        return tree
    folder.mkdir(parents=True, exist_ok=True)
    if not list(folder.glob("*.dsc")):
        _run(["apt-get", "source", "--download-only", package], folder)
    [dsc] = folder.glob("*.dsc")
    partial = folder / "source.partial"
    shutil.rmtree(partial, ignore_errors=True)
    _run(["dpkg-source", "-x", "--skip-patches", dsc.name, partial.name], folder)
    partial.rename(tree)
    return tree


def fresh_copy(package: str, dest: Path) -> Path:
    """The package's sources copied to `dest`, replacing what an earlier run left there
    (a bench run again into the same --out)."""
    source = LOCAL_SOURCES.get(package) or unpacked(package)
    shutil.rmtree(dest, ignore_errors=True)
    shutil.copytree(source, dest, symlinks=True)
    return dest
