"""Context-sensitive PGO (issue 60, item 1): a second profile counted after inlining on
the build that ships, merged with PGO's; tried by tune on top of a composition with PGO,
rebuilt by apply bit for bit (under LTO the link takes the profile too), retrained by
`apply --train` in a third build, and a CS training that fails leaves the build with
what the database shipped (docs/RELIABILITY.md F84)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from support import AUTOPASS, TUNE_MINI_MEASURED, recorded_copy, recorded_tune_mini

from autopass_build import config as cfg
from autopass_build.candidates import pgo, stages
from autopass_build.candidates.evaluate import Evaluator
from autopass_build.candidates.stages import Stage
from autopass_build.core import flags_db, pgo_profile
from autopass_build.store.index import Store
from autopass_build.tuning.journal import Journal, Phase
from autopass_build.tuning.stage_choice import opt_level

LTO_MINI = Path(__file__).parent / "data" / "lto-mini"
CONFIG = """
[run]
command = ["{exe}", "50"]
[measure]
metric = "instructions"
layout_check = false
min_pairs = 2
max_pairs = 2
"""


def cs_trained(root: Path, lto: Stage = Stage.LTO
               ) -> tuple[Evaluator, pgo.TrainedProfile, pgo.TrainedCs]:
    """lto-mini's PGO profile, and its CS profile trained on the pgo+`lto` build."""
    evaluator = Evaluator(Store.open_existing(str(root / ".autopass")),
                          cfg.load(str(root / "autopass.toml")))
    base = pgo.train(evaluator)
    chosen = stages.flags((Stage.PGO, lto), opt_level(evaluator), base.use_flag())
    evaluator.rebase({u.id: chosen.unit_flags for u in evaluator.units}, chosen.link_flags)
    return evaluator, base, pgo.train_cs(evaluator, base)


def ship(root: Path, profile: pgo.TrainedProfile, evaluator: Evaluator) -> None:
    """A database with pgo+lto+cspgo and the CS profile beside it, as tune writes it."""
    shutil.copyfile(profile.path, root / "autopass.profdata")
    db = flags_db.empty()
    db.profile = flags_db.ProfileRef("autopass.profdata", profile.hash)
    db.target = flags_db.TargetStages("ltomini", ("pgo", "lto", "cspgo"), opt_level(evaluator),
                                      ("main.c", "ops.c"))
    flags_db.save(str(root / "autopass.flags.json"), db)


def test_cs_pgo_ships_what_was_measured_and_retrains_in_three_builds(tmp_path) -> None:
    root = recorded_copy(LTO_MINI, tmp_path / "mini", CONFIG)
    evaluator, base, cs = cs_trained(root)
    assert pgo_profile.kind(base.path) == pgo_profile.IR
    assert pgo_profile.kind(cs.path) == cs.level == pgo_profile.CS_IR
    assert cs.base == base.hash
    assert pgo.train_cs(evaluator, base).hash == cs.hash        # found, not trained again
    full = stages.flags((Stage.PGO, Stage.LTO, Stage.CSPGO), opt_level(evaluator),
                        cs.use_flag())
    assert full.link_flags[-1] == cs.use_flag()       # the link uses the CS part
    replayed = evaluator.replayer.build(evaluator.target.output,
                                        {u.id: full.unit_flags for u in evaluator.units},
                                        full.link_flags)
    # the fat objects' machine code meets the CS part uninlined: not counted, not said
    assert not evaluator.replayer.profile_said.get(cs.path)
    measured = Path(replayed.binary).read_bytes()
    ship(root, cs, evaluator)
    subprocess.run(["make", "-s", "clean"], cwd=root, check=True)
    applied = subprocess.run([AUTOPASS, "apply", "--", "make", "-s"], cwd=root,
                             capture_output=True, text=True)
    assert applied.returncode == 0 and "warning" not in applied.stderr, applied.stderr
    assert (root / "ltomini").read_bytes() == measured
    expected = subprocess.run(["./ltomini", "50"], cwd=root, capture_output=True,
                              text=True).stdout
    for _ in range(2):
        subprocess.run(["make", "-s", "clean"], cwd=root, check=True)
        trained = subprocess.run([AUTOPASS, "apply", "--train", "--", "make", "-s"], cwd=root,
                                 capture_output=True, text=True)
        assert trained.returncode == 0, trained.stderr
        assert "building instrumented after inlining (CS-PGO)" in trained.stderr
        assert "PGO retrained" in trained.stderr
        profile = root / "autopass.trained.profdata"
        assert pgo_profile.kind(str(profile)) == pgo_profile.CS_IR
        # today's source is the tuned one: its counts held, the same profile and binary
        assert profile.read_bytes() == (root / "autopass.profdata").read_bytes()
        assert (root / "ltomini").read_bytes() == measured
    ran = subprocess.run(["./ltomini", "50"], cwd=root, capture_output=True, text=True)
    assert ran.stdout == expected


