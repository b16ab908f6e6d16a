"""The wrapper against the real clang-19: docs/RELIABILITY.md rows I1-I12.

Each test runs the same command plainly and through `autopass-cc` in the same folder
(so debug info paths match) and asserts byte-identical results plus what was recorded.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from support import AUTOPASS_CC, AUTOPASS_CXX, Recording, run, verify_ir, write

from autopass_build.capture import compiler_args as ca

HELLO = "#include <stdio.h>\nint twice(int x) { return 2 * x; }\n"
MAIN = "int twice(int);\nint main(void) { return twice(21) == 42 ? 0 : 1; }\n"


def both(rec: Recording, clang: str, args: list, outputs: list[str], cxx: bool = False):
    """Run `args` plainly, then through the wrapper; return both results and outputs."""
    cwd = rec.root
    plain = run([clang] + args, cwd)
    plain_files = {o: _read(cwd / o) for o in outputs}
    for o in outputs:
        if (cwd / o).exists():
            (cwd / o).unlink()
    wrapped = run([AUTOPASS_CXX if cxx else AUTOPASS_CC] + args, cwd, rec.env)
    wrapped_files = {o: _read(cwd / o) for o in outputs}
    return plain, wrapped, plain_files, wrapped_files


def _read(path: Path) -> bytes | None:
    return path.read_bytes() if path.exists() else None


def assert_same(plain, wrapped, plain_files, wrapped_files):
    assert wrapped.returncode == plain.returncode
    assert wrapped.stdout == plain.stdout
    assert wrapped.stderr == plain.stderr
    assert wrapped_files == plain_files


# ---- I1 ----------------------------------------------------------------------------------
@pytest.mark.parametrize("args", [
    ["-c", "a.c", "-o"], ["-c", "a.c", "-I"], ["-c", "a.c", "-x"],
    ["-mllvm", "-foo=1", "-c", "a.c"], ["--bogus", "-c", "a.c"],
])
def test_i1_bad_arguments_reach_the_compiler_untouched(rec, clang, args):
    write(rec.root / "a.c", HELLO)
    result = both(rec, clang, args, ["a.o"])
    assert result[0].returncode != 0
    assert_same(*result)
    assert rec.units() == []


# ---- I2 ----------------------------------------------------------------------------------
def test_i2_non_utf8_paths_spaces_and_quoted_defines(rec, clang, opt):
    folder = rec.root / os.fsdecode(b"caf\xe9 dir")
    source = write(folder / "a b.c", '#include <string.h>\nint f(void) { return strlen(NAME); }\n')
    args = ['-DNAME="a b"', "-O2", "-c", str(source.relative_to(rec.root)), "-o", "x y.o"]
    assert_same(*both(rec, clang, args, ["x y.o"]))
    [unit] = rec.units()
    assert os.fsencode(unit.source) == os.fsencode(source)
    assert unit.argv[0] == '-DNAME="a b"'
    verify_ir(opt, rec.store_dir, unit.ir_hash)


# ---- I3 ----------------------------------------------------------------------------------
@pytest.mark.parametrize("args, outputs", [
    (["-c", "missing.c"], ["missing.o"]),
    (["-c", "a.c", "-o", "no/such/dir/a.o"], []),
    (["-E", "a.c"], []),
    (["--version"], []),
    (["-print-prog-name=ld"], []),
    (["-print-search-dirs"], []),
])
def test_i3_passthrough_is_byte_identical(rec, clang, args, outputs):
    write(rec.root / "a.c", HELLO)
    assert_same(*both(rec, clang, args, outputs))
    assert rec.units() == [] and rec.skipped() == []


def test_i3_link_only_and_conftest(rec, clang):
    write(rec.root / "a.c", HELLO)
    write(rec.root / "main.c", MAIN)
    run([clang, "-c", "a.c", "main.c"], rec.root)
    assert_same(*both(rec, clang, ["-o", "prog", "a.o", "main.o"], ["prog"]))
    write(rec.root / "conftest.c", "int main(void){return 0;}\n")
    assert_same(*both(rec, clang, ["-o", "conftest", "conftest.c"], ["conftest"]))
    assert rec.units() == []
    assert [link.output for link in rec.links()] == [str(rec.root / "prog")]


# ---- I4 ----------------------------------------------------------------------------------
def test_i4_response_files_are_passed_on_unchanged(rec, clang):
    write(rec.root / "a.c", 'const char *s = NAME;\n')
    write(rec.root / "flags.rsp", '"-DNAME=\\"a b\\"" -O2 @nested.rsp\n')
    write(rec.root / "nested.rsp", "-c a.c -o a.o\n")
    assert_same(*both(rec, clang, ["@flags.rsp"], ["a.o"]))
    [unit] = rec.units()
    assert unit.argv == ['-DNAME="a b"', "-O2", "-c", "a.c", "-o", "a.o"]


def test_i4_missing_response_file(rec, clang):
    write(rec.root / "a.c", HELLO)
    result = both(rec, clang, ["-c", "a.c", "@missing.rsp"], ["a.o"])
    assert_same(*result)
    assert rec.units() == []


def test_i4_output_named_like_a_response_file(rec, clang):
    write(rec.root / "a.c", HELLO)
    assert_same(*both(rec, clang, ["-c", "a.c", "-o", "@x"], ["@x"]))
    [unit] = rec.units()
    assert unit.output == str(rec.root / "@x")


# ---- I5 / I10 ----------------------------------------------------------------------------
def test_i5_i10_distinct_units(rec, clang, clangxx):
    write(rec.root / "one/a.c", HELLO)
    write(rec.root / "two/a.c", HELLO.replace("2 *", "3 *"))
    write(rec.root / "a.cpp", "int g() { return 1; }\n")
    write(rec.root / "x.c", "int v = V;\n")
    commands = [
        [AUTOPASS_CC, "-c", "one/a.c", "-o", "one/a.o"],
        [AUTOPASS_CC, "-c", "two/a.c", "-o", "two/a.o"],
        [AUTOPASS_CC, "-c", "one/a.c", "-o", "a_c.o"],
        [AUTOPASS_CXX, "-c", "a.cpp", "-o", "a_cpp.o"],
        [AUTOPASS_CC, "-DV=1", "-c", "x.c", "-o", "x1.o"],
        [AUTOPASS_CC, "-DV=2", "-c", "x.c", "-o", "x2.o"],
        # libtool: PIC into .libs/, non-PIC beside it
        [AUTOPASS_CC, "-fPIC", "-DPIC", "-c", "x.c", "-DV=3", "-o", ".libs/x.o"],
        [AUTOPASS_CC, "-c", "x.c", "-DV=3", "-o", "x.o"],
        # the same source through clang and clang++
        [AUTOPASS_CXX, "-c", "two/a.c", "-o", "two/a_cxx.o"],
    ]
    (rec.root / ".libs").mkdir()
    for command in commands:
        assert run(command, rec.root, rec.env).returncode == 0
    units = rec.units()
    assert len(units) == len(commands)
    assert len({u.id for u in units}) == len(commands)
    assert {u.language for u in units if u.source.endswith("two/a.c")} == {"c", "c++"}


# ---- I6 ----------------------------------------------------------------------------------
@pytest.mark.parametrize("dep_args, depfile", [
    (["-MD", "-MF", "x.d", "-MT", "y"], "x.d"),
    (["-MMD", "-MP"], "a.d"),
    (["-Wp,-MD,w.d"], "w.d"),
])
def test_i6_dependency_files_are_the_plain_compiles(rec, clang, dep_args, depfile):
    write(rec.root / "h.h", "#define K 3\n")
    write(rec.root / "a.c", '#include "h.h"\nint k = K;\n')
    assert_same(*both(rec, clang, dep_args + ["-c", "a.c", "-o", "a.o"], ["a.o", depfile]))
    assert len(rec.units()) == 1
    leftovers = [p.name for p in rec.root.iterdir() if p.suffix == ".d" and p.name != depfile]
    assert leftovers == []
    assert list((rec.store_dir / "tmp").iterdir()) == []


# ---- I7 ----------------------------------------------------------------------------------
@pytest.mark.parametrize("args, reason", [
    (["-emit-llvm", "-c", "a.c", "-o", "a.o"], ca.EMIT_LLVM),
    (["-save-temps", "-c", "a.c", "-o", "a.o"], ca.SAVE_TEMPS),
    (["-fprofile-instr-generate", "-c", "a.c", "-o", "a.o"], ca.PROFILE),
])
def test_i7_unsupported_is_recorded_with_a_reason_and_untouched(rec, clang, args, reason):
    write(rec.root / "a.c", HELLO)
    write(rec.root / "h.h", "int h(void);\n")
    assert_same(*both(rec, clang, args, ["a.o"]))
    assert rec.units() == []
    assert [s.reason for s in rec.skipped()] == [reason]


@pytest.mark.parametrize("flag", ["-flto", "-flto=thin"])
def test_i7_a_compile_with_lto_is_a_unit_and_its_bitcode_the_plain_one(rec, clang, opt,
                                                                         flag):
    """A build that is LTO already: its objects are LLVM bitcode, byte for byte the plain
    compile's, and the unit's IR is the one before the pre-link pipeline."""
    write(rec.root / "a.c", HELLO)
    assert_same(*both(rec, clang, [flag, "-O2", "-c", "a.c", "-o", "a.o"], ["a.o"]))
    assert (rec.root / "a.o").read_bytes()[:4] == b"BC\xc0\xde"
    [unit] = rec.units()
    assert flag in unit.argv and rec.skipped() == []
    verify_ir(opt, rec.store_dir, unit.ir_hash)


@pytest.mark.parametrize("args", [["-x", "c-header", "-c", "h.h", "-o", "h.pch"],
                                  ["-x", "c-header", "h.h", "-o", "h.pch"]])
def test_i7_a_precompiled_header_is_built_untouched_and_quietly(rec, clang, args):
    """F35: the header's compile holds nothing to tune (the sources that include it are
    units), so it is passed through and not counted as a skip, with -c or without."""
    write(rec.root / "h.h", "int h(void);\n")
    assert_same(*both(rec, clang, args, ["h.pch"]))
    assert rec.units() == [] and rec.skipped() == [] and rec.links() == []


# ---- I8 ----------------------------------------------------------------------------------
@pytest.mark.parametrize("args", [
    ["-dumpmachine"], ["-dumpversion"], ["-print-search-dirs"], ["-qversion"],
    ["-v", "-MD", "-c", "CMakeCCompilerABI.c", "-o", "abi.o"],
    ["-shared", "conftest.o", "-v", "-Wl,-soname", "-Wl,libx.so.1", "-o", "libx.so.1"],
])
def test_i8_queries_add_not_one_byte(rec, clang, args):
    write(rec.root / "CMakeCCompilerABI.c", "int main(void) { return 0; }\n")
    write(rec.root / "conftest.c", "int f(void) { return 0; }\n")
    run([clang, "-fPIC", "-c", "conftest.c"], rec.root)
    assert_same(*both(rec, clang, args, ["abi.o", "libx.so.1"]))
    assert rec.units() == [] and rec.skipped() == []


def test_i8_queries_run_without_an_extra_process(rec, tmp_path):
    """The wrapper execs the compiler: the compiler's parent is the caller, not Python."""
    fake = tmp_path / "fake-clang"
    fake.write_text("#!/bin/sh\necho parent=$PPID\n")
    fake.chmod(0o755)
    probe = subprocess.run(
        [sys.executable, "-c", "import os, subprocess, sys; "
         "r = subprocess.run(sys.argv[1:], capture_output=True, text=True); "
         "print(r.stdout.strip(), 'me=%d' % os.getpid())", AUTOPASS_CC, str(fake), "-dumpmachine"],
        env=rec.env, capture_output=True, text=True, check=True)
    parent, me = probe.stdout.split()
    assert parent.split("=")[1] == me.split("=")[1]


