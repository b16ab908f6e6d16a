"""Real builds as users drive them: the ways in combined, build commands as a shell reads
them, and a verified stage shipped whether or not a per-file flag wins."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest
from support import (
    AUTOPASS,
    REPO,
    check_recorded,
    copy_example,
    env_with_autopass,
    sh,
    snapshot,
)

from autopass_build.core import flags_db, toolchain

CMAKE_INCLUDE = f"-DCMAKE_PROJECT_TOP_LEVEL_INCLUDES={REPO}/cmake/AutoPass.cmake"


@pytest.mark.parametrize("compiler", ["bare name", "full path", "not given"])
def test_record_around_the_cmake_include_records_every_unit(tmp_path, clangxx, opt, compiler):
    """F14: `autopass record` and AutoPass.cmake at once: CMake resolves the compiler to record
    mode's masquerade link, the include's launcher wraps that; the wrapper must see its
    own link and run the real compiler, never stop at its recursion guard."""
    root = copy_example("cmake-cpp", tmp_path)
    env = env_with_autopass()
    given = {"bare name": "-DCMAKE_CXX_COMPILER=clang++-19",
             "full path": f"-DCMAKE_CXX_COMPILER={clangxx}", "not given": ""}[compiler]
    build = f"cmake -S . -B b -G Ninja {given} {CMAKE_INCLUDE} && ninja -C b"
    done = subprocess.run([AUTOPASS, "record", "--", "sh", "-c", build], cwd=root, env=env,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "recursion" not in done.stdout + done.stderr
    check_recorded(root, opt, "b/routeplan", 5)
    result = subprocess.run(["b/routeplan"], cwd=root, capture_output=True, check=True)
    assert result.stdout == (root / "expected.txt").read_bytes()
    # later, the user's own `ninja` (no masquerade on PATH): CMake still has the
    # masquerade link cached as the compiler, and the build must not stop at the guard
    (root / "src" / "solver.cpp").touch()
    again = subprocess.run(["ninja", "-C", "b"], cwd=root, env=env, capture_output=True,
                           text=True)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "recursion" not in again.stdout + again.stderr


def test_record_with_cc_set_to_clang_on_makes_command_line(tmp_path, clang, opt):
    """`make CC=clang-19` under record: the Makefile's $(CC) is the masquerade link."""
    root = copy_example("make-c", tmp_path)
    env = env_with_autopass()
    sh(["make", "-j2", "-s", "CC=clang-19"], root, env)
    plain = snapshot(root, ("*.o", "*.a", "dataproc"))
    sh(["make", "-s", "clean"], root, env)
    sh([AUTOPASS, "record", "--", "make", "-j2", "-s", "CC=clang-19"], root, env)
    assert snapshot(root, ("*.o", "*.a", "dataproc")) == plain
    check_recorded(root, opt, "dataproc", 11)


