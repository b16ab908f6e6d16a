"""Two compositions both faster than the recorded build, their intervals overlapping: the
intervals cannot tell them apart (Lua: full LTO or ThinLTO, 3 % apart in instructions,
each chosen by one of two tunes), so what else is known decides (stage_choice.Composer
asks): the instructions each executes, counted by callgrind, which do not move with the
machine.
"""

from __future__ import annotations

from autopass_build.candidates.evaluate import EvaluateError, Evaluator
from autopass_build.candidates.stages import StageFlags
from autopass_build.core.outcome import EvaluationError
from autopass_build.measuring.benchmark import MeasureError, run_once
from autopass_build.measuring.stats import FASTER
from autopass_build.tuning.journal import Entry

# Two compositions whose intervals overlap: the rival is confirmed when it executes this
# share fewer instructions than the one chosen (a judgement: above callgrind's noise of
# parts per million, below the 3 % that told Lua's two LTO modes apart).  Counting costs
# a run under callgrind (about 50x a plain one) per composition: runs longer than this
# are not counted.
RIVAL_INSTRUCTIONS = 0.01
RIVAL_LONGEST_RUN_S = 10.0


class RivalCostly(Exception):
    """Counting a composition's instructions would take too long here."""


def overlaps(a: Entry, b: Entry) -> bool:
    """Whether two measurements' intervals share a value."""
    if None in (a.low, a.high, b.low, b.high):
        return False
    return not (a.high < b.low or b.high < a.low)    # type: ignore[operator]


def close_rival(looks: list[Entry], best: str, measured: Entry, names: list[str]
                ) -> Entry | None:
    """Of the compositions `names`' first looks (`looks`), the fastest other than
    `best` (verified by `measured`) that was faster than the recorded build too and
    whose interval overlaps `measured`'s; None when none does."""
    rivals = [e for e in looks if e.stages in names and e.stages != best and e.measured
              and e.verdict == FASTER and e.ratio is not None and overlaps(e, measured)]
    return min(rivals, key=lambda e: (e.ratio, e.stages)) if rivals else None


def instructions(evaluator: Evaluator, flags: StageFlags) -> float:
    """The instructions one run of the benchmark executes on the build of `flags`
    (RivalCostly where a run is too long to count under callgrind)."""
    base = evaluator.baseline()
    plain = run_once(evaluator.bench, base.binary, base.env, evaluator.bench.run.timeout,
                     metric="wall")
    if plain.wall > RIVAL_LONGEST_RUN_S:
        raise RivalCostly(f"a run takes {plain.wall:.0f} s, too long to count its "
                          "instructions")
    try:
        built = evaluator.replayer.build(
            evaluator.target.output,
            {u.id: flags.unit_flags for u in evaluator.units}, flags.link_flags)
    except EvaluationError as error:
        raise EvaluateError(str(error)) from None
    counted_run = run_once(evaluator.bench, built.binary, built.env,
                           evaluator.bench.run.timeout * 100, metric="instructions")
    if counted_run.value is None:
        raise MeasureError(f"callgrind could not count it ({counted_run.detail})")
    return counted_run.value
