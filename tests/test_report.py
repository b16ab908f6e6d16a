"""The report's figures hold the journal's numbers: what the run shipped, each stage
composition against the recorded build, every measurement by phase, each unit's effect."""

from __future__ import annotations

import pytest

from autopass_build.core.outcome import Outcome
from autopass_build.measuring.attribution import UnitEffect
from autopass_build.measuring.stats import FASTER, UNCLEAR
from autopass_build.outputs import figures
from autopass_build.outputs.figures import BarKind
from autopass_build.outputs.report import shipped_line
from autopass_build.tuning.journal import Entry, Phase


def entry(n, phase, ratio, low, high, verdict, stages="", flags=None, effects=()):
    return Entry(n, phase, f"c{n}", flags or {}, Outcome.OK, verdict, ratio, low, high,
                 pairs=10, stages=stages, effects=effects)


EFFECT = UnitEffect("src/lvm.c", 0.95, 0.93, 0.97, 8, 40.0, FASTER, "controlled")
RUN = [entry(1, Phase.STAGE, 0.90, 0.88, 0.93, FASTER, "pgo"),
       entry(2, Phase.STAGE, 0.80, 0.78, 0.83, FASTER, "pgo+lto"),
       entry(3, Phase.STAGE_CONFIRM, 0.82, 0.80, 0.84, FASTER, "pgo+lto"),
       entry(4, Phase.STAGE, 0.97, 0.95, 0.99, FASTER, "pgo+lto+bolt"),
       entry(5, Phase.SEARCH, 0.99, 0.97, 1.01, UNCLEAR, "pgo+lto",
             {"src/lvm.c": "-O2"}, (EFFECT,)),
       entry(6, Phase.TUNED, 0.79, 0.77, 0.81, FASTER, "pgo+lto+bolt")]


def test_the_bars_are_the_journals_numbers_against_the_recorded_build():
    bars = {b.label: b for b in figures.shipped_bars(RUN)}
    assert bars["recorded build"].speedup == 1.0
    confirmed = bars["pgo+lto"]             # the confirmation replaces the first look
    assert confirmed.kind == BarKind.STAGE
    assert confirmed.speedup == pytest.approx(1 / 0.82)
    assert (confirmed.low, confirmed.high) == (pytest.approx(1 / 0.84), pytest.approx(1 / 0.80))
    bolt = bars["pgo+lto+bolt (BOLT x its base)"]    # measured against pgo+lto: multiplied
    assert bolt.kind == BarKind.ON_TOP
    assert bolt.speedup == pytest.approx(1 / (0.97 * 0.82))
    shipped = [b for b in bars.values() if b.kind == BarKind.SHIPPED]
    assert len(shipped) == 1 and shipped[0].speedup == pytest.approx(1 / 0.79)
    assert shipped[0].label == "shipped: pgo+lto+bolt"
    assert shipped_line(RUN).startswith("shipped pgo+lto+bolt: 1.266x [1.235, 1.299]")


def test_without_per_file_flags_the_chosen_stages_are_what_shipped():
    """No tuned entry against the recording: the stages chosen are the result, BOLT with
    them where it was kept."""
    bars = figures.shipped_bars(RUN[:5])
    assert bars[-1].label == "shipped: pgo+lto+bolt, no per-file flags"
    assert bars[-1].speedup == pytest.approx(1 / (0.97 * 0.82))
    not_kept = [*RUN[:3], entry(4, Phase.STAGE, 1.0, 0.98, 1.02, UNCLEAR, "pgo+lto+bolt")]
    assert figures.shipped_bars(not_kept)[-1].label == "shipped: pgo+lto, no per-file flags"