def test_a_build_command_string_runs_as_a_shell_runs_it(tmp_path, clang, opt):
    """[build].command written as one string (a redirection, &&, a variable: the natural
    way to write an autotools build) runs through sh -c, as make runs a recipe, for
    `autopass record` with no command and for `autopass verify`; a list is one argv."""
    root = copy_example("make-c", tmp_path)
    env = env_with_autopass()
    config = (root / "autopass.toml").read_text()
    config = config.replace('command = "make -j2"\nclean = "make clean"',
                            'command = "make -s clean >/dev/null && CFLAGS=-O1 make -j2 -s"\n'
                            'clean = "make -s clean >/dev/null 2>&1"')
    (root / "autopass.toml").write_text(config)
    said = sh([AUTOPASS, "record"], root, env)
    assert "building with [build].command" in said
    check_recorded(root, opt, "dataproc", 11)
    assert all(u.opt_level == "-O1" for u in _units(root))     # CFLAGS=-O1 reached make
    flags_db.save(str(root / "autopass.flags.json"), flags_db.empty())   # verify needs one
    done = subprocess.run([AUTOPASS, "verify", "--no-measure"], cwd=root, env=env,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "identical" in done.stdout
    (root / "dataproc").unlink()
    said = sh([AUTOPASS, "apply"], root, env)       # with no command, as record: the same
    assert "building with [build].command" in said and (root / "dataproc").is_file()


@pytest.mark.parametrize("verb", ["record", "apply"])
def test_record_with_neither_a_command_nor_a_config_says_what_to_give(tmp_path, verb):
    done = subprocess.run([AUTOPASS, verb], cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 2
    assert f"autopass {verb} -- make" in done.stderr and "[build].command" in done.stderr
    assert "Traceback" not in done.stderr


def _units(root):
    from autopass_build.store.index import Store
    return Store.open_existing(str(root / ".autopass")).units()


def test_units_says_which_units_no_recorded_link_holds(tmp_path, clang) -> None:
    """A binary linked without the wrapper: its units cannot be tuned, and units says so."""
    (tmp_path / "s.c").write_text("int main(void) { return 0; }\n")
    env = env_with_autopass()
    sh([AUTOPASS, "record", "--", "sh", "-c", f"clang-19 -c s.c -o s.o && {clang} s.o -o s"],
       tmp_path, env)
    said = sh([AUTOPASS, "units"], tmp_path, env)
    assert "1 unit is in no recorded link (s.c)" in said


def test_units_tells_a_second_compile_of_a_linked_source_apart(tmp_path) -> None:
    """opus 1.3.1 under libtool: 148 plain objects archived into libopus.a, which nothing
    in the build links, beside the PIC ones of libopus.so.  `units` said "148 units are
    in no recorded link" with advice about linking past the wrapper; they are second
    compiles of linked sources, and said so."""
    (tmp_path / "s.c").write_text("int main(void) { return 0; }\n")
    env = env_with_autopass()
    sh([AUTOPASS, "record", "--", "sh", "-c",
        "cc -c s.c -o plain.o && cc -fPIC -c s.c -o pic.o && cc pic.o -o s"], tmp_path, env)
    said = sh([AUTOPASS, "units"], tmp_path, env)
    assert "1 unit compiles a source again whose other compile is linked" in said
    assert "in no recorded link" not in said


OLD_LLVM_AR = """#!/bin/sh
# An llvm-ar of an older LLVM, as Debian's default `llvm` package puts on PATH: it cannot
# read LLVM 19 bitcode members (the tuned build's LTO objects).
for arg in "$@"; do
  if [ -f "$arg" ] && [ "$(head -c 4 "$arg" | od -An -c | tr -d ' ')" = "BC300336" ]; then
    echo "llvm-ar: error: $arg: Opaque pointers are only supported in -opaque-pointers mode" >&2
    exit 1
  fi
done
exec ar "$@"
"""


def test_cmake_under_record_takes_the_compilers_own_archiver(tmp_path) -> None:
    """F24: a CMake project with a static library, recorded while an older `llvm-ar` is first
    on PATH (cmark, on a machine with Debian's default llvm 14).  CMake takes the archiver
    beside the compiler it found; record mode's folder holds LLVM 19's, so the tuned LTO
    build's bitcode archive builds (with the old one it failed: a broken user build)."""
    from autopass_build.core import flags_db

    root = copy_example("cmake-cpp", tmp_path)
    old = tmp_path / "old-llvm"
    old.mkdir()
    (old / "llvm-ar").write_text(OLD_LLVM_AR)
    (old / "llvm-ar").chmod(0o755)
    env = env_with_autopass()
    env["PATH"] = f"{old}:{env['PATH']}"
    build = "cmake -S . -B b -G Ninja && ninja -C b"
    sh([AUTOPASS, "record", "--", "sh", "-c", build], root, env)
    cache = (root / "b" / "CMakeCache.txt").read_text()
    [archiver] = [line.split("=", 1)[1] for line in cache.splitlines()
                  if line.startswith("CMAKE_AR:FILEPATH=")]
    assert os.path.realpath(archiver) == os.path.realpath(toolchain.find_tool("llvm-ar"))
    db = flags_db.empty()
    db.target = flags_db.TargetStages("b/routeplan", ("lto",), "-O3",
                                      ("src/geometry.cpp", "src/graph.cpp", "src/main.cpp",
                                       "src/solver.cpp", "src/text.cpp"))
    flags_db.save(str(root / "autopass.flags.json"), db)
    applied = subprocess.run([AUTOPASS, "apply", "--", "cmake", "--build", "b",
                              "--clean-first"], cwd=root, env=env, capture_output=True,
                             text=True)
    assert applied.returncode == 0, applied.stdout + applied.stderr
    result = subprocess.run(["b/routeplan"], cwd=root, capture_output=True, check=True)
    assert result.stdout == (root / "expected.txt").read_bytes()


def test_gcc_under_the_cmake_include_is_said_at_configure_time(tmp_path) -> None:
    """F64: CMAKE_C_COMPILER=gcc with the include in record mode recorded nothing and said
    nothing, at configure or build time; now the configure warns, naming the fix."""
    root = tmp_path / "g"
    root.mkdir()
    (root / "CMakeLists.txt").write_text("cmake_minimum_required(VERSION 3.16)\nproject(g C)\n"
                                         "add_executable(g g.c)\n")
    (root / "g.c").write_text("int main(void) { return 0; }\n")
    done = subprocess.run(["cmake", "-S", ".", "-B", "b", "-G", "Ninja",
                           "-DCMAKE_C_COMPILER=gcc", CMAKE_INCLUDE], cwd=root,
                          env=env_with_autopass(), capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    said = " ".join(done.stderr.split())
    assert "the C compiler is GNU" in said and "records nothing from it" in said
    assert "-DCMAKE_C_COMPILER=clang-19" in said


def test_a_launcher_the_build_had_is_named_where_the_cmake_include_takes_its_place(
        tmp_path) -> None:
    """F103 (issue 64, case 8): a build configured with its own compiler launcher (ccache,
    distcc) and the include: in record mode autopass's launcher takes its place and the
    configure says so, naming it and the fix, and the unit is recorded; in off mode the
    build keeps its own launcher.  Before, the include replaced it without a word."""
    root = tmp_path / "g"
    root.mkdir()
    (root / "CMakeLists.txt").write_text("cmake_minimum_required(VERSION 3.16)\nproject(g C)\n"
                                         "add_executable(g g.c)\n")
    (root / "g.c").write_text("int main(void) { return 0; }\n")
    calls = tmp_path / "calls.log"
    theirs = tmp_path / "mycache"
    theirs.write_text(f'#!/bin/sh\necho "$*" >> "{calls}"\nexec "$@"\n')
    theirs.chmod(0o755)

    def configured(mode: str, folder: str) -> str:
        done = subprocess.run(["cmake", "-S", ".", "-B", folder, "-G", "Ninja",
                               f"-DCMAKE_C_COMPILER_LAUNCHER={theirs}",
                               f"-DAUTOPASS_MODE={mode}", CMAKE_INCLUDE], cwd=root,
                              env=env_with_autopass(), capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        built = subprocess.run(["cmake", "--build", folder], cwd=root,
                               env=env_with_autopass(), capture_output=True, text=True)
        assert built.returncode == 0, built.stdout + built.stderr
        return " ".join(done.stderr.split())

    said = configured("record", "b")
    assert f'CMAKE_C_COMPILER_LAUNCHER was "{theirs}"' in said, said
    assert "takes its place in record mode" in said and "-DAUTOPASS_MODE=off" in said
    units = subprocess.run([AUTOPASS, "units"], cwd=root, capture_output=True, text=True)
    assert "g.c" in units.stdout, units.stdout + units.stderr
    assert not calls.exists()
    said = configured("off", "off")
    assert "CMAKE_C_COMPILER_LAUNCHER was" not in said, said
    assert "g.c" in calls.read_text()               # off: the build's own launcher ran


def test_apply_mode_with_gcc_says_so_once_and_applies_nothing(tmp_path, clang) -> None:
    """F64: a database tuned with clang 19 meets gcc (the CMake include's launcher in front
    of it): every compile gets the default flags, the build hears one warning that names
    both compilers (the wrapper's server says it once), and --policy error fails it."""
    from autopass_build.capture.apply.applier import compiler_id
    from autopass_build.core.files import hash_file

    root = tmp_path / "g"
    for name in ("a", "b"):
        (root / f"{name}.c").parent.mkdir(exist_ok=True)
        (root / f"{name}.c").write_text(f"int {name}(int x) {{ return x + 1; }}\n")
    entries = {n: {"flags": ["-mllvm", "-inline-threshold=500"],
                   "source_hash": hash_file(str(root / n))} for n in ("a.c", "b.c")}
    db = root / "autopass.flags.json"
    db.write_text(json.dumps({"schema": 1, "cpu": None, "entries": entries,
                              "toolchain": {"compiler": compiler_id(clang), "target": ""}}))
    gcc = shutil.which("gcc")
    build = f"autopass-cc {gcc} -O2 -c a.c && autopass-cc {gcc} -O2 -c b.c"
    done = subprocess.run([AUTOPASS, "apply", "--db", str(db), "--", "sh", "-c", build],
                          cwd=root, env=env_with_autopass(), capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("this build compiles with") == 1, done.stderr
    assert "(not clang)" in done.stderr and compiler_id(clang) in done.stderr
    subprocess.run([gcc, "-O2", "-c", "a.c", "-o", "plain.o"], cwd=root, check=True)
    assert (root / "a.o").read_bytes() == (root / "plain.o").read_bytes()
    strict = subprocess.run([AUTOPASS, "apply", "--db", str(db), "--policy", "error", "--",
                             "sh", "-c", build], cwd=root, env=env_with_autopass(),
                            capture_output=True, text=True)
    assert strict.returncode != 0 and "autopass: error: this build compiles with" in \
        strict.stderr
