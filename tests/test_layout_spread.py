"""The layout A/A that calibrates instruction counts (candidates/layout_spread.py): a
program whose count moves with where its code sits has verdicts that ignore moves that
small, and a program whose count does not keeps the default trust."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from support import recorded_copy

from autopass_build.candidates import layout_spread
from autopass_build.candidates.evaluate import Evaluator
from autopass_build.config import load as load_config
from autopass_build.core import toolchain
from autopass_build.measuring import stats
from autopass_build.measuring.stats import FASTER, SAME, SLOWER, UNCLEAR
from autopass_build.store.index import Store

LAYOUT_MINI = Path(__file__).parent / "data" / "layout-mini"
CONFIG = """
[run]
command = {command}
[measure]
metric = "instructions"
min_pairs = 2
max_pairs = 4
{extra}
"""
needs_lld = pytest.mark.skipif(toolchain.find_tool("ld.lld") is None, reason="needs lld")


def evaluator(root: Path, command: str = '["{exe}"]', extra: str = "") -> Evaluator:
    if not (root / ".autopass").is_dir():
        recorded_copy(LAYOUT_MINI, root, "", ("make", "-s"))
    (root / "autopass.toml").write_text(CONFIG.format(command=command, extra=extra))
    return Evaluator(Store.open_existing(str(root / ".autopass")),
                     load_config(str(root / "autopass.toml"), str(root)))


def spin_unit(evaluator: Evaluator) -> str:
    [unit] = [u for u in evaluator.units if u.source_rel == "spin.c"]
    return unit.id


@needs_lld
def test_a_count_that_moves_with_layout_alone_is_not_called_faster(tmp_path) -> None:
    said: list[str] = []
    ev = evaluator(tmp_path / "layout")
    spin = spin_unit(ev)
    assert ev.count_floor(said.append) > stats.DETERMINISTIC_FLOOR
    assert ev.layout is not None and not ev.layout.note and ev.layout.moved()
    assert len(ev.layout.counts) == len(layout_spread.ORDERS) and ev.layout.range > 0.001
    assert ev.count_floor() == pytest.approx(layout_spread.MARGIN * ev.layout.range)
    assert any("layout A/A" in line and "apart" in line for line in said)
    # aligning spin() moves it and changes nothing else: a layout, not a speed-up.  The
    # first alignment whose count moved more than a count is trusted to by default, and
    # within what the A/A saw layout move it, is judged (which one does is the linker's)
    for align in (32, 64, 128, 256, 512, 1024, 2048, 4096):
        moved = ev.evaluate({spin: (f"-falign-functions={align}",)})
        shift = abs(math.log(moved.comparison.estimate.ratio))
        if stats.DETERMINISTIC_FLOOR < shift < ev.count_floor():
            break
    else:
        pytest.fail(f"no alignment of spin() moved its count by a layout's amount "
                    f"({ev.layout.counts})")
    assert moved.comparison.verdict in (UNCLEAR, SAME)  # by default: "faster" or "slower"
    assert len(moved.comparison.baseline) == 2         # and more pairs would not tell more
    assert moved.comparison.baseline == list(ev.layout.baseline)   # the baseline's, reused
    # a real change is still told: spin() unoptimized
    slower = ev.evaluate({spin: ("-O0",)})
    assert slower.comparison.verdict == SLOWER


@needs_lld
def test_a_count_that_does_not_move_keeps_the_default_trust(tmp_path) -> None:
    ev = evaluator(tmp_path / "layout", '["{exe}", "fixed"]')
    ev.evaluate({spin_unit(ev): ("-falign-functions=64",)})
    assert ev.layout is not None and not ev.layout.note
    # lld's start-up work differs from the recorded linker's by a few instructions
    assert ev.layout.range <= stats.DETERMINISTIC_FLOOR and not ev.layout.moved()
    assert ev.count_floor() == stats.DETERMINISTIC_FLOOR
    assert "counts the same instructions" in ev.layout.text()
    # twins (a composition measured on top of another) share the program's floor
    assert ev.on(ev.base_flags, ev.base_link_flags).count_floor() == stats.DETERMINISTIC_FLOOR


def test_the_check_is_skipped_when_turned_off_or_the_metric_is_timed(tmp_path) -> None:
    off = evaluator(tmp_path / "layout", extra="layout_check = false")
    assert off.count_floor() == stats.DETERMINISTIC_FLOOR and off.layout is None
    (tmp_path / "layout" / "autopass.toml").write_text(
        CONFIG.format(command='["{exe}"]', extra="").replace("instructions", "wall"))
    timed = Evaluator(Store.open_existing(str(tmp_path / "layout" / ".autopass")),
                      load_config(str(tmp_path / "layout" / "autopass.toml"), str(tmp_path)))
    assert timed.count_floor() == stats.DETERMINISTIC_FLOOR and timed.layout is None


def test_agreeing_counts_within_the_floor_are_unclear_at_the_first_look() -> None:
    rule = stats.Sequential(2, 16, precision=0.01, deterministic=True, floor=0.02)
    base, cand = [1000.0, 1000.0], [990.0, 990.0]        # 1 % fewer, exactly repeated
    estimate, verdict = rule.judge(base, cand)
    assert verdict == UNCLEAR and estimate is not None
    assert estimate.low < 0.99 * math.exp(-0.019) and estimate.high > 1.0
    # under the default floor the same counts are faster, as before
    _, default = stats.Sequential(2, 16, precision=0.01, deterministic=True).judge(base, cand)
    assert default == FASTER


def test_a_count_that_moves_between_runs_of_one_binary_is_not_calibrated(tmp_path) -> None:
    said: list[str] = []
    ev = evaluator(tmp_path / "layout", '["{exe}", "random"]')
    moved = ev.evaluate({spin_unit(ev): ("-falign-functions=64",)}, said.append)
    assert ev.layout is not None and not ev.layout.repeats
    assert ev.count_floor() == stats.DETERMINISTIC_FLOOR and ev.layout.counts == ()
    assert any("not needed: the baseline's own count moved" in line for line in said)
    assert not any("linking the baseline in another order" in line for line in said)
    # judged by the pairs' spread, as a time is: 2 to 4 disagreeing pairs bound nothing
    assert moved.comparison.verdict == UNCLEAR
