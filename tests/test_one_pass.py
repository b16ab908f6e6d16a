"""Record mode's one-pass compile (capture/record/one_pass.py, docs/RELIABILITY.md I16): the
build's own compile with a pass plugin that saves the unit's IR.  The front end runs
once, and the build's objects, dependency files, output and exit status are exactly a
plain compile's (real clang-19 and the real plugin, built as `autopass record` does)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from support import AUTOPASS_CC, Recording, fake_compiler, run, verify_ir, write

from autopass_build.capture import compiler_args as ca
from autopass_build.capture.build_env import wrapper_dir
from autopass_build.capture.native_builds import pass_plugin
from autopass_build.capture.record import one_pass
from autopass_build.core.names import ENV_IR_PLUGIN, ENV_IR_PLUGIN_FOR

# printf("...\n") becomes puts, whose string LLVM names `str` made unique: counted on
# from the front end's `.str.N` in one compile, from 0 in a compile of the saved IR.
STRINGS = ('#include <stdio.h>\n#include "h.h"\n'
           + "".join(f'void f{i}(void) {{ printf("line {i}\\n"); printf("%d", K + {i}); }}\n'
                     for i in range(40)))


@pytest.fixture(scope="module")
def plugin(tmp_path_factory) -> tuple[str, str]:
    built = pass_plugin(wrapper_dir(str(tmp_path_factory.mktemp("fallback"))))
    assert built is not None, "record's IR plugin did not build (llvm-19-dev installed?)"
    return built


def _with_plugin(rec: Recording, plugin: tuple[str, str], **extra: str) -> dict:
    return {**rec.env, ENV_IR_PLUGIN: plugin[0], ENV_IR_PLUGIN_FOR: plugin[1], **extra}


def _logging_compiler(folder: Path, real: str) -> tuple[str, Path]:
    """A script in front of the real compiler that logs each call's arguments."""
    log = folder / "calls.log"
    return fake_compiler(folder, "logged-clang",
                         f'[ "$*" = --version ] || echo "$*" >> "{log}"\n'
                         f'exec "{real}" "$@"\n'), log


@pytest.mark.parametrize("command, eligible", [
    ("-O2 -c a.c -o a.o", True),
    ("-O2 -MD -MF a.d -c a.c", True),
    ("-c a.c b.c", False),                       # two sources: one IR file per call
    ("a.c -o prog", False),                      # compile and link
    ("-c a.c -MJ a.json", False),                # its entry would list the plugin
    ("-c a.c -grecord-command-line", False),     # the object would
    ("-c a.c -frecord-gcc-switches", False),
])
def test_which_commands_take_one_pass(plugin, command, eligible):
    inv = ca.classify(command.split(), ".")
    assert isinstance(inv, ca.Invocation)
    env = {ENV_IR_PLUGIN: plugin[0], ENV_IR_PLUGIN_FOR: plugin[1]}
    assert (one_pass.eligible(inv, env, plugin[1]) is not None) is eligible
    assert one_pass.eligible(inv, {}, plugin[1]) is None
    assert one_pass.eligible(inv, env, "/usr/bin/gcc") is None    # built for another


@pytest.mark.parametrize("args, outputs", [
    (["-O2", "-MMD", "-MP", "-c", "a.c", "-o", "obj/a.o"], ["obj/a.o", "obj/a.d"]),
    (["-O2", "-MD", "-c", "a.c"], ["a.o", "a.d"]),
    (["-O3", "-g", "-Wall", "-Wp,-MD,.deps/a.d", "-c", "a.c", "-o", "a b.o"],
     ["a b.o", ".deps/a.d"]),
    (["-O0", "-fPIC", "-c", "a.c", "-o", "a.o"], ["a.o"]),
])
def test_the_front_end_runs_once_and_leaves_what_a_plain_compile_leaves(
        rec, clang, opt, plugin, args, outputs):
    write(rec.root / "h.h", "#define K 3\n")
    write(rec.root / "a.c", STRINGS + "int unused(int x) { int y; return x; }\n")
    for folder in ("obj", ".deps"):
        (rec.root / folder).mkdir(exist_ok=True)
    plain = run([clang] + args, rec.root)
    expected = {o: (rec.root / o).read_bytes() for o in outputs}
    logged, log = _logging_compiler(rec.root, clang)
    for o in outputs:
        (rec.root / o).unlink()
    wrapped = run([AUTOPASS_CC] + args, rec.root,
                  _with_plugin(rec, (plugin[0], str(Path(logged).resolve())),
                               AUTOPASS_CC=logged))
    assert (wrapped.returncode, wrapped.stdout, wrapped.stderr) == (
        plain.returncode, plain.stdout, plain.stderr)
    assert {o: (rec.root / o).read_bytes() for o in outputs} == expected
    [call] = log.read_text().splitlines()            # one compile: no IR step
    assert "-fpass-plugin=" in call and "-emit-llvm" not in call
    [unit] = rec.units()
    verify_ir(opt, rec.store_dir, unit.ir_hash)
    assert unit.object_hash is not None
    assert list((rec.store_dir / "tmp").iterdir()) == []