def test_under_thinlto_the_cs_part_reaches_the_code(tmp_path) -> None:
    """ThinLTO's backends read the CS part in the link, and LLVM's ThinLTO cache key
    does not hold the profile: replay's cache gave the CS-PGO candidate the objects of
    the build without it, byte for byte that build (Lua: `pgo+thinlto+cspgo 1.0000x,
    same`), so CS-PGO was never kept on a ThinLTO build."""
    root = recorded_copy(LTO_MINI, tmp_path / "mini", CONFIG)
    evaluator, base, cs = cs_trained(root, Stage.THINLTO)
    level = opt_level(evaluator)
    built = {}
    for name, composition, profile in (
            ("pgo+thinlto", (Stage.PGO, Stage.THINLTO), base),
            ("pgo+thinlto+cspgo", (Stage.PGO, Stage.THINLTO, Stage.CSPGO), cs)):
        flags = stages.flags(composition, level, profile.use_flag())
        replayed = evaluator.replayer.build(evaluator.target.output,
                                            {u.id: flags.unit_flags for u in evaluator.units},
                                            flags.link_flags)
        built[name] = Path(replayed.binary).read_bytes()
    assert built["pgo+thinlto"] != built["pgo+thinlto+cspgo"]


def test_a_cs_training_that_fails_builds_with_the_shipped_profile(tmp_path) -> None:
    """F84: the CS round's training run fails (the training command exits 3 on its second
    call): the build uses the shipped profile, whole, and the line says why."""
    root = recorded_copy(LTO_MINI, tmp_path / "mini", CONFIG)
    evaluator, _, cs = cs_trained(root)
    ship(root, cs, evaluator)
    subprocess.run(["make", "-s", "clean"], cwd=root, check=True)
    subprocess.run([AUTOPASS, "apply", "--", "make", "-s"], cwd=root, check=True,
                   capture_output=True)
    shipped = (root / "ltomini").read_bytes()
    marker = tmp_path / "trained-once"
    script = (f'if [ -e {marker} ]; then echo "no second run here" >&2; exit 3; fi; '
              f'touch {marker}; exec "$0" 50')
    (root / "autopass.toml").write_text(CONFIG.replace(
        "[measure]", f'train = ["sh", "-c", {script!r}, "{{exe}}"]\n[measure]'))
    subprocess.run(["make", "-s", "clean"], cwd=root, check=True)
    trained = subprocess.run([AUTOPASS, "apply", "--train", "--", "make", "-s"], cwd=root,
                             capture_output=True, text=True)
    assert trained.returncode == 0, trained.stderr
    assert "CS-PGO: the training run failed (exit 3): no second run here: built with the " \
           "shipped profile" in trained.stderr
    assert "Traceback" not in trained.stderr
    assert (root / "ltomini").read_bytes() == shipped


def test_tune_tries_cs_pgo_on_top_of_the_pgo_build(tmp_path) -> None:
    root = recorded_tune_mini(tmp_path / "mini", TUNE_MINI_MEASURED
                              + '[tune]\nstrategy = "random"\nbudget = 5\n'
                                'stages = ["pgo", "cspgo"]\n')
    done = subprocess.run([AUTOPASS, "tune"], cwd=root, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "CS-PGO 2" in done.stderr                 # the budget's split, said up front
    journal = Journal.latest(str(root / ".autopass"))
    measured = {e.stages: e for e in journal.of_phase(Phase.STAGE)}
    assert "pgo" in measured
    if measured["pgo"].verdict == "faster":          # then CS-PGO is measured on top of it
        assert "pgo+cspgo" in measured and measured["pgo+cspgo"].measured
        assert "CS-PGO: building mini instrumented after inlining" in done.stderr
    db = flags_db.load(str(root / "autopass.flags.json"))
    if db.target is not None and "cspgo" in db.target.stages:
        assert pgo_profile.kind(str(root / "autopass.profdata")) == pgo_profile.CS_IR


def test_a_database_with_cspgo_but_not_pgo_is_refused(tmp_path) -> None:
    db = flags_db.empty()
    db.target = flags_db.TargetStages("mini", ("cspgo", "lto"), "-O2", ("a.c",))
    path = tmp_path / "autopass.flags.json"
    flags_db.save(str(path), db)
    with pytest.raises(flags_db.FlagsDbError, match="cspgo stage without pgo"):
        flags_db.load(str(path))


CS_LINE = ("warning: main.c: function control flow change detected (hash mismatch) main "
           "Hash = 1440408131329728778 up to 204351 count discarded [-Wbackend-plugin]\n")
PLAIN_LINE = ("warning: main.c: function control flow change detected (hash mismatch) mix "
              "Hash = 159676628498746350 up to 3 count discarded [-Wbackend-plugin]\n")


@pytest.mark.parametrize("lto, counted", [(False, {"main", "mix"}), (True, {"mix"})])
def test_what_a_compile_says_of_the_cs_part_counts_only_outside_lto(lto, counted) -> None:
    said = pgo_profile.Said(lto).read((CS_LINE + PLAIN_LINE).encode())
    assert said.mismatched == counted
    assert pgo_profile.lto_compile(["-O2", "-flto=thin"]) and not pgo_profile.lto_compile(
        ["-flto", "-fno-lto"])
