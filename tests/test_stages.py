"""Whole-program stages: compositions of PGO and LTO measured against the recorded
build, the best made the baseline of the per-file search, written to the database's
target section, rebuilt by apply mode (bitcode units, an lld link) bit for bit; a
stage that cannot run here is skipped with its reason, in tuning and in apply mode
(docs/RELIABILITY.md F15, F16)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from support import AUTOPASS, recorded_copy

from autopass_build.candidates import stages
from autopass_build.candidates.replay import Replayer
from autopass_build.capture.apply.bitcode import carries_bitcode
from autopass_build.capture.build_env import apply_environment
from autopass_build.core import flags_db, names, stage_flags, toolchain
from autopass_build.core.apply_terms import ApplyPolicy
from autopass_build.store.index import Store
from autopass_build.store.targets import resolve
from autopass_build.tuning.journal import Journal, Phase

LTO_MINI = Path(__file__).parent / "data" / "lto-mini"
CONFIG = """
[build]
command = "make -s"
clean = "make -s clean"
[run]
command = ["{exe}", "50"]
[measure]
metric = "instructions"
layout_check = false
min_pairs = 2
max_pairs = 2
[tune]
strategy = "random"
budget = 4
stages = ["pgo", "lto"]
"""


def recorded(root: Path, target: str = "") -> Path:
    return recorded_copy(LTO_MINI, root, CONFIG, ("make", "-s", *([target] if target else [])))


def test_stage_flags_are_computed_in_one_place() -> None:
    assert names.STAGES == tuple(s.value for s in stages.Stage)[:len(names.STAGES)]
    full = stage_flags.flags(("pgo", "lto"), "-O3", "-fprofile-instr-use=p", lld="/x/ld.lld")
    assert full.unit_flags == ("-fprofile-instr-use=p", "-flto", "-ffat-lto-objects")
    assert full.link_flags == ("-flto", "-ffat-lto-objects", "--ld-path=/x/ld.lld",
                               "-Wl,--fat-lto-objects", "-Wl,--undefined-version", "-O3")
    thin = stage_flags.flags(("thinlto",), "-Os")
    assert thin.unit_flags == ("-flto=thin", "-ffat-lto-objects")
    assert thin.link_flags[-1] == "-O2"
    assert stage_flags.flags(("pgo",), "-O2") == stage_flags.StageFlags((), ())
    assert stages.parse("pgo, lto") == (stages.Stage.PGO, stages.Stage.LTO)
    with pytest.raises(ValueError, match="no stage 'blot'"):
        stages.parse("blot")
    assert stage_flags.flags(("bolt",), "-O2").link_flags == ("-Wl,--emit-relocs",)


def test_the_symbol_stripping_part_of_a_link_argument_is_told_apart() -> None:
    """F33: replayed links drop only what strips the symbol table."""
    drop = stage_flags.without_strip_all
    assert drop(("-s",)) == drop(("-Wl,-s",)) == drop(("-Xlinker", "--strip-all")) == ()
    assert drop(("-Wl,-s,-O1",)) == ("-Wl,-O1",)
    for kept in (("-Wl,-S",), ("-Wl,--strip-debug",), ("-shared",), ("-Wl,-soname,libs.so",),
                 ("-Xlinker", "-rpath")):
        assert drop(kept) == kept
    assert stage_flags.strips_all(["cc", "-Xlinker", "-s", "a.o"])
    assert not stage_flags.strips_all(["cc", "-Wl,-S", "-Wl,-soname,s", "a.o"])


def test_tune_chooses_a_stage_and_apply_rebuilds_it_bit_for_bit(tmp_path) -> None:
    root = recorded(tmp_path / "mini")
    done = subprocess.run([AUTOPASS, "tune"], cwd=root, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    journal = Journal.latest(str(root / ".autopass"))
    measured = {e.stages: e for e in journal.of_phase(Phase.STAGE)}
    assert set(measured) == {"pgo+lto", "lto"}            # half the budget of 4
    assert measured["lto"].verdict == "faster" and measured["lto"].ratio < 0.9
    searched = journal.of_phase(Phase.SEARCH)
    assert sum(not e.identical for e in searched) == 2    # the rest of the budget
    db = flags_db.load(str(root / "autopass.flags.json"))
    assert db.target is not None and db.target.output == "ltomini"
    assert set(db.target.stages) in ({"lto"}, {"pgo", "lto"})
    assert db.target.units == ("main.c", "ops.c")
    assert "baseline of the per-file search" in done.stdout
    chosen = min(measured.values(), key=lambda e: e.ratio)
    assert f"baseline: {journal.baseline}, " in done.stderr     # marked as it was chosen
    verify = subprocess.run([AUTOPASS, "verify"], cwd=root, capture_output=True, text=True)
    assert verify.returncode == 0, verify.stderr
    assert "two clean tuned builds are bit-identical" in verify.stdout
    assert carries_bitcode((root / "ops.o").read_bytes())     # apply mode built bitcode
    # what ships is what was measured: the same instruction ratio as the stage's A/B
    speedup = float(verify.stdout.split("speedup ")[1].split("x")[0])
    assert speedup == pytest.approx(1 / chosen.ratio, rel=1e-3)
    report = subprocess.run([AUTOPASS, "report"], cwd=root, capture_output=True, text=True)
    assert "stage lto:" in report.stdout and "baseline of the per-file search" in report.stdout


def test_lto_without_lld_is_skipped_in_tuning_and_in_apply_mode(tmp_path) -> None:
    root = recorded(tmp_path / "mini")
    no_lld = {**os.environ, "AUTOPASS_LLD": str(tmp_path / "no-ld.lld")}
    done = subprocess.run([AUTOPASS, "tune", "--budget", "2"], cwd=root, env=no_lld,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "stage lto skipped: lld not found" in done.stderr
    journal = Journal.latest(str(root / ".autopass"))
    assert all("lto" not in e.stages for e in journal.of_phase(Phase.STAGE))
    # a database that asks for LTO, applied where there is no lld: one warning a
    # compile, and the plain objects
    db = flags_db.empty()
    db.target = flags_db.TargetStages("ltomini", ("lto",), "-O2", ("main.c", "ops.c"))
    flags_db.save(str(root / "autopass.flags.json"), db)
    subprocess.run(["make", "-s", "clean"], cwd=root, check=True)
    applied = subprocess.run([AUTOPASS, "apply", "--", "make", "-s"], cwd=root, env=no_lld,
                             capture_output=True, text=True)
    assert applied.returncode == 0, applied.stderr
    assert "needs lld" in applied.stderr and "Traceback" not in applied.stderr
    plain = (root / "ops.o").read_bytes()
    assert plain[:4] == b"\x7fELF" and not carries_bitcode(plain)
    ran = subprocess.run(["./ltomini", "3"], cwd=root, capture_output=True, text=True)
    assert ran.returncode == 0 and ran.stdout.strip()


def test_another_binary_linking_the_bitcode_units_gets_the_lto_link_too(tmp_path) -> None:
    """ops.o is linked into ltomini and into other (`make both`): the database tunes
    ltomini with LTO, and apply mode gives other's link the LTO flags too, because its
    inputs carry bitcode; both binaries build and run."""
    root = recorded(tmp_path / "both", "both")
    store = Store.open_existing(str(root / ".autopass"))
    [target] = [t for t in resolve(store, str(root)) if t.output_rel == "ltomini"]
    assert stages.unavailable(stages.Stage.LTO, target) == ""
    db = flags_db.empty()
    db.target = flags_db.TargetStages("ltomini", ("lto",), "-O2", ("main.c", "ops.c"))
    flags_db.save(str(root / "autopass.flags.json"), db)
    subprocess.run(["make", "-s", "clean"], cwd=root, check=True)
    applied = subprocess.run([AUTOPASS, "apply", "--", "make", "-s", "both"], cwd=root,
                             capture_output=True, text=True)
    assert applied.returncode == 0, applied.stderr
    assert "autopass: warning" not in applied.stderr, applied.stderr
    assert carries_bitcode((root / "ops.o").read_bytes())
    for program, args in (("./ltomini", ["3"]), ("./other", [])):
        ran = subprocess.run([program, *args], cwd=root, capture_output=True, text=True)
        assert ran.returncode == 0 and ran.stdout.strip(), ran.stderr
        comment = subprocess.run(["readelf", "-p", ".comment", program], cwd=root,
                                 capture_output=True, text=True, check=True).stdout
        assert "LLD" in comment, program     # the LTO link, with the wrapper's own tools


def test_a_unit_out_of_lto_gets_its_own_flags_in_tuning_and_in_apply_mode(tmp_path) -> None:
    """Under the lto stage the link re-optimizes every bitcode unit with its own options,
    so a unit's codegen flag (here function alignment) leaves the program byte for byte
    as it was; with the space's leave_lto value (-fno-lto) the unit is machine code built
    with its flags.  Apply mode builds that unit so, the others as bitcode, and the
    object is the one replay measured."""
    from autopass_build.candidates.candidate import same_program
    from autopass_build.candidates.fidelity import compare_objects

    root = recorded(tmp_path / "mini")
    store = Store.open_existing(str(root / ".autopass"))
    [target] = [t for t in resolve(store, str(root)) if t.output_rel == "ltomini"]
    units = {u.source_rel: u for u in store.units()}
    lto = stage_flags.flags(("lto",), "-O2", lld=toolchain.find_tool("ld.lld"))
    replayer = Replayer(store)
    aligned = ("-mllvm", "-align-all-functions=6")

    def build(ops_flags: tuple[str, ...]):
        flags = {uid: lto.unit_flags for uid in target.runtime_units()}
        flags[units["ops.c"].id] = lto.unit_flags + ops_flags
        return replayer.build(target.output, flags, lto.link_flags)

    base = build(())
    assert same_program(base, build(aligned))                 # the LTO link dropped it
    out_of_lto = build(("-fno-lto",) + aligned)
    assert not same_program(base, out_of_lto)

    _applied_under_lto(root, {"ops.c": flags_db.FlagsEntry(("-fno-lto",) + aligned,
                                                      units["ops.c"].source_hash)})
    assert carries_bitcode((root / "main.o").read_bytes())
    assert not carries_bitcode((root / "ops.o").read_bytes())
    replayed = Path(replayer.object_for(units["ops.c"], lto.unit_flags + ("-fno-lto",)
                                        + aligned)).read_bytes()
    assert compare_objects(replayed, (root / "ops.o").read_bytes())[0]   # what ships
    ran = subprocess.run(["./ltomini", "3"], cwd=root, capture_output=True, text=True)
    expected = subprocess.run([base.binary, "3"], env={**os.environ, **base.env},
                              capture_output=True, text=True)
    assert ran.returncode == 0 and ran.stdout == expected.stdout, ran.stderr


@pytest.mark.parametrize("allowed, leaves", [('["lto"]', True), ('["pgo"]', False)])
def test_the_search_may_take_a_unit_out_of_lto_only_under_lto(tmp_path, allowed, leaves) -> None:
    """With LTO chosen the rules agent takes a hot unit out of it; here that is slower
    (LTO inlines ops.c's `apply` into main's loop), so no value is then tried with the
    unit out of LTO.  Without an LTO stage -fno-lto is not in the space.  Decisions
    carried in the IR, which reach the code under LTO, come first ([tune].decisions off
    here: this is about the unit's flags)."""
    root = recorded(tmp_path / "mini")
    config = (root / "autopass.toml").read_text()
    (root / "autopass.toml").write_text(config.replace('"random"', '"agent"')
                                        .replace('["pgo", "lto"]', allowed)
                                        + "decisions = false\n")
    budget = "8" if leaves else "5"      # without LTO, a few candidates show it is absent
    done = subprocess.run([AUTOPASS, "tune", "--budget", budget], cwd=root,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    journal = Journal.latest(str(root / ".autopass"))
    assert journal.of_phase(Phase.STAGE)[0].stages == allowed[2:5]
    assert journal.of_phase(Phase.SEARCH), done.stderr
    searched = {" ".join(e.flags.values()): e for e in journal.of_phase(Phase.SEARCH)}
    out_of_lto = [flags for flags in searched if "-fno-lto" in flags]
    assert bool(out_of_lto) is leaves, list(searched)
    if leaves:
        assert out_of_lto == ["-fno-lto"] and searched["-fno-lto"].verdict == "slower"


@pytest.mark.parametrize("library, folder", [("libtwin.so", "pic"), ("libconv.so", "pic"),
                                             ("static-prog", "st")])
def test_identical_twin_objects_map_to_the_unit_the_link_named(tmp_path, library,
                                                               folder) -> None:
    """libtool compiles a library source twice, PIC and plain (PIE on Debian's clang),
    and their objects are often byte-identical while their IR is not.  The library's
    link named the PIC object; taking the newer PIE twin for it put a PIE module into
    the LTO link of a shared library, and clang chose local-exec TLS for tls.c: the link
    failed, and jq lost its LTO stage.  The unit whose output the link named is used;
    for an archive's member (libconv.so: libtool's convenience library; static-prog:
    an archive made elsewhere, as CMake does), the one made in the folder that holds
    the archive's members under their own names."""
    root = tmp_path / "twin"
    shutil.copytree(Path(__file__).parent / "data" / "twin-mini", root)
    subprocess.run([AUTOPASS, "record", "--", "make", "-s"], cwd=root, check=True,
                   capture_output=True)
    assert (root / "pic" / "plain.o").read_bytes() == (root / "plain.o").read_bytes()
    store = Store.open_existing(str(root / ".autopass"))
    [linked] = [t for t in resolve(store, str(root)) if t.output_rel == library]
    units = {u.id: u for u in store.units()}
    assert sorted(os.path.relpath(units[u].output, root) for u in linked.units
                  if units[u].source_rel != "main.c") == [f"{folder}/plain.o", f"{folder}/tls.o"]
    replayer = Replayer(store)
    lto = stage_flags.flags(("lto",), "-O2", lld=toolchain.find_tool("ld.lld"))
    [prog] = [t for t in resolve(store, str(root)) if t.output_rel == "prog"]
    built = replayer.build(prog.output, {u: lto.unit_flags for u in prog.runtime_units()},
                           lto.link_flags)
    ran = subprocess.run([built.binary], env={**os.environ, **built.env},
                         capture_output=True, text=True)
    assert ran.stdout == "42\n", ran.stderr


def _prog_built_under_lto(root: Path, build: str):
    """`build` (a shell command making `prog` in `root`) recorded, then `prog` replayed
    with the lto stage's flags."""
    subprocess.run([AUTOPASS, "record", "--", "sh", "-c", build], cwd=root, check=True,
                   capture_output=True)
    store = Store.open_existing(str(root / ".autopass"))
    [prog] = [t for t in resolve(store, str(root)) if t.output_rel == "prog"]
    lto = stage_flags.flags(("lto",), "-O2", lld=toolchain.find_tool("ld.lld"))
    return Replayer(store).build(prog.output, {u: lto.unit_flags for u in prog.runtime_units()},
                                 lto.link_flags)


def _applied_under_lto(root: Path, entries: dict[str, flags_db.FlagsEntry]
                       ) -> subprocess.CompletedProcess:
    """`make` in `root` (lto-mini's ltomini) rebuilt by `autopass apply` from a database
    naming the lto stage and `entries`, without a warning."""
    db = flags_db.empty()
    db.target = flags_db.TargetStages("ltomini", ("lto",), "-O2", ("main.c", "ops.c"))
    db.entries.update(entries)
    flags_db.save(str(root / "autopass.flags.json"), db)
    subprocess.run(["make", "-s", "clean"], cwd=root, check=True)
    applied = subprocess.run([AUTOPASS, "apply", "--", "make", "-s"], cwd=root,
                             capture_output=True, text=True)
    assert applied.returncode == 0, applied.stderr
    assert "autopass: warning" not in applied.stderr, applied.stderr
    return applied


def test_a_version_script_naming_absent_symbols_links_under_lto(tmp_path) -> None:
    """libxml2's libxml2.syms lists functions its configure left out.  GNU ld, the
    build's linker, lets that pass; lld, the LTO stages' linker, refused ("version script
    assignment of 'LIBXML2_2.4.30' to symbol 'docbCreateFileParserCtxt' failed"), and
    libxml2.so lost every LTO stage (F34)."""
    root = tmp_path / "vs"
    root.mkdir()
    (root / "lib.c").write_text("int present(int x) { return x * 7; }\n")
    (root / "main.c").write_text('#include <stdio.h>\nint present(int);\n'
                                 'int main(void) { printf("%d\\n", present(6)); return 0; }\n')
    (root / "v.map").write_text("V_1 { global: present; absent_since_configure; local: *; };\n")
    build = ("cc -O2 -fPIC -c lib.c && cc -shared -Wl,--version-script=v.map lib.o -o libv.so"
             " && cc -O2 main.c -L. -lv -Wl,-rpath,'$ORIGIN' -o prog")
    built = _prog_built_under_lto(root, build)
    ran = subprocess.run([built.binary], env={**os.environ, **built.env},
                         capture_output=True, text=True)
    assert ran.stdout == "42\n", ran.stderr


def test_a_shared_library_of_objects_without_pic_names_the_fix_under_lto(tmp_path) -> None:
    """libgsm's Debian Makefile links libgsm.so from objects compiled without -fPIC
    (clang's default PIE).  GNU ld lets it pass; under LTO the library's data is in the
    one module, reached directly, and lld refuses ("relocation R_X86_64_PC32 cannot be
    used against symbol 'gsm_DLB'"), a reason cut off mid-word in tune's summary (F61).
    Not fixed: the stage fails, its reason now says what the user can change."""
    from autopass_build.core.outcome import EvaluationError, Outcome

    root = tmp_path / "nopic"
    root.mkdir()
    (root / "table.c").write_text("int gain_table[4] = {3, 5, 7, 11};\n")
    (root / "filter.c").write_text("extern int gain_table[4];\n"
                                   "int gain(int i) { return gain_table[i & 3]; }\n")
    (root / "main.c").write_text('#include <stdio.h>\nint gain(int);\n'
                                 'int main(void) { printf("%d\\n", gain(6)); return 0; }\n')
    build = ("cc -O2 -c table.c && cc -O2 -c filter.c && cc -shared table.o filter.o -o "
             "libnp.so && cc -O2 main.c -L. -lnp -Wl,-rpath,'$ORIGIN' -o prog")
    with pytest.raises(EvaluationError) as failed:
        _prog_built_under_lto(root, build)
    assert failed.value.outcome == Outcome.LINK_FAIL
    said = str(failed.value)
    assert said.startswith("relinking libnp.so failed: objects without -fPIC, which lld "
                           "refuses in an LTO shared library: add -fPIC to their flags"), said
    assert "gain_table" in said      # lld's own words follow


SAME_NAME_MEMBERS = """CC ?= cc
all: prog libsub.so
prog: main.c x86/feat.c arm/feat.c
	$(CC) -O2 -c x86/feat.c -o x86/feat.o
	$(CC) -O2 -c arm/feat.c -o arm/feat.o
	$(CC) -O2 -fPIC -c x86/feat.c -o x86/feat.shlib.o
	$(CC) -O2 -fPIC -c arm/feat.c -o arm/feat.shlib.o
	ar cr libsub.a x86/feat.o arm/feat.o
	$(CC) -O2 -o $@ main.c libsub.a
libsub.so: prog
	$(CC) -shared -o $@ x86/feat.shlib.o arm/feat.shlib.o
"""


def test_archive_members_of_one_name_map_to_their_own_units(tmp_path) -> None:
    """libdeflate 1.14 archives lib/x86/cpu_features.o and lib/arm/cpu_features.o: two
    members named cpu_features.o, neither in the folder of the other members, each
    byte-identical to its PIC twin cpu_features.shlib.o (made later, for the shared
    library).  The members mapped to the twins, and `units` said the objects the archive
    holds were "in no recorded link" (F26).  The member's own name picks the unit."""
    root = tmp_path / "same"
    for arch in ("x86", "arm"):
        (root / arch).mkdir(parents=True)
        (root / arch / "feat.c").write_text(f"int feat_{arch}(void) {{ return 3; }}\n")
    (root / "main.c").write_text("int feat_x86(void); int feat_arm(void);\n"
                                 "int main(void) { return feat_x86() - feat_arm(); }\n")
    (root / "Makefile").write_text(SAME_NAME_MEMBERS)
    subprocess.run([AUTOPASS, "record", "--", "make", "-s"], cwd=root, check=True,
                   capture_output=True)
    assert (root / "x86/feat.o").read_bytes() == (root / "x86/feat.shlib.o").read_bytes()
    store = Store.open_existing(str(root / ".autopass"))
    units = {u.id: u for u in store.units()}
    [prog] = [t for t in resolve(store, str(root)) if t.output_rel == "prog"]
    assert sorted(os.path.relpath(units[u].output, root) for u in prog.units
                  if units[u].source_rel != "main.c") == ["arm/feat.o", "x86/feat.o"]
    listed = subprocess.run([AUTOPASS, "units"], cwd=root, capture_output=True, text=True)
    assert "4 units are" not in listed.stdout and "no recorded link" not in listed.stdout


SEVERAL_AT_ONCE = {
    "compile and link": "ltomini: main.c ops.c\n\t$(CC) $(CFLAGS) -o $@ main.c ops.c\n",
    "compile, then link": "ltomini: main.c ops.c\n\t$(CC) $(CFLAGS) -c main.c ops.c\n"
                          "\t$(CC) $(CFLAGS) -o $@ main.o ops.o\n",
}


@pytest.mark.parametrize("how", list(SEVERAL_AT_ONCE))
def test_a_command_compiling_several_sources_gets_the_stages(tmp_path, how) -> None:
    """F23: `cc -c lz4.c lz4hc.c ...` (lz4's library) or `cc a.c b.c -o prog`: one command,
    several units of the tuned binary.  The stages' flags are the same for all of them,
    so they apply (they were silently dropped: lz4's tuned build measured 1.058x in
    tuning and 0.996x in `verify`), and a link of the bitcode it makes gets lld."""
    root = tmp_path / "mini"
    shutil.copytree(LTO_MINI, root)
    (root / "Makefile").write_text("CC ?= cc\nCFLAGS ?= -O2\n" + SEVERAL_AT_ONCE[how]
                                   + "clean:\n\trm -f *.o ltomini\n")
    subprocess.run([AUTOPASS, "record", "--", "make", "-s"], cwd=root, check=True,
                   capture_output=True)
    applied = _applied_under_lto(root, {})
    assert "(compiles, links) took the tuned flags" in applied.stderr
    comment = subprocess.run(["readelf", "-p", ".comment", "ltomini"], cwd=root,
                             capture_output=True, text=True, check=True).stdout
    assert "LLD" in comment          # the LTO link ran
    if how == "compile, then link":
        assert carries_bitcode((root / "ops.o").read_bytes())
    ran = subprocess.run(["./ltomini", "3"], cwd=root, capture_output=True, text=True)
    assert ran.returncode == 0 and ran.stdout.strip()


SYMVER = """
int f_new(int x) { return x + 1; }
int f_old(int x) { return x + 2; }
int g_new(int x) { return x * 3; }
int g_old(int x) { return x * 5; }
__asm__(".symver f_old,f@V1");
__asm__(".symver f_new,f@@V2");
__asm__(".symver g_old,g@V1");
__asm__(".symver g_new,g@@V2");
"""


def test_an_lto_object_with_symbol_versions_is_reproducible_in_apply_mode(tmp_path) -> None:
    """F21: clang 19 orders an -flto object's `.symver` symbols by heap address: compiled
    twice, it differs about one time in three (found in xz's liblzma, whose tuned
    build `verify` called not reproducible).  Apply mode compiles LTO units with a
    fixed address layout, so ten compiles give one object."""
    root = recorded(tmp_path / "mini")
    (root / "ops.c").write_text((root / "ops.c").read_text() + SYMVER)
    db = flags_db.empty()
    db.target = flags_db.TargetStages("ltomini", ("lto",), "-O2", ("main.c", "ops.c"))
    flags_db.save(str(root / "autopass.flags.json"), db)
    env = apply_environment(str(root), str(root / "autopass.flags.json"), ApplyPolicy.WARN,
                            str(tmp_path / "work"))
    objects = set()
    for _ in range(10):
        done = subprocess.run([env["CC"], "-O2", "-c", "ops.c", "-o", "ops.o"], cwd=root,
                              env=env, capture_output=True)
        assert done.returncode == 0, done.stderr
        objects.add((root / "ops.o").read_bytes())
    [built] = objects
    assert carries_bitcode(built)


def test_a_database_target_section_of_the_wrong_shape_is_refused(tmp_path) -> None:
    path = tmp_path / "db.json"
    for target in ({"output": "x", "stages": ["bolt"], "opt_level": "-O2", "units": []},
                   {"output": "x", "stages": ["lto"], "opt_level": "-O0", "units": []},
                   {"output": 3, "stages": [], "opt_level": "-O2", "units": []}, "lto"):
        path.write_text(json.dumps({"schema": 1, "entries": {}, "target": target}))
        with pytest.raises(flags_db.FlagsDbError, match='"target" (must be null|lists the)'):
            flags_db.load(str(path))


def test_lld_is_found_for_the_llvm_in_use() -> None:
    found = stages.lld()
    assert found is not None and os.path.basename(found).startswith("ld.lld")
    assert toolchain.find_tool("ld.lld") == found


def test_a_training_run_that_fails_skips_the_pgo_compositions(tmp_path) -> None:
    root = recorded(tmp_path / "mini")
    config = (root / "autopass.toml").read_text().replace(
        '[run]\n', '[run]\ntrain = ["sh", "-c", "exit 3", "{exe}"]\n')
    (root / "autopass.toml").write_text(config)
    done = subprocess.run([AUTOPASS, "tune", "--budget", "4"], cwd=root, capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stderr
    assert "stage pgo skipped: training failed" in done.stderr
    measured = [e.stages for e in Journal.latest(str(root / ".autopass")).of_phase(Phase.STAGE)]
    assert measured == ["lto"]


@pytest.mark.parametrize("levels, expected", [({"-O1"}, "-O2"), ({"-Os", "-O2"}, "-O2"),
                                              ({"-O2", "-O3"}, "-O3"), (set(), "-O2")])
def test_the_lto_level_written_is_one_the_database_accepts(levels, expected) -> None:
    """Units at -O1 or -Os: the LTO link's level is -O2, which the database's loader
    takes (it refused the -O1 the tuner once wrote)."""
    from types import SimpleNamespace

    from autopass_build.tuning.stage_choice import opt_level
    evaluator = SimpleNamespace(units=[SimpleNamespace(opt_level=level) for level in levels])
    assert opt_level(evaluator) == expected and expected in stage_flags.LTO_LEVELS


def test_verify_says_what_of_the_database_the_builds_lack(tmp_path) -> None:
    """F65: a PGO profile replaced by another file: apply builds without it (one warning)
    and verify said "two clean tuned builds are bit-identical ... faster" without a word
    of it; now it names what was not applied and calls the builds partly tuned, and
    --policy error fails the verification."""
    root = recorded(tmp_path / "mini")
    (root / "autopass.profdata").write_bytes(b"not the profile it was tuned with\n")
    db = flags_db.empty()
    db.target = flags_db.TargetStages("ltomini", ("pgo", "lto"), "-O2", ("main.c", "ops.c"))
    db.profile = flags_db.ProfileRef("autopass.profdata", "0" * 40)
    db.toolchain = {"compiler": "", "target": ""}
    flags_db.save(str(root / "autopass.flags.json"), db)
    verify = subprocess.run([AUTOPASS, "verify", "--no-measure"], cwd=root,
                            capture_output=True, text=True)
    assert verify.returncode == 0, verify.stderr
    assert "two clean partly tuned builds are bit-identical" in verify.stdout, verify.stdout
    lacking = verify.stdout.split("could not be applied")[1]
    assert "autopass.profdata is not the PGO profile" in lacking, verify.stdout
    assert "of what was tuned: the PGO profile not applied" in lacking, verify.stdout
    strict = subprocess.run([AUTOPASS, "verify", "--no-measure", "--policy", "error"],
                            cwd=root, capture_output=True, text=True)
    assert strict.returncode == 2 and "PGO profile" in strict.stderr, strict.stderr


def test_a_large_program_measures_pgo_thinlto_second() -> None:
    """A full-LTO baseline makes every per-file candidate of a large program cost a
    clean build: PGO + ThinLTO, as fast on cppcheck and three times cheaper a candidate,
    comes right after PGO + full LTO, so that a short stage budget compares them."""
    from autopass_build.candidates.stages import COMPOSITIONS, Stage
    from autopass_build.tuning.stage_choice import LARGE_PROGRAM_UNITS, by_cost

    every = list(COMPOSITIONS)
    assert by_cost(every, LARGE_PROGRAM_UNITS - 1) == every
    large = by_cost(every, LARGE_PROGRAM_UNITS)
    assert large[:2] == [(Stage.PGO, Stage.LTO), (Stage.PGO, Stage.THINLTO)]
    assert sorted(large) == sorted(every)
    thin_first = [(Stage.PGO, Stage.THINLTO), (Stage.THINLTO,), (Stage.PGO,)]
    assert by_cost(thin_first, 400) == thin_first             # already first: kept once


def test_a_large_program_keeps_thinlto_when_full_lto_is_no_faster() -> None:
    """Two verified compositions that differ only in full LTO against ThinLTO, within
    COST_TIE of each other: a large program keeps ThinLTO (a per-file candidate relinks
    only what changed); a small one, or a clear gap, keeps the faster one."""
    from autopass_build.candidates.stages import Stage
    from autopass_build.tuning.stage_choice import COST_TIE, LARGE_PROGRAM_UNITS, cheaper_tie

    full, thin = (Stage.PGO, Stage.LTO), (Stage.PGO, Stage.THINLTO)
    just_slower = 0.9033 * (1 + COST_TIE / 2)
    assert cheaper_tie(thin, just_slower, full, 0.9033, LARGE_PROGRAM_UNITS)
    assert not cheaper_tie(thin, just_slower, full, 0.9033, LARGE_PROGRAM_UNITS - 1)
    assert not cheaper_tie(thin, 0.9033 * (1 + 2 * COST_TIE), full, 0.9033, 400)
    assert not cheaper_tie((Stage.THINLTO,), just_slower, full, 0.9033, 400)  # not PGO
    assert not cheaper_tie(full, just_slower, thin, 0.9033, 400)      # never towards full
    assert not cheaper_tie(thin, None, full, 0.9033, 400)


def test_a_stage_is_judged_by_the_pace_of_stages_like_it() -> None:
    """The stages' share of --time: a full-LTO composition is judged by the full-LTO
    ones before it, not by an average with a cheap ThinLTO one (cppcheck started a
    full-LTO stage with 3 minutes left on a 1.7-minute average; it took 8.5)."""
    from autopass_build.tuning.clock import CONFIRMED, Deadline, KindPace

    kinds = KindPace()
    assert kinds.each("-flto") is None                     # nothing ran: no estimate
    kinds.add("-flto", 300.0, 2)                           # pgo+lto, confirmed
    kinds.add("-flto=thin", 96.0, 2)                       # pgo+thinlto, confirmed
    assert kinds.each("-flto") == 150.0 and kinds.each("-flto=thin") == 48.0
    assert kinds.each("") == 99.0                          # no LTO yet: all of them
    three_minutes = Deadline(180.0)
    assert not three_minutes.holds(kinds.each("-flto") * CONFIRMED)   # lto: not started
    assert three_minutes.holds(kinds.each("-flto=thin") * CONFIRMED)
    kinds.add("", 10.0, 0)                                 # nothing measured: ignored
    assert kinds.each("") == 99.0


def test_the_second_look_goes_to_the_closest_unclear_composition() -> None:
    """When no composition was verified faster, the one whose only look read fastest
    below 1 is looked at again; one that read slower, failed, or had a confirmation
    already is not, and a resumed run picks the one its first run did."""
    from autopass_build.core.outcome import Outcome
    from autopass_build.measuring.stats import FASTER, SLOWER, UNCLEAR
    from autopass_build.tuning.journal import Entry
    from autopass_build.tuning.stage_choice import promising

    def look(n: int, phase: Phase, name: str, ratio: float | None, verdict) -> Entry:
        return Entry(n, phase, name, {}, Outcome.OK if ratio else Outcome.WRONG_OUTPUT,
                     verdict, ratio, (ratio or 1) * 0.9, (ratio or 1) * 1.1, 60, stages=name)

    names = ["pgo+lto", "pgo+thinlto", "lto", "thinlto", "pgo"]
    looks = [look(1, Phase.STAGE, "pgo+lto", 0.97, UNCLEAR),
             look(2, Phase.STAGE, "pgo+thinlto", 0.95, FASTER),       # a look and
             look(3, Phase.STAGE_CONFIRM, "pgo+thinlto", 0.94, UNCLEAR),   # its confirmation
             look(4, Phase.STAGE, "lto", None, None),                  # wrong output
             look(5, Phase.STAGE, "thinlto", 1.02, UNCLEAR),
             look(6, Phase.STAGE, "pgo", 1.05, SLOWER)]
    assert promising(looks, names).stages == "pgo+lto"
    assert promising(looks, ["thinlto", "pgo", "lto"]) is None        # none below 1
    again = looks + [look(7, Phase.STAGE_AGAIN, "pgo+lto", 0.96, UNCLEAR),
                     look(8, Phase.STAGE, "pgo+lto", 0.90, UNCLEAR)]
    assert promising(again, names) is looks[0]                        # as the first run


SECOND_LOOK = """
[build]
command = "make -s"
clean = "make -s clean"
[run]
command = ["{exe}", "2000"]
[measure]
metric = "cpu"
min_pairs = 2
max_pairs = 2
[tune]
strategy = "random"
budget = 3
stage_budget = 3
stages = ["lto"]
"""


def test_a_stage_unclear_at_its_first_look_is_kept_after_a_second(tmp_path) -> None:
    """A first look of 4 pairs (max_pairs 2, doubled) cannot bound a 95 % interval (it
    needs 6): LTO, twice as fast on lto-mini, reads unclear below 1.  The second look
    takes twice the pairs, 8, and so does its confirmation: LTO is kept."""
    root = recorded_copy(LTO_MINI, tmp_path / "mini", SECOND_LOOK)
    done = subprocess.run([AUTOPASS, "tune"], cwd=root, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    journal = Journal.latest(str(root / ".autopass"))
    first, again, confirmed = (journal.of_phase(p) for p in
                               (Phase.STAGE, Phase.STAGE_AGAIN, Phase.STAGE_CONFIRM))
    assert [(e.stages, str(e.verdict), e.pairs) for e in first] == [("lto", "unclear", 4)]
    assert first[0].ratio < 1
    assert [(e.stages, str(e.verdict), e.pairs) for e in again + confirmed] == \
        [("lto", "faster", 8), ("lto", "faster", 8)]
    assert "a second look" in done.stderr and "baseline: lto" in done.stderr
    db = flags_db.load(str(root / "autopass.flags.json"))
    assert db.target is not None and db.target.stages == ("lto",)


def test_the_summary_names_the_compositions_the_stage_budget_left_out(tmp_path) -> None:
    """A stage budget of one evaluation measures the first composition only: the run's
    summary names the others, and what measures them (7-Zip's --time 20m measured one
    of five, and said so only in passing, minutes before its summary)."""
    config = SECOND_LOOK.replace("stage_budget = 3", "stage_budget = 1") \
                        .replace('stages = ["lto"]', 'stages = ["lto", "thinlto"]')
    root = recorded_copy(LTO_MINI, tmp_path / "mini", config)
    done = subprocess.run([AUTOPASS, "tune"], cwd=root, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    measured = {e.stages for e in Journal.latest(str(root / ".autopass")).of_phase(
        Phase.STAGE)}
    assert len(measured) == 1
    left_out = {"lto", "thinlto"} - measured
    [note] = [line.strip() for line in done.stdout.splitlines() if "not measured (" in line]
    assert note == (f"not measured (--stage-budget ran out first): {left_out.pop()}; "
                    "a larger --stage-budget (or --budget) measures it"), done.stdout


def test_a_re_tune_measures_last_times_close_call_first(tmp_path) -> None:
    """Issue 60, item 6: the database names the close call its stages were chosen over,
    and a re-tune measures the two first, in that order, however short its stage budget
    (here one evaluation: thinlto, second in the usual order, is the one measured)."""
    config = SECOND_LOOK.replace("stage_budget = 3", "stage_budget = 1") \
                        .replace('stages = ["lto"]', 'stages = ["lto", "thinlto"]')
    root = recorded_copy(LTO_MINI, tmp_path / "mini", config)
    how = "stage thinlto kept over lto: thinlto over lto head to head: 0.99x -> faster"
    earlier = flags_db.empty()
    earlier.target = flags_db.TargetStages("ltomini", ("thinlto",), "-O2",
                                           ("main.c", "ops.c"),
                                           rival=flags_db.CloseRival("lto", how))
    flags_db.save(str(root / "autopass.flags.json"), earlier)
    assert flags_db.load(str(root / "autopass.flags.json")).target == earlier.target
    shown = subprocess.run([AUTOPASS, "db", "show"], cwd=root, capture_output=True, text=True)
    assert f"a close call over lto ({how}); a re-tune measures the two first" in shown.stdout
    done = subprocess.run([AUTOPASS, "tune"], cwd=root, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    measured = [e.stages for e in Journal.latest(str(root / ".autopass")).of_phase(
        Phase.STAGE)]
    assert measured == ["thinlto"], done.stderr
    assert f"last time's close call first: thinlto and lto (the database's note: {how})" \
        in done.stderr


def test_a_close_call_in_the_database_is_read_back_and_checked(tmp_path) -> None:
    """The close call is the database's own field: written only when there is one (a
    database without it reads as before), and of the wrong shape, a one-line error."""
    from autopass_build.tuning.stage_choice import again_first

    path = tmp_path / "autopass.flags.json"
    db = flags_db.empty()
    db.target = flags_db.TargetStages("app", ("pgo", "lto", "bolt"), "-O3", ("a.c",),
                                      flags_db.ProfileRef("autopass.fdata", "h"), "fp")
    flags_db.save(str(path), db)
    assert '"rival"' not in path.read_text()
    text = path.read_text().replace('"units"', '"rival": {"stages": "x"},\n    "units"')
    path.write_text(text)
    with pytest.raises(flags_db.FlagsDbError, match='"rival" must be null or'):
        flags_db.load(str(path))
    of = stages.of_name
    found = [of("pgo+lto"), of("pgo+thinlto"), of("lto"), of("pgo"), of("thinlto")]
    # the steps on top (bolt) are left aside: pgo+lto was the composition chosen
    assert again_first(found, db.target.replace(rival=flags_db.CloseRival("lto", "h"))) \
        == [of("pgo+lto"), of("lto"), of("pgo+thinlto"), of("pgo"), of("thinlto")]
    assert again_first(found, db.target) == found
    assert again_first(found, None) == found


def test_a_close_rival_is_one_faster_too_whose_interval_overlaps() -> None:
    """Issue 60, item 6: two compositions both faster, their intervals overlapping, are
    not told apart by the intervals: the rival is the fastest such other composition."""
    from autopass_build.core.outcome import Outcome
    from autopass_build.measuring.stats import FASTER, UNCLEAR
    from autopass_build.tuning.chosen import Chosen
    from autopass_build.tuning.journal import Entry
    from autopass_build.tuning.rivals import close_rival

    def look(n: int, name: str, ratio: float, low: float, high: float, verdict) -> Entry:
        return Entry(n, Phase.STAGE, name, {}, Outcome.OK, verdict, ratio, low, high, 60,
                     stages=name)

    best = look(1, "pgo+lto", 0.72, 0.70, 0.75, FASTER)
    chosen = Chosen((stages.Stage.PGO, stages.Stage.LTO), stage_flags.StageFlags((), ()),
                    best, None)
    looks = [best, look(2, "pgo+thinlto", 0.74, 0.72, 0.77, FASTER),
             look(3, "lto", 0.73, 0.71, 0.76, UNCLEAR),          # not faster: no rival
             look(4, "thinlto", 0.80, 0.78, 0.82, FASTER)]       # apart: no rival
    names = ["pgo+lto", "pgo+thinlto", "lto", "thinlto"]
    assert close_rival(looks, chosen.name, best, names).stages == "pgo+thinlto"
    assert close_rival(looks[:1] + looks[2:], chosen.name, best, names) is None


def test_a_head_to_head_puts_the_composition_that_overrides_the_other_on_top() -> None:
    """A candidate's flags come after its baseline's: the candidate of a head-to-head is
    the one whose flags override the other's (an LTO mode by its own, a profile by one)."""
    from autopass_build.core.outcome import Outcome
    from autopass_build.measuring.stats import FASTER, SLOWER, UNCLEAR
    from autopass_build.tuning.journal import Entry
    from autopass_build.tuning.rivals import head_to_head_ends, rival_faster

    of = stages.of_name
    assert head_to_head_ends(of("pgo+lto"), of("pgo+thinlto")) == (of("pgo+lto"),
                                                                   of("pgo+thinlto"))
    assert head_to_head_ends(of("pgo+lto"), of("lto")) == (of("lto"), of("pgo+lto"))
    assert head_to_head_ends(of("pgo"), of("lto")) is None      # neither drops the other's
    assert head_to_head_ends(of("thinlto"), of("pgo")) is None

    def said(verdict) -> Entry:
        return Entry(1, Phase.STAGE_RIVAL, "k", {}, Outcome.OK, verdict, 0.99, 0.98, 1.0, 20)

    assert rival_faster(said(FASTER), rival_is_candidate=True) is True
    assert rival_faster(said(FASTER), rival_is_candidate=False) is False
    assert rival_faster(said(SLOWER), rival_is_candidate=False) is True
    assert rival_faster(said(UNCLEAR), rival_is_candidate=True) is None


def test_two_close_compositions_are_measured_head_to_head(tmp_path) -> None:
    """Issue 60, item 6: two compositions faster than the recorded build whose intervals
    overlap are measured against each other, and that A/B decides (on bc, a rule by
    instructions alone kept ThinLTO: 1.4 % fewer instructions, 1.2 % slower).  The
    head-to-head's candidate, its flags stacked on its rival's, is the candidate's own
    build byte for byte; the A/B counts as a stage evaluation of the run."""
    from autopass_build.candidates.evaluate import Evaluator
    from autopass_build.config.loading import parse
    from autopass_build.core.flags_db import CloseRival
    from autopass_build.core.outcome import Outcome
    from autopass_build.measuring.stats import FASTER
    from autopass_build.tuning.clock import Deadline, KindPace
    from autopass_build.tuning.journal import Entry
    from autopass_build.tuning.measuring import Measurements, config_key
    from autopass_build.tuning.rivals import against_its_rival
    from autopass_build.tuning.settings import RunSettings
    from autopass_build.tuning.stage_choice import Composer
    from autopass_build.tuning.stage_journal import stage_phase_entries

    root = recorded(tmp_path / "mini")
    config = parse(CONFIG.replace('"instructions"', '"cpu"').replace(
        "max_pairs = 2", "max_pairs = 6"), project_dir=str(root))
    store = Store.open_existing(str(root / ".autopass"))
    evaluator = Evaluator(store, config)
    full, thin = (stage_flags.flags((name,), "-O2", lld=stages.lld()) for name in
                  ("lto", "thinlto"))
    ids = [u.id for u in evaluator.units]
    alone = evaluator.replayer.build(evaluator.target.output,
                                     {i: thin.unit_flags for i in ids}, thin.link_flags)
    stacked = evaluator.replayer.build(
        evaluator.target.output, {i: full.unit_flags + thin.unit_flags for i in ids},
        full.link_flags + thin.link_flags)
    assert Path(alone.binary).read_bytes() == Path(stacked.binary).read_bytes()

    journal = Journal.create(str(store.dir), RunSettings())
    lines: list[str] = []
    composer = Composer(evaluator, Measurements(journal, evaluator, config, {}, lines.append),
                        (stages.Stage.LTO, stages.Stage.THINLTO), lambda: None, lines.append)
    looks = [Entry(n, Phase.STAGE, config_key({}, name), {}, Outcome.OK, FASTER, ratio,
                   ratio - 0.05, ratio + 0.05, 20, stages=name)
             for n, (name, ratio) in enumerate((("lto", 0.80), ("thinlto", 0.81)), 1)]
    for look in looks:
        journal.append(look)
    best = composer.chosen(stages.of_name("lto"), looks[0])
    both = [stages.of_name("lto"), stages.of_name("thinlto")]
    paced = KindPace()
    paced.add("-flto=thin", 60.0, 1)             # a minute a ThinLTO evaluation
    skipped = against_its_rival(composer, best, both, Deadline(90), paced)
    assert (skipped.chosen, skipped.spent) == (best, 0)
    assert lines[-1].startswith("--time: thinlto, within lto's interval, is not measured")
    assert skipped.rival == CloseRival("thinlto", lines[-1])     # shipped: a re-tune looks again
    settled = against_its_rival(composer, best, both, Deadline(None), KindPace())
    chosen, spent = settled.chosen, settled.spent
    rival = journal.of_phase(Phase.STAGE_RIVAL)
    assert spent == 1 and len(rival) == 1 and rival[0].stages == "thinlto", lines
    assert rival[0].measured and rival[0].pairs >= 2                 # not identical: it ran
    assert any("thinlto against lto, head to head" in line for line in lines), lines
    assert chosen.name in ("lto", "thinlto")
    if rival[0].verdict == FASTER:
        assert chosen.name == "thinlto" and chosen.entry == looks[1]
    # the one not chosen is the close call, with the line the run said of it
    assert settled.rival is not None and settled.rival.how in lines
    assert {settled.rival.stages, chosen.name} == {"lto", "thinlto"}
    assert rival[0] in stage_phase_entries(journal)
    # the report says it, naming the two (issue 60, item 6: "say so in the report")
    from autopass_build.outputs.report import stage_lines

    said = f"head to head: thinlto against lto: {rival[0].interval_text()}"
    assert any(line.startswith(said) for line in stage_lines(journal.entries)), \
        stage_lines(journal.entries)
    # resumed with the time spent: the journal's A/B decides as it did, nothing measured
    again = against_its_rival(composer, best, both, Deadline(0), paced)
    assert again.chosen.name == chosen.name and len(journal.entries) == 3
    assert again.rival == settled.rival


def test_a_step_after_the_search_that_would_outlast_time_is_left_out(tmp_path) -> None:
    """--time holds after the search too: SQLite's run of `--time 10m` took 14 minutes,
    its CS-PGO, layout and BOLT steps taking two or three minutes each past the end.
    A step is judged by the pace of the run's stage evaluations (its build and link are
    theirs), one more evaluation for CS-PGO's and BOLT's instrumented training."""
    from types import SimpleNamespace

    from autopass_build.core.outcome import Outcome
    from autopass_build.tuning.clock import Deadline
    from autopass_build.tuning.journal import Entry, Timing
    from autopass_build.tuning.settings import RunSettings
    from autopass_build.tuning.steps_on_top import StepsOnTop

    journal = Journal.create(str(tmp_path), RunSettings())
    journal.append(Entry(1, Phase.STAGE, "k", {}, Outcome.OK, "faster", 0.8, 0.7, 0.9,
                         pairs=10, stages="pgo+lto", timing=Timing(seconds=60)))
    said: list[str] = []
    steps = StepsOnTop.__new__(StepsOnTop)      # the parts after_search reads
    steps.measurements = SimpleNamespace(journal=journal, deterministic=False)
    steps.show = said.append
    steps.applicable = lambda chosen: [stages.Stage.CSPGO, stages.Stage.LAYOUT]
    steps.usable = set()                        # no link-level knob to say anything of
    chosen = SimpleNamespace(stages=(stages.Stage.PGO, stages.Stage.LTO))
    assert steps.after_search(chosen, lambda c: None, Deadline(100)) is chosen
    assert [line.split(";")[0] for line in said] == [
        "--time: no time left for CS-PGO (about 3 min with its confirmation",
        "--time: no time left for layout (about 2 min with its confirmation"], said
    assert all(line.endswith(" left)") for line in said)


def test_the_first_search_evaluation_is_judged_by_the_stages_pace() -> None:
    """SQLite under `--time 10m`: with a minute left after the stages, the search started
    its first candidate (nothing said how long one takes), which took three, and CS-PGO,
    layout and BOLT found no time left.  Before the first one ends, a stage evaluation's
    seconds stand for it."""
    from types import SimpleNamespace

    from autopass_build.tuning.clock import Deadline, Pace
    from autopass_build.tuning.searching import STEPS_SHARE, Search

    said: list[str] = []
    parts = SimpleNamespace(journal=None, remote=None)
    unknown = Search(parts, None, 10, said.append, deadline=Deadline(60), kept_after=5)
    assert unknown._time_for_one_more(Pace(), 0)           # nothing known: it tries one
    paced = Search(parts, None, 10, said.append, deadline=Deadline(60), kept_after=5,
                   first_each=40.0)
    assert not paced._time_for_one_more(Pace(), 0)
    assert said and said[-1].startswith("--time: the search stops after 0 evaluations"), said
    roomy = Search(parts, None, 10, said.append, deadline=Deadline(600), kept_after=5,
                   first_each=40.0)
    assert roomy._time_for_one_more(Pace(), 0)
    # LAME under --time 30m: the steps after the search wanted more than all the time
    # left (15 evaluations of 2 min, 19 min left), and the search got none; they keep
    # at most STEPS_SHARE of it
    lame = Search(parts, None, 10, said.append, deadline=Deadline(19 * 60), kept_after=16,
                  first_each=120.0)
    assert lame._time_for_one_more(Pace(), 0)
    assert lame.kept_at_most == pytest.approx(STEPS_SHARE * 19 * 60, rel=0.01)
    # with less left than one evaluation and the steps' share of it, none more
    short = 0.9 * 120.0 / (1 - STEPS_SHARE)
    assert not Search(parts, None, 10, said.append, deadline=Deadline(short), kept_after=16,
                      first_each=120.0)._time_for_one_more(Pace(), 0)


def test_when_time_holds_bolt_but_not_the_steps_before_it_they_give_way(tmp_path) -> None:
    """zstd and SQLite under `--time 10m`: CS-PGO and layout (unclear on both) took the
    time, and BOLT, the step the hand recipe gains by, was left out.  Where the time
    holds BOLT, the steps before it give way, layout first, each said in a line."""
    from types import SimpleNamespace

    from autopass_build.core.outcome import Outcome
    from autopass_build.tuning.clock import Deadline
    from autopass_build.tuning.journal import Entry, Timing
    from autopass_build.tuning.settings import RunSettings
    from autopass_build.tuning.steps_on_top import StepsOnTop

    journal = Journal.create(str(tmp_path), RunSettings())
    journal.append(Entry(1, Phase.STAGE, "k", {}, Outcome.OK, "faster", 0.8, 0.7, 0.9,
                         pairs=10, stages="pgo+lto", timing=Timing(seconds=60)))
    ran: list[str] = []
    said: list[str] = []
    steps = StepsOnTop.__new__(StepsOnTop)
    steps.measurements = SimpleNamespace(journal=journal, deterministic=False)
    steps.show = said.append
    steps.applicable = lambda chosen: [stages.Stage.CSPGO, stages.Stage.LAYOUT,
                                       stages.Stage.BOLT]
    steps.usable = set()                        # no link-level knob to say anything of
    steps.cspgo = lambda chosen, without: ran.append("cspgo")
    steps.layout_step = lambda chosen, without: ran.append("layout")
    steps.bolt = lambda chosen, without: ran.append("bolt")
    # each step 60 s an evaluation: CS-PGO 3 min, layout 2, BOLT 3
    chosen = SimpleNamespace(stages=(stages.Stage.PGO, stages.Stage.LTO))
    steps.after_search(chosen, lambda c: None, Deadline(7 * 60))
    assert ran == ["cspgo", "bolt"], (ran, said)
    assert said[0].startswith("--time: layout left out so that BOLT has its time"), said
    ran.clear()
    steps.after_search(chosen, lambda c: None, Deadline(4 * 60))
    assert ran == ["bolt"], (ran, said)
    ran.clear()
    steps.after_search(chosen, lambda c: None, Deadline(9 * 60))      # room for all
    assert ran == ["cspgo", "layout", "bolt"], (ran, said)
    ran.clear()
    # not even BOLT fits: the steps that do run as before (layout's 2 min)
    steps.after_search(chosen, lambda c: None, Deadline(150))
    assert ran == ["layout"], (ran, said)


def _steps_after_pgo_lto(tmp_path, look: float, confirmation: float,
                         applicable: list[stages.Stage]):
    """StepsOnTop over a journal of PGO + LTO's look (`look` seconds, every unit
    compiled) and its confirmation (`confirmation` seconds, every unit from the cache),
    its `applicable` steps stand-ins that only record that they ran; with the steps,
    what ran and what was said."""
    from types import SimpleNamespace

    from autopass_build.core.outcome import Outcome
    from autopass_build.tuning.journal import Entry, Timing
    from autopass_build.tuning.settings import RunSettings
    from autopass_build.tuning.steps_on_top import StepsOnTop

    journal = Journal.create(str(tmp_path), RunSettings())
    journal.append(Entry(1, Phase.STAGE, "k", {}, Outcome.OK, "faster", 0.8, 0.7, 0.9,
                         pairs=10, stages="pgo+lto",
                         timing=Timing(seconds=look, compiled=71, cached=0)))
    journal.append(Entry(2, Phase.STAGE_CONFIRM, "k", {}, Outcome.OK, "faster", 0.8, 0.7,
                         0.9, pairs=10, stages="pgo+lto",
                         timing=Timing(seconds=confirmation, compiled=0, cached=71)))
    ran: list[str] = []
    said: list[str] = []
    steps = StepsOnTop.__new__(StepsOnTop)
    steps.measurements = SimpleNamespace(journal=journal, deterministic=False)
    steps.show = said.append
    steps.applicable = lambda chosen: applicable
    steps.usable = set()
    steps.layout_step = lambda chosen, without: ran.append("layout")
    steps.link_knob = lambda step, chosen, without: ran.append(str(step))
    steps.bolt = lambda chosen, without: ran.append("bolt")
    return steps, ran, said


def test_bolt_is_costed_at_the_pace_of_a_relink_and_layout_gives_way(tmp_path) -> None:
    """cppcheck under `--time 25m`: PGO + LTO's look compiled its 71 units (7 min), its
    confirmation came from the cache (2.5 min).  At the average of the two BOLT was put
    at 14 min where 12 were left, so layout (which compiles every unit) took them and
    BOLT, 10 % by hand on cppcheck, was never measured.  BOLT compiles nothing: it is
    costed at the pace of the evaluation that compiled nothing, fits, and layout gives
    way to it; layout keeps the pace of the builds that compile."""
    from types import SimpleNamespace

    from autopass_build.tuning.clock import Deadline

    steps, ran, said = _steps_after_pgo_lto(tmp_path, 420, 150,
                                            [stages.Stage.LAYOUT, stages.Stage.BOLT])
    assert steps._cost(stages.Stage.BOLT) == pytest.approx(2.5 * 150)    # 6.3 min
    assert steps._cost(stages.Stage.LAYOUT) == pytest.approx(2 * 285)    # the average
    chosen = SimpleNamespace(stages=(stages.Stage.PGO, stages.Stage.LTO))
    steps.after_search(chosen, lambda c: None, Deadline(12 * 60))
    assert ran == ["bolt"], (ran, said)
    assert said[0].startswith("--time: layout left out so that BOLT has its time"), said


def test_bolt_trains_inside_its_first_evaluation_and_a_link_knob_gives_way(tmp_path) -> None:
    """cppcheck under `--time 25m` again, with BOLT at the pace of a relink: PGO + LTO's
    look took 7.2 min, its confirmation 3.6, and 10.5 min were left after the stages.
    BOLT's training was counted as a third relink (10.9 min in all), so BOLT did not fit,
    and ext-TSP took the time (60 pairs, unclear).  BOLT trains on the binary its first
    evaluation links (20 s on cppcheck): it fits at 9 min, and the knob gives way."""
    from types import SimpleNamespace

    from autopass_build.tuning.clock import Deadline

    steps, ran, said = _steps_after_pgo_lto(tmp_path, 433, 217,
                                            [stages.Stage.EXTTSP, stages.Stage.BOLT])
    assert steps._cost(stages.Stage.BOLT) == pytest.approx(2.5 * 217)    # 9 min
    chosen = SimpleNamespace(stages=(stages.Stage.PGO, stages.Stage.LTO))
    steps.after_search(chosen, lambda c: None, Deadline(10.5 * 60))
    assert ran == ["bolt"], (ran, said)
    assert said[0].startswith("--time: ext-TSP block order at the link left out so that "
                              "BOLT has its time"), said


def test_bolt_not_kept_on_top_of_layout_is_measured_in_its_place(tmp_path) -> None:
    """Lua under `--time 10m`: layout kept (1.029x over PGO + LTO), BOLT on top of it
    0.969x, slower: it undid layout's work, where BOLT on the build without layout is
    what the hand recipe gains by.  BOLT is then measured on the build without layout
    and taken in its place only when it gains clearly more than layout did; else layout
    stays, said either way.  (The builds are stand-ins here: the steps' own measuring
    is tested where they run for real, test_bolt.py and test_link_knobs.py.)"""
    from types import SimpleNamespace

    from autopass_build.core.outcome import Outcome
    from autopass_build.measuring.stats import FASTER
    from autopass_build.tuning.chosen import Chosen
    from autopass_build.tuning.journal import Entry, Timing
    from autopass_build.tuning.measuring import config_key
    from autopass_build.tuning.settings import RunSettings
    from autopass_build.tuning.steps_on_top import StepsOnTop

    Stage = stages.Stage
    base = (Stage.PGO, Stage.LTO)

    def run(bolt_instead: tuple[float, float, float]) -> tuple[object, list[str], list]:
        journal = Journal.create(str(tmp_path / f"{bolt_instead[0]}"), RunSettings())
        layout = Entry(1, Phase.STAGE_CONFIRM, config_key({}, "pgo+lto+layout"), {},
                       Outcome.OK, FASTER, 0.972, 0.955, 0.990, pairs=40,
                       stages="pgo+lto+layout", timing=Timing(seconds=60))
        journal.append(layout)
        built: list[tuple] = []

        def layout_step(chosen, without):
            return Chosen(chosen.stages + (Stage.LAYOUT,), stage_flags.StageFlags((), ()),
                          layout, None)

        def bolt(chosen, without):
            built.append(chosen.stages)
            if Stage.LAYOUT in chosen.stages:
                return None                            # slower on top of layout
            ratio, low, high = bolt_instead
            entry = Entry(2, Phase.STAGE_CONFIRM, "b", {}, Outcome.OK, FASTER, ratio, low,
                          high, pairs=40, stages="pgo+lto+bolt")
            return Chosen(chosen.stages + (Stage.BOLT,), stage_flags.StageFlags((), ()),
                          entry, None)

        said: list[str] = []
        steps = StepsOnTop.__new__(StepsOnTop)
        steps.measurements = SimpleNamespace(journal=journal, deterministic=False)
        steps.show = said.append
        steps.usable = set()
        steps.applicable = lambda chosen: [Stage.LAYOUT, Stage.BOLT]
        steps.layout_step, steps.bolt = layout_step, bolt
        steps._flags = lambda composition, profile: stage_flags.StageFlags((), ())
        start = Chosen(base, stage_flags.StageFlags((), ()), layout, None)
        return steps.after_search(start, lambda chosen: None), said, built

    # BOLT alone 1.10x where layout gave 1.029x: BOLT in its place
    chosen, said, built = run((0.909, 0.895, 0.923))
    assert chosen.stages == base + (Stage.BOLT,), said
    assert built == [base + (Stage.LAYOUT,), base], built
    assert any(line.startswith("bolt kept in place of layout: pgo+lto+bolt") for line in said)
    # BOLT alone 1.03x, as layout: layout stays
    chosen, said, built = run((0.970, 0.950, 0.990))
    assert chosen.stages == base + (Stage.LAYOUT,), said
    assert built == [base + (Stage.LAYOUT,), base], built
    assert any(line.startswith("layout stays: BOLT in its place") for line in said), said
