"""The environment that makes any build system compile through autopass's wrapper.

`autopass record -- make` must work for Make (which may hard-code `CC = gcc`),
CMake/Ninja (reads CC/CXX on a fresh configure), and autotools (reads CC/CXX).  So the
build gets CC/CXX pointing at the wrapper *and* a folder first on PATH where `cc`,
`gcc`, `clang`, `c++`, `g++`, `clang++` (and versioned/triplet names) are the wrapper.

There, `autopass-cc` and `autopass-c++` are the native launcher (launcher.c, compiled
once per installation with the clang found here), which hands each call to the wrapper
served by the autopass process running the build (server.py), or, without one, execs
the Python wrapper beside it (`autopass-wrapper.py`).  That script starts Python with
`-I -S`: no site-packages scan, which costs tens of milliseconds per compile on some
installs (pyenv's .pth files).  Where no launcher can be compiled, the two names are
the Python wrapper itself.
"""

from __future__ import annotations

import os
import sys

from autopass_build.capture.apply.tally import TALLY_NAME
from autopass_build.capture.native_builds import native_launcher, pass_plugin
from autopass_build.capture.wrapper import is_cxx_name, looks_like_compiler
from autopass_build.core import toolchain
from autopass_build.core.apply_terms import ApplyPolicy
from autopass_build.core.files import hash_bytes, user_cache_dir
from autopass_build.core.names import (
    ENV_APPLY_POLICY,
    ENV_APPLY_TALLY,
    ENV_CC,
    ENV_CXX,
    ENV_FALLBACK_CC,
    ENV_FALLBACK_CXX,
    ENV_FLAGS_DB,
    ENV_IR_PLUGIN,
    ENV_IR_PLUGIN_FOR,
    ENV_MASQUERADE_DIR,
    ENV_MODE,
    ENV_ROOT,
    ENV_STORE,
)

C_NAMES = ("cc", "gcc", "clang", "clang-19", "x86_64-linux-gnu-gcc", "x86_64-linux-gnu-cc")
CXX_NAMES = ("c++", "g++", "clang++", "clang++-19", "x86_64-linux-gnu-g++",
             "x86_64-linux-gnu-c++")
# A build may name its gcc with the version (`CC = gcc-12`, Debian's
# x86_64-linux-gnu-gcc-12): those names found on PATH get a link too.  Before, such a
# build compiled past the wrapper and record said only that nothing went through it.
VERSIONED_GCC_NAMES = ("gcc", "g++", "x86_64-linux-gnu-gcc", "x86_64-linux-gnu-g++")
ARCHIVERS = ("llvm-ar", "llvm-ranlib")
MAX_SHEBANG = 120

PYTHON_WRAPPER = """#!{python} -IS
# Written by autopass: the compiler wrapper without site-packages start-up cost.  The
# native launcher execs it with the name the build called in AUTOPASS_ARGV0 (a script
# started through its #! line loses its argv[0]).
import os
import sys
sys.path.insert(0, {package_parent!r})
from autopass_build.capture.entry import main
argv0 = os.environ.pop("AUTOPASS_ARGV0", "")
sys.exit(main([argv0] + sys.argv[1:] if argv0 else None))
"""
PYTHON_WRAPPER_NAME = "autopass-wrapper.py"    # launcher.c names it too
def package_parent() -> str:
    import autopass_build
    return os.path.dirname(os.path.dirname(os.path.abspath(autopass_build.__file__)))


def write_wrappers(bin_dir: str, search_path: str = "") -> tuple[str, str]:
    """Create the wrapper scripts and compiler-named symlinks; return (cc, c++).
    `search_path`: the build's PATH, where versioned gcc names are looked for."""
    os.makedirs(bin_dir, exist_ok=True)
    python = sys.executable
    if len(python) + 8 > MAX_SHEBANG or " " in python:
        python = "/usr/bin/env python3"  # pragma: no cover - very long interpreter paths
    text = PYTHON_WRAPPER.format(python=python, package_parent=package_parent())
    _write_script(os.path.join(bin_dir, PYTHON_WRAPPER_NAME), text)
    launcher = native_launcher(bin_dir)
    paths = []
    for name in ("autopass-cc", "autopass-c++"):
        path = os.path.join(bin_dir, name)
        paths.append(path)
        if launcher:
            _relink(path, launcher)
        else:
            _write_script(path, text)
    versioned = versioned_gcc_names(search_path, exclude=bin_dir)
    c_names = C_NAMES + tuple(v for v in versioned if not is_cxx_name(v))
    cxx_names = CXX_NAMES + tuple(v for v in versioned if is_cxx_name(v))
    for names, target in ((c_names, "autopass-cc"), (cxx_names, "autopass-c++")):
        for name in names:
            _relink(os.path.join(bin_dir, name), target)
    # CMake takes the archiver beside the compiler it found (this folder), else the first
    # `llvm-ar` on PATH: on a machine with an older default LLVM that one cannot read
    # LLVM 19 bitcode, and the tuned (LTO) build of a static library fails.  The
    # compiler's own llvm-ar and llvm-ranlib go here, by their plain names.
    # CMake's link-time optimization (INTERPROCEDURAL_OPTIMIZATION) looks for the
    # archiver under the compiler's own prefix, "autopass-llvm-ar" beside autopass-c++;
    # without it the archive step ran "CMAKE_CXX_COMPILER_AR-NOTFOUND" and the user's
    # build failed under autopass.
    for tool in ARCHIVERS:
        found = toolchain.find_tool(tool, exclude=frozenset({os.path.realpath(bin_dir)}))
        if found:
            for name in (tool, f"autopass-{tool}"):
                _relink(os.path.join(bin_dir, name), os.path.abspath(found))
    return paths[0], paths[1]


