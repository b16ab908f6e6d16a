"""Two compositions both faster than the recorded build, their intervals overlapping: the
intervals cannot tell them apart (Lua: full LTO or ThinLTO, 3 % apart in instructions,
each chosen by one of two tunes), so more is asked (stage_choice.Composer asks): the two
measured against each other, head to head, which no drift between their looks blurs;
where that cannot tell them apart either, the instructions each executes, counted by
callgrind, which do not move with the machine.  Instructions are not time: on bc,
ThinLTO executed 1.4 % fewer and ran 1.2 % slower, and a rule by instructions alone
chose it.
"""

from __future__ import annotations

from autopass_build.candidates.evaluate import EvaluateError, Evaluator
from autopass_build.candidates.stages import Stage, StageFlags
from autopass_build.core.outcome import EvaluationError
from autopass_build.measuring.benchmark import MeasureError, run_once
from autopass_build.measuring.stats import FASTER, SLOWER
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


def head_to_head_ends(best: tuple[Stage, ...], rival: tuple[Stage, ...]
                      ) -> tuple[tuple[Stage, ...], tuple[Stage, ...]] | None:
    """(baseline, candidate) of a head-to-head A/B of `best` and `rival`: a candidate's
    flags come after its baseline's, so the candidate must override each of them (an LTO
    mode by its own, a PGO profile by having one too).  None when neither way does."""
    def overrides(base: tuple[Stage, ...], cand: tuple[Stage, ...]) -> bool:
        lto = {Stage.LTO, Stage.THINLTO}
        return (Stage.PGO not in base or Stage.PGO in cand) \
            and (not lto & set(base) or bool(lto & set(cand)))

    for base, cand in ((best, rival), (rival, best)):
        if overrides(base, cand):
            return base, cand
    return None


def rival_faster(entry: Entry, rival_is_candidate: bool) -> bool | None:
    """What a head-to-head A/B says of the rival: True faster, False slower, None (the
    same, unclear, or it failed) when it cannot tell."""
    if not entry.measured or entry.verdict not in (FASTER, SLOWER):
        return None
    return (entry.verdict == FASTER) == rival_is_candidate


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
