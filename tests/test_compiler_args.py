"""Table-driven classification of the command lines real builds produce.

Each row: the arguments (after the compiler), and what must come out: a named skip
reason, or a mode with its sources, output and link inputs.  Rows are tagged with the
docs/RELIABILITY.md row they cover (I1-I12).
"""

from __future__ import annotations

import pytest

from autopass_build.capture import compiler_args as ca
from autopass_build.capture import option_table as ot
from autopass_build.capture.compiler_args import classify
from autopass_build.capture.response_files import split_response_text

SKIP_ROWS = [
    # id, args, reason
    ("I1 -o last", ["-c", "a.c", "-o"], ca.MISSING_ARGUMENT),
    ("I1 -I last", ["-c", "a.c", "-I"], ca.MISSING_ARGUMENT),
    ("I1 -x last", ["-c", "a.c", "-x"], ca.MISSING_ARGUMENT),
    ("I3 -E", ["-E", "a.c"], ca.PREPROCESS),
    ("I3 -E wins over -c", ["-c", "-E", "a.c", "-o", "a.i"], ca.PREPROCESS),
    ("I3 --version", ["--version"], ca.QUERY),
    ("I3 -print-prog-name", ["-print-prog-name=ld"], ca.QUERY),
    ("I3 conftest", ["-o", "conftest", "-g", "-O2", "conftest.c"], ca.PROBE),
    ("I3 gnulib conftest2", ["-o", "conftest", "-O2", "conftest2.c", "libempty.so"], ca.PROBE),
    ("I3 meson probe", ["/b/meson-private/tmpa1b2/testfile.c", "-o",
                        "/b/meson-private/tmpa1b2/output.exe", "-O0"], ca.PROBE),
    ("I3 meson sanity check", ["meson-private/sanitycheckc.c", "-o",
                               "meson-private/sanitycheckc.exe"], ca.PROBE),
    ("I3 no inputs", ["-O2"], ca.QUERY),
    ("I3 -o - (object to stdout)", ["-c", "a.c", "-o", "-"], ca.STDOUT_OUTPUT),
    ("I11 CMake's check_ipo_supported", ["-O2", "-flto=thin", "-c",
     "/b/CMakeFiles/_CMakeLTOTest-CXX/src/foo.cpp", "-o",
     "/b/CMakeFiles/_CMakeLTOTest-CXX/bin/CMakeFiles/foo.dir/foo.cpp.o"], ca.PROBE),
    ("I7 -emit-llvm", ["-emit-llvm", "-c", "a.c"], ca.EMIT_LLVM),
    ("I7 -save-temps", ["-save-temps", "-c", "a.c"], ca.SAVE_TEMPS),
    ("I7 -save-temps=obj", ["-save-temps=obj", "-c", "a.c"], ca.SAVE_TEMPS),
    ("I7 -fprofile-generate", ["-fprofile-generate", "-c", "a.c"], ca.PROFILE),
    ("I7 -fprofile-instr-use", ["-fprofile-instr-use=x.profdata", "-c", "a.c"], ca.PROFILE),
    ("I7 --coverage", ["--coverage", "-c", "a.c"], ca.PROFILE),
    ("I7 pch header", ["-x", "c-header", "-c", "pch.h", "-o", "pch.h.pch"], ca.PCH),
    ("I7 pch header by extension", ["-c", "all.h"], ca.PCH),
    ("F35 pch header without -c", ["-O3", "-x", "c-header", "all.h", "-o", "all.h.pch"], ca.PCH),
    ("I7 modules", ["-fmodules", "-c", "a.m"], ca.MODULES),
    ("I7 module interface", ["-std=c++20", "-c", "m.cppm"], ca.MODULES),
    ("I7 IR input", ["-c", "x.bc", "-o", "x.o"], ca.EMIT_LLVM),
    ("I8 -dumpmachine", ["-dumpmachine"], ca.QUERY),
    ("I8 -dumpversion", ["-dumpversion"], ca.QUERY),
    ("I8 libtool -v link", ["-shared", "conftest.o", "-v", "-Wl,-soname", "-Wl,libx.so.1"],
     ca.VERBOSE),
    ("I8 cmake ABI", ["-v", "-MD", "-c", "/usr/share/cmake-3.25/Modules/CMakeCCompilerABI.c"],
     ca.VERBOSE),
    ("I8 -print-search-dirs", ["-print-search-dirs"], ca.QUERY),
    ("I8 -qversion", ["-qversion"], ca.QUERY),
    ("I8 configure's -V probe", ["-V"], ca.QUERY),
    ("I8 -###", ["-###", "-c", "a.c"], ca.VERBOSE),
    ("I11 cmake try_compile", ["-o", "CMakeFiles/cmTC_1a2b.dir/src.c.o", "-c",
                               "/p/build/CMakeFiles/CMakeScratch/TryCompile-XyZ/src.c"], ca.PROBE),
    ("I11 cmake compiler id", ["CMakeCCompilerId.c"], ca.PROBE),
    ("I11 a flag probe on /dev/null (ninja's configure.py)",
     ["-fdiagnostics-color", "-c", "-x", "c++", "/dev/null", "-o", "/dev/null"], ca.PROBE),
    ("I11 an object thrown away", ["-c", "a.c", "-o", "/dev/null"], ca.PROBE),
    ("I11 compiler id dir", ["-c", "/b/CMakeFiles/3.25.1/CompilerIdC/x.c"], ca.PROBE),
    ("stdin", ["-x", "c", "-c", "-", "-o", "s.o"], ca.STDIN_INPUT),
    ("assembler only", ["-c", "start.S", "-o", "start.o"], ca.ASSEMBLER_SOURCE),
    ("-S", ["-S", "a.c"], ca.ASSEMBLY_OUTPUT),
    ("-M alone", ["-M", "a.c"], ca.DEPENDENCY_ONLY),
    ("-MM alone", ["-MM", "-MF", "a.d", "a.c"], ca.DEPENDENCY_ONLY),
    ("syntax only", ["-fsyntax-only", "a.c"], ca.SYNTAX_ONLY),
    ("two -arch", ["-arch", "x86_64", "-arch", "arm64", "-c", "a.c"], ca.MULTIPLE_ARCH),
    ("fortran", ["-c", "x.f90"], ca.UNSUPPORTED_LANGUAGE),
]