def _write_script(path: str, text: str) -> None:
    if _holds(path, text):
        return                     # a build running now may be starting it: leave it be
    tmp = path + f".{os.getpid()}.tmp"
    with open(tmp, "w") as handle:
        handle.write(text)
    os.chmod(tmp, 0o755)
    os.replace(tmp, path)


def cmake_launcher(folder: str) -> str | None:
    """The native launcher written into `folder` with the Python wrapper beside it: its
    `autopass-cc`, what cmake/AutoPass.cmake makes CMake's compiler launcher, in the
    build folder so that it lasts as long as the build that names it (in a cache, a
    cache cleaned would break the build).  None where no launcher can be compiled."""
    cc, _ = write_wrappers(folder)
    return cc if native_launcher(folder) else None


def versioned_gcc_names(search_path: str, exclude: str) -> list[str]:
    """gcc-12, g++-12, x86_64-linux-gnu-gcc-12, ...: the versioned gcc names on
    `search_path`, outside the folder `exclude` (ours)."""
    found: set[str] = set()
    for folder in search_path.split(os.pathsep):
        if not folder or os.path.realpath(folder) == os.path.realpath(exclude):
            continue
        try:
            entries = os.listdir(folder)
        except OSError:
            continue
        for entry in entries:
            base, _, version = entry.rpartition("-")
            if base in VERSIONED_GCC_NAMES and version.replace(".", "").isdigit():
                found.add(entry)
    return sorted(found)


def _holds(path: str, text: str) -> bool:
    try:
        with open(path) as handle:
            return handle.read() == text and os.access(path, os.X_OK)
    except (OSError, UnicodeDecodeError):
        return False


def _relink(link: str, target: str) -> None:
    """`link` -> `target`, replaced atomically: another build may be using the folder."""
    if os.path.islink(link) and os.readlink(link) == target:
        return
    tmp = f"{link}.{os.getpid()}.tmp"
    if os.path.lexists(tmp):
        os.unlink(tmp)
    os.symlink(target, tmp)
    os.replace(tmp, link)


def wrapper_dir(fallback_parent: str) -> str:
    """Where the wrapper and its compiler-named links live, in every mode: one folder per
    installation of autopass, kept after the build.  A configure script or CMake keeps
    $CC by its full path in the user's tree; apply and verify used a folder of their run,
    deleted after it, and the tree's next plain `make` failed ("autopass-cc: No such file
    or directory": pcre2 after `autopass verify`); record's was inside the store, gone
    with it.  Run later without autopass's environment, the wrapper passes every command
    through (or records into a store that is there).  `fallback_parent`/bin only when the
    cache cannot be written."""
    key = hash_bytes(f"{sys.executable}\0{package_parent()}".encode())[:12]
    folder = user_cache_dir("wrappers", key)
    try:
        os.makedirs(folder, exist_ok=True)
        if os.access(folder, os.W_OK):
            return folder
    except OSError:
        pass
    return os.path.join(fallback_parent, "bin")


# A compiler cache in the user's build (CC="ccache cc", CMake's compiler launcher) answers
# a compile it has seen from its cache and never runs the compiler: a second recording
# captured no unit, and an apply build got the recorded build's objects for commands
# whose tuned flags the cache could not see.  Under autopass, it calls the compiler.
CACHE_BYPASS = {"CCACHE_DISABLE": "1"}


# Debian packaging runs dh_dwz on what it built; bookworm's dwz (0.15) cannot read the
# .debug_addr section of clang 19's DWARF 5 (gcc 12's DWARF 5 has none), so under
# autopass `dpkg-buildpackage` failed at dh_dwz.  Its own way to add a flag is used.
PACKAGING_TOOLS = ("dpkg-buildpackage", "debuild", "debian/rules")
DWARF_FOR_DWZ = "-gdwarf-4"


