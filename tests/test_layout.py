"""The layout step (issue 60, item 3): machine-function splitting and hot/cold text the
linker keeps grouped, from the PGO profile; measured by tune on top of a composition
with PGO where the hot code is large enough to gain (item 5), rebuilt by apply bit for
bit, under LTO at the link."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from support import AUTOPASS, TUNE_MINI_MEASURED, recorded_copy, recorded_tune_mini

from autopass_build import config as cfg
from autopass_build.candidates import pgo, stages
from autopass_build.candidates.evaluate import Evaluator
from autopass_build.candidates.stages import Stage
from autopass_build.core import flags_db, stage_flags
from autopass_build.evidence.hotspots import HotFunction, Profile
from autopass_build.evidence.layout_reach import layout_reach
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


def test_layout_flags_split_in_the_compile_or_at_the_lto_link() -> None:
    plain = stage_flags.flags(("pgo", "layout"), "-O2", "-fprofile-use=p")
    assert plain.unit_flags == ("-fprofile-use=p", "-fsplit-machine-functions")
    assert plain.link_flags == ("-Wl,-z,keep-text-section-prefix",)
    thin = stage_flags.flags(("pgo", "thinlto", "layout"), "-O2", "-fprofile-use=p")
    assert thin.link_flags[-2:] == ("-Wl,-z,keep-text-section-prefix",
                                    "-fsplit-machine-functions")


def test_apply_builds_the_measured_layout_with_its_grouped_text(tmp_path) -> None:
    root = recorded_copy(LTO_MINI, tmp_path / "mini", CONFIG)
    evaluator = Evaluator(Store.open_existing(str(root / ".autopass")),
                          cfg.load(str(root / "autopass.toml")))
    profile = pgo.train(evaluator)
    composition = (Stage.PGO, Stage.LTO, Stage.LAYOUT)
    flags = stages.flags(composition, opt_level(evaluator), profile.use_flag())
    built = evaluator.replayer.build(evaluator.target.output,
                                     {u.id: flags.unit_flags for u in evaluator.units},
                                     flags.link_flags)
    shutil.copyfile(profile.path, root / "autopass.profdata")
    db = flags_db.empty()
    db.profile = flags_db.ProfileRef("autopass.profdata", profile.hash)
    db.target = flags_db.TargetStages("ltomini", tuple(s.value for s in composition),
                                      opt_level(evaluator), ("main.c", "ops.c"))
    flags_db.save(str(root / "autopass.flags.json"), db)
    subprocess.run(["make", "-s", "clean"], cwd=root, check=True)
    applied = subprocess.run([AUTOPASS, "apply", "--", "make", "-s"], cwd=root,
                             capture_output=True, text=True)
    assert applied.returncode == 0 and "warning" not in applied.stderr, applied.stderr
    assert (root / "ltomini").read_bytes() == Path(built.binary).read_bytes()
    sections = subprocess.run(["readelf", "-SW", str(root / "ltomini")], capture_output=True,
                              text=True).stdout
    assert ".text.hot" in sections and ".text.split" in sections   # hot and cold apart


def test_tune_measures_layout_on_top_of_pgo(tmp_path) -> None:
    root = recorded_tune_mini(tmp_path / "mini", TUNE_MINI_MEASURED
                              + '[tune]\nstrategy = "random"\nbudget = 5\n'
                                'stages = ["pgo", "layout"]\nlayout_min_kib = 0\n')
    done = subprocess.run([AUTOPASS, "tune"], cwd=root, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "layout 2" in done.stderr and "layout: the hot code is" in done.stderr
    measured = {e.stages: e for e in Journal.latest(str(root / ".autopass"))
                .of_phase(Phase.STAGE)}
    if measured["pgo"].verdict == "faster":
        assert measured["pgo+layout"].measured


def test_the_footprint_counts_the_hottest_functions_by_their_symbol_sizes(tmp_path) -> None:
    root = recorded_tune_mini(tmp_path / "mini", TUNE_MINI_MEASURED)
    binary = str(root / "mini")
    hot = Profile("mini", "perf", [HotFunction("hot_checksum", 70.0, ["hot.c"]),
                                   HotFunction("warm_sort_blocks", 25.0, ["warm.c"]),
                                   HotFunction("main", 4.0, ["main.c"]),
                                   HotFunction("memcpy", 1.0, [])], "w")
    reach = layout_reach(hot, [binary], 4096)
    sizes = subprocess.run(["nm", "-S", binary], capture_output=True, text=True).stdout
    size_of = {line.split()[-1]: int(line.split()[1], 16) for line in sizes.splitlines()
               if len(line.split()) == 4}
    assert reach.functions == 2          # 70 + 25 >= 90 % of the recorded 99 %
    assert reach.footprint == size_of["hot_checksum"] + size_of["warm_sort_blocks"]
    assert reach.recorded == 99.0 and reach.why_not.startswith("the hot code is")
    assert layout_reach(hot, [binary], 0).why_not == ""