@pytest.mark.parametrize("args, reason", [r[1:] for r in SKIP_ROWS], ids=[r[0] for r in SKIP_ROWS])
def test_skip_reasons(args, reason):
    result = classify(args, "/proj")
    assert isinstance(result, ca.Skip), result
    assert result.reason == reason


def test_quiet_reasons_are_the_passthrough_kinds():
    assert classify(["--version"]).quiet
    assert classify(["-E", "a.c"]).quiet
    assert not classify(["-save-temps", "-c", "a.c"]).quiet  # a line in `autopass units`
    # an assembler source is code autopass cannot tune: listed (zstd's
    # huf_decompress_amd64.S), as the guide says
    assert not classify(["-c", "start.S", "-o", "start.o"]).quiet


@pytest.mark.parametrize("flag", ["-flto", "-flto=thin", "-flto=full", "-flto=auto"])
def test_a_compile_of_a_build_that_is_lto_already_is_a_unit(flag):
    """A release build with link-time optimization of its own (CMake's
    INTERPROCEDURAL_OPTIMIZATION) is recorded as it is: each unit keeps its -flto."""
    inv = classify(["-O3", flag, "-c", "a.cpp", "-o", "a.o"])
    assert isinstance(inv, ca.Invocation) and inv.mode == ca.COMPILE
    assert flag in inv.flag_tokens(ot.R_OPTIMIZATION)


COMPILE_ROWS = [
    # id, args, cxx driver, mode, [(source, language)], output, object path of source 0
    ("plain -c", ["-O2", "-c", "a.c", "-o", "a.o"], False, ca.COMPILE, [("a.c", "c")], "a.o", "a.o"),
    ("I1 unknown flags pass", ["-mllvm", "-foo=1", "--bogus", "-c", "a.c"], False, ca.COMPILE,
     [("a.c", "c")], None, "a.o"),
    ("I9 -c without -o", ["-c", "dir/a.c"], False, ca.COMPILE, [("dir/a.c", "c")], None, "a.o"),
    ("I9 -o before source", ["-o", "out/x.o", "-c", "x.c"], False, ca.COMPILE,
     [("x.c", "c")], "out/x.o", "out/x.o"),
    ("joined -o", ["-c", "x.c", "-oout.o"], False, ca.COMPILE, [("x.c", "c")], "out.o", "out.o"),
    ("I9 compile and link", ["-o", "prog", "a.c", "b.c", "-lm"], False, ca.COMPILE_AND_LINK,
     [("a.c", "c"), ("b.c", "c")], "prog", None),
    ("I10 clang++ compiles .c as C++", ["-c", "a.c"], True, ca.COMPILE, [("a.c", "c++")], None, "a.o"),
    ("-x c++ then -x none", ["-x", "c++", "a.c", "-x", "none", "b.c", "-c"], False, ca.COMPILE,
     [("a.c", "c++"), ("b.c", "c")], None, "a.o"),
    ("joined -xc", ["-xc", "-c", "weird.txt"], False, ca.COMPILE, [("weird.txt", "c")], None, "weird.o"),
    ("C++ extensions", ["-c", "a.cc", "b.cpp", "c.cxx", "d.C"], False, ca.COMPILE,
     [("a.cc", "c++"), ("b.cpp", "c++"), ("c.cxx", "c++"), ("d.C", "c++")], None, "a.o"),
    ("I4 -o @x is an output", ["-c", "a.c", "-o", "@x"], False, ca.COMPILE, [("a.c", "c")], "@x", "@x"),
    ("I12 hardening", ["-g", "-O2", "-ffile-prefix-map=/build/x=.", "-fstack-protector-strong",
                       "-Wformat", "-Werror=format-security", "-D_FORTIFY_SOURCE=2", "-fPIC",
                       "-c", "lib.c", "-o", "lib.o"], False, ca.COMPILE, [("lib.c", "c")],
     "lib.o", "lib.o"),
    ("I6 deps", ["-MD", "-MF", "x.d", "-MT", "y", "-c", "a.c"], False, ca.COMPILE,
     [("a.c", "c")], None, "a.o"),
    ("-c with a .S and a .c", ["-c", "a.c", "b.S"], False, ca.COMPILE, [("a.c", "c")], None, "a.o"),
    ("F35 -include-pch: a unit like any other", ["-include-pch", "p.pch", "-c", "a.c"], False,
     ca.COMPILE, [("a.c", "c")], None, "a.o"),
    ("F35 CMake's PCH", ["-Xclang", "-include-pch", "-Xclang", "/b/cmake_pch.hxx.pch", "-Xclang",
                         "-include", "-Xclang", "/b/cmake_pch.hxx", "-c", "a.cpp"], False,
     ca.COMPILE, [("a.cpp", "c++")], None, "a.o"),
]