def test_the_object_is_the_plain_one_where_an_object_made_from_the_ir_is_not(
        rec, clang, plugin, tmp_path):
    """Why the plugin: the unit's IR compiled again names `.Lstr.N` otherwise (the
    test's own premise is checked first, so that it cannot pass for nothing)."""
    write(rec.root / "h.h", "#define K 3\n")
    write(rec.root / "a.c", STRINGS)
    plain = rec.root / "plain.o"
    subprocess.run([clang, "-O2", "-c", "a.c", "-o", plain], cwd=rec.root, check=True)
    subprocess.run([clang, "-O2", "-c", "a.c", "-o", "a.bc", "-Xclang", "-disable-llvm-passes",
                    "-emit-llvm"], cwd=rec.root, check=True)
    subprocess.run([clang, "-O2", "-c", "-x", "ir", "a.bc", "-o", tmp_path / "from-ir.o"],
                   cwd=rec.root, check=True)
    assert (tmp_path / "from-ir.o").read_bytes() != plain.read_bytes()
    done = run([AUTOPASS_CC, "-O2", "-c", "a.c", "-o", "a.o"], rec.root,
               _with_plugin(rec, plugin))
    assert done.returncode == 0
    assert (rec.root / "a.o").read_bytes() == plain.read_bytes()
    assert len(rec.units()) == 1


def test_a_compile_error_is_said_once_and_records_nothing(rec, clang, plugin):
    write(rec.root / "a.c", "int f(void) { return missing; }\n")
    plain = run([clang, "-O2", "-c", "a.c"], rec.root)
    wrapped = run([AUTOPASS_CC, "-O2", "-c", "a.c"], rec.root, _with_plugin(rec, plugin))
    assert plain.returncode == wrapped.returncode == 1
    assert wrapped.stderr == plain.stderr and wrapped.stderr.count(b"error:") == 1
    assert not (rec.root / "a.o").exists()
    assert rec.units() == []
    assert list((rec.store_dir / "tmp").iterdir()) == []


def test_a_plugin_that_writes_nothing_leaves_the_build_alone(rec, clang, clangxx, plugin,
                                                              tmp_path):
    """Its IR not written (a full disk, say): the object is still the plain one, and the
    unit is listed as not captured, with the reason."""
    config = shutil.which("llvm-config-19") or "llvm-config"
    flags = subprocess.run([config, "--cxxflags"], capture_output=True, text=True,
                           check=True).stdout.split()
    source = write(tmp_path / "mute.cpp", '#include "llvm/Passes/PassPlugin.h"\n'
                   'extern "C" llvm::PassPluginLibraryInfo llvmGetPassPluginInfo() {\n'
                   '  return {LLVM_PLUGIN_API_VERSION, "mute", "1", [](llvm::PassBuilder &) {}};\n'
                   "}\n")
    mute = tmp_path / "mute.so"
    subprocess.run([clangxx, "-shared", "-fPIC", *flags, source, "-o", mute], check=True)
    write(rec.root / "a.c", "int f(int x) { return x + 1; }\n")
    subprocess.run([clang, "-O2", "-c", "a.c", "-o", "plain.o"], cwd=rec.root, check=True)
    done = run([AUTOPASS_CC, "-O2", "-c", "a.c"], rec.root,
               _with_plugin(rec, (str(mute), plugin[1])))
    assert done.returncode == 0 and done.stderr == b""
    assert (rec.root / "a.o").read_bytes() == (rec.root / "plain.o").read_bytes()
    assert rec.units() == []
    [skip] = rec.skipped()
    assert skip.reason == "ir_failed" and "not written by the record plugin" in skip.detail


def test_cmake_launcher_options_name_the_plugin(rec, clang, plugin):
    """AutoPass.cmake's record mode has no `autopass record` to name the plugin in the
    environment: its launcher options do, and the compile takes one pass."""
    write(rec.root / "a.c", STRINGS.replace('#include "h.h"\n', "#define K 3\n"))
    logged, log = _logging_compiler(rec.root, clang)
    env = {k: v for k, v in rec.env.items() if k not in (ENV_IR_PLUGIN, ENV_IR_PLUGIN_FOR)}
    done = run([AUTOPASS_CC, "--autopass-mode=record", f"--autopass-store={rec.store_dir}",
                f"--autopass-root={rec.root}", f"--autopass-ir-plugin={plugin[0]}",
                f"--autopass-ir-plugin-for={Path(logged).resolve()}",
                logged, "-O2", "-c", "a.c", "-o", "a.o"], rec.root, env)
    assert done.returncode == 0, done.stderr
    [call] = log.read_text().splitlines()            # one compile: no IR step
    assert "-fpass-plugin=" in call and "-emit-llvm" not in call
    [unit] = rec.units()
    assert unit.source_rel == "a.c"