def test_the_composition_the_run_chose_is_what_the_report_says_it_shipped():
    """The composer may choose other than the fastest look (a cheaper tie, a close rival
    with fewer instructions): on bc it chose pgo+thinlto, confirmed 1.0235x, over
    pgo+lto's 1.068x, and the report, deriving the choice from the looks, said pgo+lto
    shipped.  The run marks its choice (Journal.baseline) and the report says that."""
    from autopass_build.outputs.report import stage_lines

    run = [entry(1, Phase.STAGE, 0.94, 0.89, 0.97, FASTER, "pgo+lto"),
           entry(2, Phase.STAGE_CONFIRM, 0.936, 0.887, 0.972, FASTER, "pgo+lto"),
           entry(3, Phase.STAGE, 0.975, 0.955, 0.998, FASTER, "pgo+thinlto"),
           entry(4, Phase.STAGE_CONFIRM, 0.977, 0.957, 0.987, FASTER, "pgo+thinlto"),
           entry(5, Phase.STAGE, 1.085, 1.07, 1.10, "slower", "pgo+thinlto+bolt")]
    assert shipped_line(run).startswith("shipped pgo+lto, ")     # derived: the fastest
    assert shipped_line(run, "pgo+thinlto").startswith(
        "shipped pgo+thinlto, no per-file flags: 1.024x [1.013, 1.045]")
    assert "baseline of the per-file search: pgo+thinlto" in stage_lines(run, "pgo+thinlto")


def test_each_step_after_the_search_is_read_against_the_build_under_it():
    """CS-PGO and layout are A/B'd against the build without them, as BOLT is: the
    report read them against the recorded build ('pgo+lto+cspgo: 1.03x over the recorded
    build' for a build 1.25x faster) and left them out of what shipped."""
    from autopass_build.outputs.report import stage_lines

    run = [*RUN[:3], entry(4, Phase.STAGE, 0.95, 0.93, 0.97, FASTER, "pgo+lto+cspgo"),
           entry(5, Phase.STAGE, 0.98, 0.97, 0.99, FASTER, "pgo+lto+cspgo+layout"),
           entry(6, Phase.STAGE, 1.00, 0.98, 1.02, UNCLEAR, "pgo+lto+cspgo+layout+bolt")]
    bars = {b.label: b for b in figures.shipped_bars(run)}
    layout = bars["pgo+lto+cspgo+layout (layout x its base)"]
    assert layout.kind == BarKind.ON_TOP
    assert layout.speedup == pytest.approx(1 / (0.98 * 0.95 * 0.82))
    assert figures.shipped_bars(run)[-1].label == ("shipped: pgo+lto+cspgo+layout, no "
                                                   "per-file flags")
    lines = stage_lines(run)
    assert any(line.startswith("stage pgo+lto+cspgo: speedup 1.0526x") and
               "over the build without CS-PGO" in line for line in lines), lines
    assert "CS-PGO on top: kept" in lines and "BOLT on top: not kept" in lines


def test_every_measurement_is_a_dot_named_by_its_phase_and_units():
    dots = figures.dots(RUN)
    assert [d.n for d in dots] == [1, 2, 3, 4, 5, 6]
    assert {d.n: d.group for d in dots}[4] == "BOLT on its base"
    assert {d.n: d.group for d in dots}[3] == "stage, confirmed"
    search = dots[4]
    # speedups, as everything a user reads (issue 62): the journal's ratio 0.99 is 1/0.99
    assert (search.group, search.label) == ("search candidate", "lvm.c")
    assert search.speedup == pytest.approx(1 / 0.99)
    [(unit, speedup, low, high)] = figures.effects(RUN)
    assert unit == "#5 lvm.c" and (speedup, low, high) == pytest.approx((1 / 0.95, 1 / 0.97,
                                                                         1 / 0.93))


def test_the_figure_renders():
    png = figures.run_png(RUN, "lua (cpu)")
    assert png.startswith(b"\x89PNG") and len(png) > 10_000


def test_a_journal_that_names_the_alone_phase_attribute_still_reads():
    """Runs journaled before the rename (phase "attribute") keep their meaning."""
    old = Entry.from_json({"n": 7, "phase": "attribute", "config": "c7",
                           "flags": {"src/lvm.c": "-O2"}, "outcome": Outcome.OK.value,
                           "verdict": "faster", "ratio": 0.9, "low": 0.88, "high": 0.92})
    assert old.phase == Phase.ALONE and old.verdict == FASTER
    assert figures.dots([old])[0].group == "unit alone"
