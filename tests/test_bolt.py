"""The BOLT stage: trained on the binary that ships, measured on top of everything else
the run chose, kept only when verified faster, shipped beside the database with the code
fingerprint of the binary it describes, and rebuilt by apply mode bit for bit; a BOLT
that is missing or fails, a failed training run and a profile for another binary are
each named and never break a build (docs/RELIABILITY.md F17, F18)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest
from support import AUTOPASS, recorded_copy

from autopass_build.candidates import bolt_reach as reach
from autopass_build.candidates import stages
from autopass_build.core import bolt_commands as bolt
from autopass_build.core import flags_db
from autopass_build.core.apply_terms import ApplyPolicy
from autopass_build.tuning.journal import Journal, Phase

BOLT_MINI = Path(__file__).parent / "data" / "bolt-mini"
CONFIG = """
[build]
command = "make -s"
clean = "make -s clean"
[run]
command = ["{exe}", "30"]
[measure]
metric = "instructions"
layout_check = false
min_pairs = 2
max_pairs = 2
[tune]
strategy = "random"
budget = 4
stages = ["bolt"]
layout_min_kib = 0     # bolt-mini's hot code is a few hundred bytes: BOLT tried anyway
"""

pytestmark = pytest.mark.skipif(bolt.missing() != "", reason="needs bolt-19 (scripts/setup.sh)")


def recorded(root: Path, config: str = CONFIG) -> Path:
    return recorded_copy(BOLT_MINI, root, config)


def run(root: Path, *argv: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([AUTOPASS, *argv], cwd=root, capture_output=True, text=True,
                          env=env)


def bolted(binary: Path) -> bool:
    """Whether llvm-bolt wrote this binary (it leaves its note in every output)."""
    return b"BOLT revision" in binary.read_bytes()


@pytest.fixture(scope="module")
def tuned(tmp_path_factory) -> Path:
    root = recorded(tmp_path_factory.mktemp("bolt") / "mini")
    done = run(root, "tune")
    assert done.returncode == 0, done.stderr
    return root


def test_tune_keeps_bolt_and_apply_rebuilds_it_bit_for_bit(tuned) -> None:
    journal = Journal.latest(str(tuned / ".autopass"))
    [stage] = journal.of_phase(Phase.STAGE)
    assert stage.stages == "bolt" and stage.verdict == "faster" and stage.ratio < 0.97
    assert sum(not e.identical for e in journal.of_phase(Phase.SEARCH)) == 2   # budget 4,
    # two kept for BOLT
    db = flags_db.load(str(tuned / "autopass.flags.json"))
    assert db.target is not None and db.target.stages == ("bolt",)
    assert db.target.bolt is not None and db.target.bolt.path == "autopass.fdata"
    assert (tuned / "autopass.fdata").is_file()
    assert db.target.bolt_stale is not None and (tuned / "autopass.bolt.yaml").is_file()
    verify = run(tuned, "verify")
    assert verify.returncode == 0, verify.stderr
    assert "two clean tuned builds are bit-identical" in verify.stdout
    assert bolted(tuned / "boltmini")
    assert bolt.code_fingerprint(str(tuned / "boltmini")) != db.target.bolt_binary
    # what ships is what was measured: the same instruction ratio as the stage's A/B
    speedup = float(verify.stdout.split("speedup ")[1].split("x")[0])
    assert speedup == pytest.approx(1 / stage.ratio, rel=1e-3)
    report = run(tuned, "report")
    assert "stage bolt:" in report.stdout and "BOLT on top: kept" in report.stdout
    # every measurement is listed, not only what won
    listed = [line for line in report.stdout.splitlines() if line.startswith("  #")]
    assert len(listed) == len(journal.entries) and re.search(r"search candidates? measured", report.stdout)
    shown = run(tuned, "db", "show")
    assert "BOLT profile autopass.fdata" in shown.stdout


def test_a_profile_for_another_binary_is_not_applied(tuned, tmp_path) -> None:
    root = tmp_path / "changed"
    shutil.copytree(tuned, root, ignore=shutil.ignore_patterns(".autopass"))
    source = root / "ops.c"
    source.write_text(source.read_text().replace("acc * 31u", "acc * 37u"))
    subprocess.run(["make", "-s", "clean"], cwd=root, check=True)
    applied = run(root, "apply", "--", "make", "-s")
    assert applied.returncode == 0, applied.stderr
    assert "BOLT profile was trained on another build" in applied.stderr
    # the YAML profile shipped beside it lays the changed binary out all the same
    assert "applied by stale-profile inference" in applied.stderr
    assert "Traceback" not in applied.stderr and bolted(root / "boltmini")
    assert subprocess.run(["./boltmini", "3"], cwd=root).returncode == 0
    (root / "autopass.bolt.yaml").unlink()          # without it: BOLT is not applied
    subprocess.run(["make", "-s", "clean"], cwd=root, check=True)
    bare = run(root, "apply", "--", "make", "-s")
    assert "BOLT not applied" in bare.stderr and not bolted(root / "boltmini")
    subprocess.run(["make", "-s", "clean"], cwd=root, check=True)
    strict = run(root, "apply", "--policy", "error", "--", "make", "-s")
    assert strict.returncode != 0 and "autopass: error:" in strict.stderr


def test_a_shipped_profile_that_was_edited_is_refused(tuned, tmp_path) -> None:
    root = tmp_path / "edited"
    shutil.copytree(tuned, root, ignore=shutil.ignore_patterns(".autopass"))
    with open(root / "autopass.fdata", "a") as handle:
        handle.write("1 main 0 1 main 4 0 5\n")
    subprocess.run(["make", "-s", "clean"], cwd=root, check=True)
    applied = run(root, "apply", "--", "make", "-s")
    assert applied.returncode == 0, applied.stderr
    assert "is not the BOLT profile" in applied.stderr and not bolted(root / "boltmini")


def test_bolt_missing_is_skipped_in_tuning_and_in_apply_mode(tuned, tmp_path) -> None:
    no_bolt = {**os.environ, "AUTOPASS_BOLT": str(tmp_path / "no-llvm-bolt")}
    root = recorded(tmp_path / "mini")
    done = run(root, "tune", env=no_bolt)
    assert done.returncode == 0, done.stderr
    assert "stage bolt skipped: llvm-bolt not found" in done.stderr
    assert not Journal.latest(str(root / ".autopass")).of_phase(Phase.STAGE)
    shutil.copy(tuned / "autopass.flags.json", root)
    shutil.copy(tuned / "autopass.fdata", root)
    subprocess.run(["make", "-s", "clean"], cwd=root, check=True)
    applied = run(root, "apply", "--", "make", "-s", env=no_bolt)
    assert applied.returncode == 0, applied.stderr
    assert "BOLT not applied, the linked binary is kept" in applied.stderr
    assert "Traceback" not in applied.stderr and not bolted(root / "boltmini")
    assert subprocess.run(["./boltmini", "3"], cwd=root).returncode == 0


def test_a_bolt_that_rejects_the_binary_rejects_the_stage(tmp_path) -> None:
    """llvm-bolt failing (a binary it cannot process): the stage is rejected with its
    outcome and the run ends normally, writing nothing."""
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "llvm-bolt").write_text("#!/bin/sh\necho 'BOLT-ERROR: cannot process' >&2\n"
                                    "exit 1\n")
    (fake / "llvm-bolt").chmod(0o755)
    os.symlink(bolt.tool("merge-fdata") or "", fake / "merge-fdata")
    (tmp_path / "lib").mkdir()
    shutil.copy(bolt.runtime_of(bolt.tool() or ""), tmp_path / "lib")
    root = recorded(tmp_path / "mini")
    done = run(root, "tune", env={**os.environ, "AUTOPASS_BOLT": str(fake / "llvm-bolt")})
    assert done.returncode == 0, done.stderr
    [stage] = Journal.latest(str(root / ".autopass")).of_phase(Phase.STAGE)
    assert stage.outcome == "POST_LINK_FAIL" and "BOLT-ERROR" in stage.detail
    assert "BOLT not kept" in done.stderr and not (root / "autopass.flags.json").exists()


def test_a_training_run_that_fails_rejects_the_stage(tmp_path) -> None:
    config = CONFIG.replace("[run]\n", '[run]\ntrain = ["sh", "-c", "exit 3", "{exe}"]\n')
    root = recorded(tmp_path / "mini", config)
    done = run(root, "tune")
    assert done.returncode == 0, done.stderr
    [stage] = Journal.latest(str(root / ".autopass")).of_phase(Phase.STAGE)
    assert stage.outcome == "TRAINING_FAIL" and "exit 3" in stage.detail


def test_bolt_is_tuned_on_executables_only() -> None:
    library = SimpleNamespace(kind="shared", output_rel="libx.so")
    assert "libx.so is a shared; BOLT is tuned on executables" in stages.unavailable(
        stages.Stage.BOLT, library)


def test_a_static_program_is_not_offered_to_bolt(tmp_path) -> None:
    """F17: minisat links --static; llvm-bolt -instrument refuses it after a build ("does
    not support profile output on binary finalization"), which read as a cut-off error.
    The stage is now skipped before it is built, with the reason."""
    source = tmp_path / "a.c"
    source.write_text("int main(void) { return 0; }\n")
    for name, flags in (("static", ["-static"]), ("dynamic", [])):
        subprocess.run(["clang-19", *flags, "-o", str(tmp_path / name), str(source)],
                       check=True)
    static = SimpleNamespace(kind="executable", output_rel="static", strips=False,
                             output=str(tmp_path / "static"))
    assert "static is linked statically (-static)" in stages.unavailable(
        stages.Stage.BOLT, static)
    dynamic = SimpleNamespace(kind="executable", output_rel="dynamic", strips=False,
                              output=str(tmp_path / "dynamic"))
    assert stages.unavailable(stages.Stage.BOLT, dynamic) == ""


def test_the_code_fingerprint_follows_the_code_not_the_file(tmp_path) -> None:
    source = tmp_path / "a.c"
    source.write_text("int main(void) { return 0; }\n")
    for name, flags in (("a", ["-g"]), ("b", []), ("c", ["-O2", "-DX=1"])):
        subprocess.run(["clang-19", *flags, "-o", str(tmp_path / name), str(source)],
                       check=True)
    a, b = (bolt.code_fingerprint(str(tmp_path / n)) for n in "ab")
    assert a == b                    # debug info is not code
    (tmp_path / "a.c").write_text("int main(void) { return 1; }\n")
    subprocess.run(["clang-19", "-o", str(tmp_path / "d"), str(source)], check=True)
    assert bolt.code_fingerprint(str(tmp_path / "d")) != a
    with pytest.raises(bolt.BoltError, match="not a 64-bit little-endian ELF"):
        bolt.code_fingerprint(str(source))


def test_a_target_section_lists_bolt_exactly_when_it_has_its_profile(tmp_path) -> None:
    path = tmp_path / "db.json"
    db = flags_db.empty()
    db.target = flags_db.TargetStages("x", ("bolt",), "-O2", ("a.c",),
                                      flags_db.ProfileRef("autopass.fdata", "h"), "code")
    flags_db.save(str(path), db)
    assert flags_db.load(str(path)).target == db.target
    text = path.read_text()
    path.write_text(text.replace('"bolt": {', '"ignored": {'))
    with pytest.raises(flags_db.FlagsDbError, match="bolt stage exactly when"):
        flags_db.load(str(path))
    library = flags_db.BoltLibrary("lib/libx.so.1", flags_db.ProfileRef("p.fdata", "h2"), "c2")
    db.target.bolt_libraries = (library,)
    flags_db.save(str(path), db)
    assert flags_db.load(str(path)).target.bolt_library("lib/libx.so.1") == library
    no_bolt = path.read_text().replace('"bolt"\n', '"lto"\n').replace(
        '"bolt": {', '"ignored": {')
    path.write_text(no_bolt)
    with pytest.raises(flags_db.FlagsDbError, match="empty unless the bolt stage is listed"):
        flags_db.load(str(path))


def test_a_function_bolt_cannot_rewrite_is_skipped_as_it_suggests() -> None:
    """Lua's interpreter loop (computed gotos) makes llvm-bolt stop with a BOLT-ERROR
    that names the function to skip; it is skipped and the rest is rewritten."""
    error = ("BOLT-ERROR: unable to get new address corresponding to input address "
             "0x32610 in function luaV_execute/1(*2). Consider adding this function to "
             "--skip-funcs=...")
    assert bolt._function_to_skip(error) == "luaV_execute/1"
    assert bolt._function_to_skip("BOLT-ERROR: cannot process the binary") == ""


SHARED_CONFIG = CONFIG.replace('command = "make -s"', 'command = "make -s boltshared"').replace(
    'command = ["{exe}", "30"]', 'command = ["{exe}", "30"]\ntarget = "boltshared"')


def test_bolt_rewrites_the_project_library_the_hot_code_is_in(tmp_path) -> None:
    """F58: HarfBuzz, libjpeg-turbo and aubio spend their time in a shared library of
    their own, and BOLT was skipped on all three.  The program and its libraries are now
    instrumented in one run, each library rewritten with its own profile, shipped beside
    the database and rewritten again by apply mode after the library's link."""
    root = recorded_copy(BOLT_MINI, tmp_path / "shared", SHARED_CONFIG,
                         ("make", "-s", "boltshared"))
    done = run(root, "tune")
    assert done.returncode == 0, done.stderr
    assert "BOLT: rewriting libops.so.1.0 with its profile" in done.stderr
    [stage] = Journal.latest(str(root / ".autopass")).of_phase(Phase.STAGE)
    assert stage.stages == "bolt" and stage.verdict == "faster" and stage.ratio < 0.97
    db = flags_db.load(str(root / "autopass.flags.json"))
    assert db.target is not None
    [library] = db.target.bolt_libraries
    assert library.output == "libops.so.1.0"
    assert library.profile.path == "autopass.libops.so.1.0.fdata"
    verify = run(root, "verify")
    assert verify.returncode == 0, verify.stderr
    assert "two clean tuned builds are bit-identical" in verify.stdout
    assert bolted(root / "libops.so.1.0") and bolted(root / "boltshared")
    speedup = float(verify.stdout.split("speedup ")[1].split("x")[0])
    assert speedup == pytest.approx(1 / stage.ratio, rel=1e-3)
    assert "libops.so.1.0: BOLT profile autopass.libops.so.1.0.fdata" in run(
        root, "db", "show").stdout
    # an edited library profile: that library is linked as it is, the program still BOLTed
    with open(root / library.profile.path, "a") as handle:
        handle.write("1 step 0 1 step 4 0 5\n")
    subprocess.run(["make", "-s", "clean"], cwd=root, check=True)
    applied = run(root, "apply", "--", "make", "-s", "boltshared")
    assert applied.returncode == 0, applied.stderr
    assert "autopass.libops.so.1.0.fdata is not the BOLT profile" in applied.stderr
    assert not bolted(root / "libops.so.1.0") and bolted(root / "boltshared")
    assert subprocess.run(["./boltshared", "3"], cwd=root).returncode == 0
    # `db check` says so before a build does (it checked the entries only)
    checked = run(root, "db", "check")
    assert checked.returncode == 1
    assert "autopass.libops.so.1.0.fdata is not the BOLT profile of libops.so.1.0" in \
        checked.stdout
    assert "1 shipped profile cannot be used" in checked.stdout


def _evaluator() -> SimpleNamespace:
    """An evaluator of `prog` (unit main.c) loading libhot.so (unit hot.c)."""
    target = SimpleNamespace(output="/p/prog", output_rel="prog", loaded_libraries=["/p/libhot.so"],
                             unit_groups=lambda: [("/p/prog", ["m"]), ("/p/libhot.so", ["h"])])
    units = [SimpleNamespace(id="m", source_rel="main.c"), SimpleNamespace(id="h",
                                                                          source_rel="hot.c")]
    return SimpleNamespace(target=target, units=units)


def test_bolt_rewrites_the_libraries_that_hold_the_hot_code() -> None:
    """F17, F58: glpsol and twolame's stwolame spend their time in the project's shared
    library: it is rewritten with the program.  Where neither holds the hot code (the
    time is in libc or the kernel) the stage is skipped, with the profile's share."""
    library = reach.bolt_reach(_evaluator(), {"main.c": 1.0, "hot.c": 90.0})
    assert library == reach.BoltReach(("/p/libhot.so",))
    program = reach.bolt_reach(_evaluator(), {"main.c": 60.0, "hot.c": 0.5})
    assert program == reach.BoltReach(())
    assert reach.bolt_reach(_evaluator(), None).libraries == ("/p/libhot.so",)
    elsewhere = reach.bolt_reach(_evaluator(), {"main.c": 1.0, "hot.c": 2.0})
    assert elsewhere.libraries == () and re.search(
        r"puts 3\.0 % of the run in the code of prog and the project libraries it loads, "
        r"the rest in system libraries", elsewhere.why_not)


STALE_PROGRAM = """#include <stdio.h>
static int work(int x) { int s = 0; for (int i = 0; i < x; i++) { if (i % 3) s += i * i; else s -= i; } return s; }
static int other(int x) { return x % 7 ? work(x) : x; }
int main(int c, char **v) { long t = 0; for (int k = 0; k < 20000; k++) t += other(k % 500 + c); printf("%ld\\n", t); return 0; }
"""


def test_a_later_build_gets_bolt_from_the_yaml_profile_by_stale_inference(tmp_path) -> None:
    """Issue 46, item 2: a profile trained on one build, shipped as YAML too, lays out a
    build whose code changed since (llvm-bolt's --infer-stale-profile); apply says it
    was applied from a stale profile.  Without the YAML profile BOLT is refused."""
    from autopass_build.capture.apply.applied_bolt import run_bolt
    from autopass_build.capture.apply.to_apply import BoltPlan

    def build(name: str, text: str) -> str:
        (tmp_path / f"{name}.c").write_text(text)
        subprocess.run(["clang-19", "-O2", "-Wl,--emit-relocs", "-o", str(tmp_path / name),
                        str(tmp_path / f"{name}.c")], check=True)
        return str(tmp_path / name)

    trained = build("old", STALE_PROGRAM)
    bolt.instrument(trained, str(tmp_path / "old.inst"), str(tmp_path / "prof"))
    subprocess.run([str(tmp_path / "old.inst")], check=True, capture_output=True,
                   cwd=tmp_path)
    bolt.merge(sorted(str(p) for p in tmp_path.glob("prof*.fdata")), str(tmp_path / "m.fdata"))
    bolt.to_yaml(trained, str(tmp_path / "m.fdata"), str(tmp_path / "m.yaml"))
    assert "profile-version" in (tmp_path / "m.yaml").read_text()
    changed = STALE_PROGRAM.replace("else s -= i;", "else if (i % 5) s -= i; else s ^= i;")
    later = build("new", changed)
    expected = subprocess.run([later], capture_output=True, text=True).stdout
    plain = Path(later).read_bytes()
    fingerprint = bolt.code_fingerprint(trained)
    refused = run_bolt(BoltPlan(later, str(tmp_path / "m.fdata"), fingerprint), ApplyPolicy.WARN)
    assert "BOLT not applied" in refused.warning and Path(later).read_bytes() == plain
    carried = run_bolt(BoltPlan(later, str(tmp_path / "m.fdata"), fingerprint,
                                str(tmp_path / "m.yaml")), ApplyPolicy.WARN)
    assert "stale-profile inference" in carried.warning and not carried.error
    assert Path(later).read_bytes() != plain
    assert subprocess.run([later], capture_output=True, text=True).stdout == expected


def test_bolt_is_skipped_where_the_hot_code_fits_the_cache_whatever_its_order(tmp_path):
    """Issue 60, item 5: before BOLT spends an instrumented run and its pairs, the profile
    says how large the hot code is; bolt-mini's fits the instruction cache many times
    over, so the step is skipped with the line that says so, and the knob that tries it."""
    root = recorded(tmp_path / "mini", CONFIG.replace("layout_min_kib = 0", ""))
    done = run(root, "tune", "--budget", "2")
    assert done.returncode == 0, done.stderr
    line = next(line for line in done.stderr.splitlines() if "stage bolt skipped" in line)
    assert "KiB in" in line and "fits the instruction cache" in line
    assert "[tune].layout_min_kib = 4; 0 tries it always" in line
    assert Journal.latest(str(root / ".autopass")).of_phase(Phase.STAGE) == []