@pytest.mark.parametrize("args, cxx, mode, sources, output, obj",
                         [r[1:] for r in COMPILE_ROWS], ids=[r[0] for r in COMPILE_ROWS])
def test_compiles(args, cxx, mode, sources, output, obj):
    inv = classify(args, "/proj", cxx_driver=cxx)
    assert isinstance(inv, ca.Invocation), inv
    assert inv.mode == mode
    assert [(s.path, s.language) for s in inv.sources] == sources
    assert inv.output == output
    assert inv.object_path(inv.sources[0]) == obj


def test_link_only_lists_inputs_in_order():
    inv = classify(["-o", "prog", "main.o", "libdp.a", "-L.", "-lz", "x.so.1"], "/p")
    assert inv.mode == ca.LINK
    assert inv.link_inputs == ("main.o", "libdp.a", "x.so.1")
    assert inv.link_output() == "prog"
    assert inv.flag_tokens(ot.R_LINK) == ["-L.", "-lz"]


def test_default_link_output_is_a_out():
    assert classify(["a.o"], "/p").link_output() == "a.out"


def test_ir_args_drop_outputs_dependencies_and_other_sources():
    inv = classify(["-O3", "-MD", "-MF", "x.d", "-MT", "y", "-Wp,-MMD,z.d", "-MJ", "cdb.json",
                    "-DX=1", "-ftime-trace", "-o", "prog", "a.c", "b.c", "k.o", "-lm",
                    "-Wl,--as-needed"], "/p")
    ir = inv.ir_args(inv.sources[1], "/tmp/out.bc")
    assert ir == ["-O3", "-DX=1", "b.c", "-w", "-Xclang", "-disable-llvm-passes",
                  "-emit-llvm", "-c", "-o", "/tmp/out.bc"]


def test_ir_args_keep_language_position():
    inv = classify(["-x", "c++", "a.txt", "-c", "-o", "a.o"], "/p")
    assert inv.ir_args(inv.sources[0], "t.bc")[:3] == ["-x", "c++", "a.txt"]


def test_opt_level_is_the_last_one():
    assert classify(["-O3", "-O1", "-c", "a.c"], "/p").opt_level == "-O1"
    assert classify(["-c", "a.c"], "/p").opt_level == "-O0"
    assert classify(["-Os", "-c", "a.c"], "/p").opt_level == "-Os"


# ---- I4 response files ----------------------------------------------------------------
def test_response_file_expanded_for_classification(tmp_path):
    (tmp_path / "flags.rsp").write_text('-O2 "-DNAME=\\"a b\\"" \'-DQ=x y\' -c\n@more.rsp')
    (tmp_path / "more.rsp").write_text("src/a.c -o out.o")
    inv = classify(["@flags.rsp"], str(tmp_path))
    assert inv.mode == ca.COMPILE and inv.used_response_file
    assert [s.path for s in inv.sources] == ["src/a.c"]
    assert inv.output == "out.o"
    assert inv.flag_tokens(ot.R_PREPROCESSOR) == ['-DNAME="a b"', "-DQ=x y"]


def test_missing_response_file_is_a_named_skip(tmp_path):
    result = classify(["-c", "a.c", "@nope.rsp"], str(tmp_path))
    assert isinstance(result, ca.Skip) and result.reason == ca.RESPONSE_FILE