# ---- I9 ----------------------------------------------------------------------------------
def test_i9_compile_and_link_in_one_call(rec, clang):
    write(rec.root / "a.c", HELLO)
    write(rec.root / "main.c", MAIN)
    assert_same(*both(rec, clang, ["-O2", "-o", "prog", "a.c", "main.c", "-lm"], ["prog"]))
    units = rec.units()
    assert sorted(os.path.basename(u.source) for u in units) == ["a.c", "main.c"]
    assert all(u.output is None for u in units)
    [link] = rec.links()
    assert link.output == str(rec.root / "prog")
    assert sorted(i.path for i in link.inputs if i.kind == "unit") == sorted(u.id for u in units)


def test_i9_c_without_o_lands_in_cwd(rec, clang):
    write(rec.root / "src/a.c", HELLO)
    assert_same(*both(rec, clang, ["-c", "src/a.c"], ["a.o"]))
    [unit] = rec.units()
    assert unit.output == str(rec.root / "a.o")


# ---- I11 ---------------------------------------------------------------------------------
@pytest.mark.parametrize("source", [
    "conftest.c", "CMakeFiles/CMakeScratch/TryCompile-abc/src.c",
    "CMakeFiles/3.25.1/CompilerIdC/CMakeCCompilerId.c",
])
def test_i11_probes_are_not_recorded(rec, clang, source):
    write(rec.root / source, "int main(void) { return 0; }\n")
    assert_same(*both(rec, clang, ["-c", source, "-o", "probe.o"], ["probe.o"]))
    assert rec.units() == [] and rec.skipped() == []


