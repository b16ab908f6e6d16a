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

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from autopass_build.candidates import stages
from autopass_build.candidates.evaluate import EvaluateError, Evaluator
from autopass_build.candidates.stages import Stage, StageFlags
from autopass_build.core.flags_db import CloseRival
from autopass_build.core.outcome import EvaluationError
from autopass_build.core.stage_flags import lto_mode
from autopass_build.measuring.benchmark import MeasureError, run_once
from autopass_build.measuring.stats import FASTER, SLOWER
from autopass_build.tuning.chosen import Chosen
from autopass_build.tuning.clock import CONFIRMED, Deadline, KindPace
from autopass_build.tuning.journal import Entry, Phase
from autopass_build.tuning.measuring import Measurements, config_key


class Composing(Protocol):
    """What the rival check asks of the stages' composer (stage_choice.Composer)."""
    evaluator: Evaluator
    measurements: Measurements
    show: Callable[[str], None]

    def flags(self, composition: tuple[Stage, ...]) -> StageFlags: ...

    def chosen(self, composition: tuple[Stage, ...], entry: Entry) -> Chosen: ...

# Two compositions whose intervals overlap: the rival is confirmed when it executes this
# share fewer instructions than the one chosen (a judgement: above callgrind's noise of
# parts per million, below the 3 % that told Lua's two LTO modes apart).  Counting costs
# a run under callgrind (about 50x a plain one) per composition: runs longer than this
# are not counted.
RIVAL_INSTRUCTIONS = 0.01
RIVAL_LONGEST_RUN_S = 10.0


@dataclass(frozen=True)
class Settled:
    """What the rival check settled on: the choice, the evaluations it spent, and the
    close call it was chosen over (shipped with the stages, so that a re-tune measures
    the two first again), None when there was none."""
    chosen: Chosen
    spent: int
    rival: CloseRival | None = None


def _close_call(composer: Composing, loser: str, how: str) -> CloseRival:
    """The close call, said as the run's line and kept for the database."""
    composer.show(how)
    return CloseRival(loser, how)


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


def against_its_rival(composer: Composing, best: Chosen,
                      candidates: list[tuple[Stage, ...]], deadline: Deadline,
                      kinds: KindPace) -> Settled:
    """When another composition's look was faster too and its interval overlaps the
    chosen one's, the intervals cannot tell them apart: the two are
    measured head to head, and the rival is kept when it is faster there, or, where
    that cannot tell, when it executes RIVAL_INSTRUCTIONS fewer instructions; said
    either way."""
    rival = close_rival(composer.measurements.journal.of_phase(Phase.STAGE), best.name,
                        best.entry, [stages.name(c) for c in candidates])
    if rival is None or composer.measurements.deterministic:
        return Settled(best, 0)
    composition = next(c for c in candidates if stages.name(c) == rival.stages)
    ends = head_to_head_ends(best.stages, composition)
    measured_before = ends is not None and composer.measurements.journal.find(
        Phase.STAGE_RIVAL, config_key({}, stages.name(ends[1]))) is not None
    each = kinds.each(lto_mode(composition))     # a tight A/B: about a look and its confirmation
    if not measured_before and not deadline.holds(None if each is None else each * CONFIRMED):
        return Settled(best, 0, _close_call(
            composer, rival.stages, f"--time: {rival.stages}, within {best.name}'s "
            "interval, is not measured against it: the stages' half of --time is spent"))
    if ends is None:
        return _by_instructions(composer, best, rival, composition, spent=0)
    base, cand = ends
    flags, under = composer.flags(base), composer.flags(cand)
    build = composer.evaluator.on({u.id: flags.unit_flags for u in composer.evaluator.units},
                                  flags.link_flags)
    entry = composer.measurements.once(
        Phase.STAGE_RIVAL, {}, f"stage {best.name} and {rival.stages} are within each "
        f"other's intervals: {stages.name(cand)} against {stages.name(base)}, head to "
        "head", tight=True, evaluator=build,
        under={u.id: under.unit_flags for u in build.units},
        stages=stages.name(cand), link_flags=under.link_flags)
    said = rival_faster(entry, cand == composition)
    if said is None:
        return _by_instructions(composer, best, rival, composition, spent=1)
    winner, loser = (rival.stages, best.name) if said else (best.name, rival.stages)
    close = _close_call(composer, loser, f"stage {winner} kept over {loser}: "
                        f"{stages.name(cand)} over {stages.name(base)} head to head: "
                        f"{entry.interval_text()} -> {entry.verdict}")
    return Settled(composer.chosen(composition, rival) if said else best, 1, close)


def _by_instructions(composer: Composing, best: Chosen, rival: Entry,
                     composition: tuple[Stage, ...], spent: int) -> Settled:
    """The rival kept when it executes RIVAL_INSTRUCTIONS fewer instructions than
    `best` (callgrind); where it was not measured head to head (`spent` 0), only once
    confirmed faster than the recorded build with fresh pairs."""
    try:
        counts = {name: instructions(composer.evaluator, composer.flags(c)) for name, c in
                  ((best.name, best.stages), (rival.stages, composition))}
    except (EvaluateError, MeasureError, RivalCostly) as error:
        return Settled(best, spent, _close_call(
            composer, rival.stages, f"stage {best.name} kept over {rival.stages}, whose "
            f"interval overlaps its own: {error}"))
    fewer = 1 - counts[rival.stages] / counts[best.name]
    said = (f"stage {best.name} and {rival.stages} cannot be told apart by time; "
            f"{rival.stages} executes {abs(fewer):.1%} "
            f"{'fewer' if fewer > 0 else 'more'} instructions (callgrind)")
    if fewer < RIVAL_INSTRUCTIONS:
        return Settled(best, spent, _close_call(composer, rival.stages,
                                                f"{said}: {best.name} kept"))
    if spent:
        return Settled(composer.chosen(composition, rival), spent,
                       _close_call(composer, best.name, f"{said}: {rival.stages} kept"))
    flags = composer.flags(composition)
    entry = composer.measurements.once(
        Phase.STAGE_CONFIRM, {}, f"{said}: confirming it with fresh pairs", tight=True,
        under={u.id: flags.unit_flags for u in composer.evaluator.units},
        stages=rival.stages, link_flags=flags.link_flags)
    if entry.verdict == FASTER and entry.measured:
        return Settled(composer.chosen(composition, entry), 1, _close_call(
            composer, best.name, f"stage {rival.stages} kept over {best.name}: confirmed "
            f"{entry.interval_text()} over the recorded build, and fewer instructions"))
    return Settled(best, 1, _close_call(
        composer, rival.stages, f"stage {best.name} kept: {rival.stages} was not "
        f"confirmed faster ({entry.interval_text()})"))