def test_self_including_response_file_is_bounded(tmp_path):
    (tmp_path / "loop.rsp").write_text("-c @loop.rsp")
    result = classify(["@loop.rsp", "a.c"], str(tmp_path))
    assert isinstance(result, ca.Skip) and result.reason == ca.RESPONSE_FILE


@pytest.mark.parametrize("text, tokens", [
    ("a b\tc\n", ["a", "b", "c"]),
    ('"a b" c', ["a b", "c"]),
    ("'a \"b' c", ['a "b', "c"]),
    ("a\\ b", ["a b"]),
    ('""', [""]),
    ("", []),
])
def test_split_response_text(text, tokens):
    assert split_response_text(text) == tokens


# ---- I2 bytes ---------------------------------------------------------------------------
def test_non_utf8_and_spaces_round_trip():
    weird = b"caf\xe9 dir/a b.c".decode("utf-8", "surrogateescape")
    inv = classify(["-DNAME=\"a b\"", "-c", weird, "-o", "x y.o"], "/p")
    assert inv.sources[0].path == weird
    assert inv.output == "x y.o"
    assert inv.flag_tokens(ot.R_PREPROCESSOR) == ['-DNAME="a b"']


# -- the option table checks itself (as ccache's compopt does) ----------------------------
def test_option_table_is_sorted_and_has_no_duplicates():
    names = [name for name, _, _ in ot.OPTIONS]
    assert names == sorted(names)
    assert len(set(names)) == len(names)


def test_option_table_bits_are_consistent():
    for name, bits, role in ot.OPTIONS:
        assert name.startswith("-"), name
        assert not (bits & ot.PREFIX and bits & (ot.SEPARATE | ot.JOINED)), name
        assert role in {ot.R_OUTPUT, ot.R_MODE, ot.R_DEPENDENCY, ot.R_SIDE_OUTPUT,
                        ot.R_PREPROCESSOR, ot.R_LANGUAGE, ot.R_OPTIMIZATION, ot.R_LINK,
                        ot.R_OTHER}, name


def test_every_option_is_found_as_itself():
    """No entry is shadowed by a shorter joined or prefix entry it starts with."""
    for name, bits, role in ot.OPTIONS:
        assert ot.lookup(name) == (name, bits, role)


@pytest.mark.parametrize("token, name, role", [
    ("-Bsymbolic", "-Bsymbolic", ot.R_LINK),      # not -B with the value "symbolic"
    ("-B/opt/bin", "-B", ot.R_OTHER),
    ("-MFdeps.d", "-MF", ot.R_DEPENDENCY),        # not -M
    ("-isystem/usr/x", "-isystem", ot.R_PREPROCESSOR),
    ("-includeconfig.h", "-include", ot.R_PREPROCESSOR),
    ("-print-prog-name=ld", "-print-", ot.R_OTHER),
    ("-Wl,--as-needed", "-Wl,", ot.R_LINK),
    ("-ftime-trace=x.json", "-ftime-trace", ot.R_SIDE_OUTPUT),
])
def test_longest_name_wins(token, name, role):
    found = ot.lookup(token)
    assert found is not None and found[0] == name and found[2] == role


def test_unknown_options_are_not_in_the_table():
    assert ot.lookup("-O2") is None and ot.lookup("-fno-unroll-loops") is None
    assert ot.lookup("-emit-llvm") is None        # -e takes a separate value only


def test_bsymbolic_is_a_link_flag_in_a_command():
    inv = classify(["-shared", "-Bsymbolic", "-o", "libx.so", "x.o"])
    assert isinstance(inv, ca.Invocation)
    assert [a.role for a in inv.args if a.tokens == ("-Bsymbolic",)] == [ot.R_LINK]


def test_the_fix_for_clangs_refusals_names_the_warnings_its_errors_name() -> None:
    from autopass_build.capture.compiler_args import CLANG_REJECTS, PROFILE
    from autopass_build.capture.record.skip_fixes import FIXES, fix_for

    indent = "output.c:843:8: error: variable 'p' set but not used " \
             "[-Werror,-Wunused-but-set-variable]"
    pbzip2 = "pbzip2.cpp:1223:75: error: invalid suffix on literal; C++11 requires a " \
             "space between literal and identifier [-Wreserved-user-defined-literal]"
    unknown = "clang: error: unknown argument: '-fipa-pta'"
    assert fix_for(CLANG_REJECTS, [indent, pbzip2, indent, unknown]) == (
        FIXES[CLANG_REJECTS] + " (here: -Wno-reserved-user-defined-literal "
        "-Wno-unused-but-set-variable)")
    assert fix_for(CLANG_REJECTS, [unknown]) == FIXES[CLANG_REJECTS]
    assert fix_for(PROFILE, [indent]) == FIXES[PROFILE]