def for_debian_packaging(command: list[str], env: dict[str, str]) -> str:
    """Add -gdwarf-4 through DEB_{C,CXX}FLAGS_APPEND when `command` builds a Debian package
    and the user chose no DWARF version there; the note to print, else ""."""
    if not any(tool in " ".join(command) for tool in PACKAGING_TOOLS):
        return ""
    added = []
    for key in ("DEB_CFLAGS_APPEND", "DEB_CXXFLAGS_APPEND"):
        if "-gdwarf" not in env.get(key, ""):
            env[key] = f"{env.get(key, '')} {DWARF_FOR_DWZ}".strip()
            added.append(key)
    if not added:
        return ""
    return (f"a Debian package build: {' and '.join(added)} get {DWARF_FOR_DWZ}, since "
            "dh_dwz (dwz 0.15) cannot read clang's DWARF 5")


def record_environment(store_dir: str, root: str, base: dict[str, str] | None = None
                       ) -> dict[str, str]:
    """The environment for `autopass record -- <build>`."""
    env = dict(os.environ if base is None else base)
    bin_dir = wrapper_dir(store_dir)
    cc, cxx = write_wrappers(bin_dir, env.get("PATH", ""))
    clang = toolchain.find_tool("clang", env=env, exclude=frozenset({bin_dir}))
    clangxx = toolchain.find_tool("clang++", env=env, exclude=frozenset({bin_dir}))
    if clang:
        env[ENV_CC] = clang
    if clangxx:
        env[ENV_CXX] = clangxx
    env.update({
        **fallback_compilers(env),
        "CC": cc, "CXX": cxx,
        "PATH": bin_dir + os.pathsep + env.get("PATH", ""),
        ENV_STORE: store_dir, ENV_ROOT: root, ENV_MODE: "record",
        ENV_MASQUERADE_DIR: bin_dir, **CACHE_BYPASS,
    })
    plugin = pass_plugin(bin_dir)
    if plugin:
        env[ENV_IR_PLUGIN], env[ENV_IR_PLUGIN_FOR] = plugin
    return env


def fallback_compilers(env: dict[str, str]) -> dict[str, str]:
    """What the build would have compiled with had autopass not set $CC and $CXX: the
    compiler word of the user's own (`ccache gcc-12` -> gcc-12), else cc and c++ (make's
    default C++ compiler is g++, CMake's and autotools' the first of c++/g++ on PATH:
    gcc on Debian).  The wrapper hands it a command that clang refuses (F36)."""
    chosen = {}
    for var, key, default in (("CC", ENV_FALLBACK_CC, "cc"), ("CXX", ENV_FALLBACK_CXX, "c++")):
        words = env.get(var, "").split()
        chosen[key] = next((w for w in words if looks_like_compiler(w)),
                           "" if words else default)
    return chosen


def apply_environment(root: str, db: str, policy: ApplyPolicy, work_dir: str,
                      base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for `autopass apply -- <build>`: the same wrapper, in apply mode;
    with an LTO stage in the database, LLVM's archiver too (GNU ar cannot index the
    symbols of LLVM bitcode members without a matching plugin)."""
    env = dict(os.environ if base is None else base)
    os.makedirs(work_dir, exist_ok=True)      # the tally is written there
    bin_dir = wrapper_dir(work_dir)
    cc, cxx = write_wrappers(bin_dir, env.get("PATH", ""))
    for tool, key in (("clang", ENV_CC), ("clang++", ENV_CXX)):
        found = toolchain.find_tool(tool, env=env, exclude=frozenset({bin_dir}))
        if found:
            env[key] = found
    env.update({
        **fallback_compilers(env),
        "CC": cc, "CXX": cxx,
        "PATH": bin_dir + os.pathsep + env.get("PATH", ""),
        ENV_ROOT: root, ENV_MODE: "apply", ENV_FLAGS_DB: db,
        ENV_APPLY_POLICY: policy.value, ENV_MASQUERADE_DIR: bin_dir,
        ENV_APPLY_TALLY: os.path.join(work_dir, TALLY_NAME), **CACHE_BYPASS,
    })
    env.pop(ENV_STORE, None)
    if carries_decisions(db):
        plugin = pass_plugin(bin_dir)
        if plugin:
            env[ENV_IR_PLUGIN], env[ENV_IR_PLUGIN_FOR] = plugin
    if bitcode_archives(db):
        for variable, tool in (("AR", "llvm-ar"), ("RANLIB", "llvm-ranlib")):
            found = toolchain.find_tool(tool, env=env)
            if found:
                env[variable] = found
    return env


def carries_decisions(db: str) -> bool:
    """Whether an entry of the database carries decisions in the IR (core/decisions.py):
    its build loads autopass's pass plugin."""
    from autopass_build.capture.apply import applier
    from autopass_build.core.decisions import OPTION

    loaded, _ = applier.load(db)
    return loaded is not None and any(flag.startswith(OPTION)
                                      for entry in loaded.entries.values()
                                      for flag in entry.flags)


def bitcode_archives(db: str) -> bool:
    """The database's stages make the target's units LLVM bitcode (an LTO stage)."""
    from autopass_build.capture.apply import applier
    from autopass_build.core.stage_flags import lto_mode

    loaded, _ = applier.load(db)
    return bool(loaded and loaded.target and lto_mode(loaded.target.stages))