# ---- I12 ---------------------------------------------------------------------------------
def test_i12_distribution_flags_never_fail_the_ir_step(rec, clang, opt):
    write(rec.root / "a.c", '#include <stdio.h>\nvoid p(const char *s) { printf("%s", s); }\n')
    args = ["-g", "-O2", f"-ffile-prefix-map={rec.root}=.", "-fstack-protector-strong",
            "-Wformat", "-Werror=format-security", "-Werror", "-Wunused-command-line-argument",
            "-D_FORTIFY_SOURCE=2", "-Wdate-time", "-c", "a.c", "-o", "a.o"]
    assert_same(*both(rec, clang, args, ["a.o"]))
    [unit] = rec.units()
    verify_ir(opt, rec.store_dir, unit.ir_hash)
    assert rec.log() == []


def test_compile_and_link_with_werror_and_linker_flags(rec, clang):
    write(rec.root / "a.c", HELLO)
    write(rec.root / "main.c", MAIN)
    args = ["-Werror", "-O2", "-Wl,--as-needed", "-o", "prog", "a.c", "main.c", "-lm"]
    assert_same(*both(rec, clang, args, ["prog"]))
    assert len(rec.units()) == 2 and rec.log() == []


def test_wrapper_and_record_path_import_only_light_foundations():
    """Every compile pays for these imports; heavy ones cost 10-45 ms each here."""
    repo = str(Path(__file__).resolve().parents[1])
    code = (f"import sys; sys.path.insert(0, {repo!r}); "
            "import autopass_build.capture.entry, autopass_build.capture.record.recorder; "
            "print(' '.join(sorted(m for m in sys.modules)))")
    modules = subprocess.run([sys.executable, "-IS", "-c", code], capture_output=True,
                             text=True, check=True).stdout.split()
    ours = {m for m in modules if m.startswith("autopass_build")}
    assert ours <= {"autopass_build", "autopass_build.core", "autopass_build.capture",
                    "autopass_build.core.proc", "autopass_build.core.toolchain",
                    "autopass_build.core.files", "autopass_build.core.names",
                    "autopass_build.core.records", "autopass_build.core.errors",
                    "autopass_build.capture.entry",
                    "autopass_build.capture.wrapper", "autopass_build.capture.compiler_args",
                    "autopass_build.capture.invocation",
                    "autopass_build.capture.plan", "autopass_build.capture.host",
                    "autopass_build.capture.option_table",
                    "autopass_build.capture.response_files",
                    "autopass_build.capture.record", "autopass_build.capture.record.spool",
                    "autopass_build.capture.record.recorder",
                    "autopass_build.capture.record.archive"}
    for heavy in ("openai", "subprocess", "sqlite3", "json", "dataclasses", "re", "enum",
                  "inspect", "hashlib", "psutil", "elftools"):
        assert heavy not in modules, f"the wrapper's path imports {heavy}"


def test_s2_shell_metacharacters_are_only_ever_arguments(rec, clang):
    """docs/RELIABILITY.md S2: argv lists end to end, never a shell."""
    write(rec.root / "a.c", "const char *s = NAME;\n")
    canary = rec.root / "canary"
    args = [f'-DNAME="$(touch {canary}); `touch {canary}`"', "-c", "a.c", "-o", "a.o"]
    assert_same(*both(rec, clang, args, ["a.o"]))
    assert len(rec.units()) == 1
    assert not canary.exists()
