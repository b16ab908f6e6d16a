"""Whole-program stages first: which composition becomes the baseline of a tuning run.

    compositions in order of expected value (candidates/stages.py), the unavailable
    ones skipped with their reason ─▶ each measured against the recorded build, a
    FASTER one confirmed with fresh pairs (timing metrics) ─▶ that build becomes the
    run's baseline; per-file flags are tuned on top of it (tuning/steps_on_top.py then
    adds native before the search, and CS-PGO, layout and BOLT after it, each A/B'd
    against the build without it)

Stage evaluations come out of the run's budget, at most half of it, so per-file tuning
always gets the rest.  A link-time composition's gain is in the journal (phase "stage")
against the recorded build; the report derives its gain against the compositions it
extends.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from autopass_build.candidates import pgo, stages
from autopass_build.candidates.evaluate import EvaluateError, Evaluator
from autopass_build.candidates.stages import COMPOSITIONS, Stage, StageFlags
from autopass_build.core.durations import duration_text
from autopass_build.core.flags_db import CloseRival, TargetStages
from autopass_build.core.plural import counted
from autopass_build.core.stage_flags import lto_level, lto_mode
from autopass_build.measuring.benchmark import MeasureError
from autopass_build.measuring.stats import FASTER, UNCLEAR
from autopass_build.tuning.chosen import Chosen
from autopass_build.tuning.clock import CONFIRMED, Deadline, KindPace, Pace
from autopass_build.tuning.journal import STAGE_PHASES, Entry, Phase
from autopass_build.tuning.measuring import Measurements
from autopass_build.tuning.rivals import against_its_rival

STAGES_TIME = "the stages' half of --time"      # what their progress line counts down
COMPOSED = {s for c in COMPOSITIONS for s in c}   # what the stages' compositions are made of


def opt_level(evaluator: Evaluator) -> str:
    """The LTO link's codegen level for the target's units (one of LTO_LEVELS: what the
    database's target section may hold)."""
    return lto_level({u.opt_level for u in evaluator.units})


# From this many units a full-LTO relink costs about a clean build, and every per-file
# candidate on a full-LTO baseline pays it (cppcheck, 71 units: 86 s a candidate on
# PGO + full LTO, 29 s on PGO + ThinLTO, whose cache keeps the unchanged modules; the
# two measured 1.107x and 1.104x over -O3).  There PGO + ThinLTO is measured second,
# so that a short stage budget compares the two; the faster verified one still wins.
LARGE_PROGRAM_UNITS = 50


def by_cost(compositions: list[tuple[Stage, ...]], units: int) -> list[tuple[Stage, ...]]:
    """The order to measure `compositions` in: as given, except that on a program of
    LARGE_PROGRAM_UNITS or more the PGO + ThinLTO composition follows the first."""
    if units < LARGE_PROGRAM_UNITS:
        return compositions
    thin = [c for c in compositions if Stage.THINLTO in c and Stage.PGO in c]
    rest = [c for c in compositions[1:] if c not in thin]
    return compositions[:1] + [c for c in thin if c not in compositions[:1]] + rest


def again_first(compositions: list[tuple[Stage, ...]], earlier: TargetStages | None
                ) -> list[tuple[Stage, ...]]:
    """`compositions` with the one a database chose last time (`earlier`, its steps on
    top left aside) and its close rival moved to the front, in that order: a re-tune
    measures the close call again before anything else, however short its --time."""
    if earlier is None:
        return compositions
    names = [stages.name(c) for c in compositions]
    kept = stages.name(tuple(s for s in stages.of_name("+".join(earlier.stages))
                             if s in COMPOSED))
    first = [n for n in (kept, earlier.rival.stages if earlier.rival else "") if n in names]
    return [compositions[names.index(n)] for n in first] \
        + [c for c in compositions if stages.name(c) not in first]


# Within this share of the faster one's ratio, two verified LTO compositions of a large
# program are a tie, and the one whose candidates cost less (ThinLTO's) is kept: on
# cppcheck PGO + full LTO and PGO + ThinLTO measured 1.107x and 1.104x over -O3 (0.3 %
# apart, intervals 6 % wide), and every per-file candidate cost 86 s on the one and 29 s
# on the other, three times as many evaluations in the same --time.  A judgement: below
# the noise of one stage verdict here, above nothing a second look could separate.
COST_TIE = 0.01


def cheaper_tie(candidate: tuple[Stage, ...], ratio: float | None,
                best: tuple[Stage, ...], best_ratio: float | None, units: int) -> bool:
    """Whether `candidate` should replace `best` though not faster: both are the same
    composition but for full LTO against ThinLTO, `candidate` is the ThinLTO one, the
    program is large, and its ratio is within COST_TIE of `best`'s."""
    if units < LARGE_PROGRAM_UNITS or ratio is None or best_ratio is None:
        return False
    swapped = tuple(Stage.LTO if s == Stage.THINLTO else s for s in candidate)
    return (Stage.THINLTO in candidate and Stage.LTO in best
            and sorted(swapped) == sorted(best) and ratio <= best_ratio * (1 + COST_TIE))


# A second look takes twice the pairs of a first one: the first was unclear, and the
# same number again would be as likely to be.
AGAIN_PAIRS = 2


def promising(looks: list[Entry], names: list[str]) -> Entry | None:
    """Of the compositions `names`, the one whose only look (of `looks`, the stage
    phases in journal order) read fastest, measured and unclear below 1; None when none
    did.  The looks from the first second look on are not read: a resumed run picks
    the composition its first run did."""
    first: dict[str, list[Entry]] = {}
    for entry in looks:
        if entry.phase == Phase.STAGE_AGAIN:
            break
        if entry.stages in names:
            first.setdefault(entry.stages, []).append(entry)
    unclear = [only for only, *more in first.values() if not more and only.measured
               and only.verdict == UNCLEAR and only.ratio is not None and only.ratio < 1]
    return min(unclear, key=lambda e: (e.ratio or 1.0, e.stages)) if unclear else None


def say_match(evaluator: Evaluator, profile: pgo.TrainedProfile,
              composition: tuple[Stage, ...], show: Callable[[str], None]) -> None:
    """What the build of `composition` said of its profile's fit (pgo.match_note)."""
    note = pgo.match_note(evaluator, profile, stages.name(composition))
    if note:
        show(note)


class Composer:
    def __init__(self, evaluator: Evaluator, measurements: Measurements,
                 allowed: tuple[Stage, ...], train: Callable[[], pgo.TrainedProfile],
                 show: Callable[[str], None], earlier: TargetStages | None = None):
        self.evaluator = evaluator
        self.measurements = measurements
        self.allowed = allowed
        self.train = train               # trains (or finds) the PGO profile, once
        self.show = show
        self._profile: pgo.TrainedProfile | None = None
        self.recorded = stages.recorded_lto([u.argv for u in evaluator.units])
        if self.recorded:
            show(f"the recorded build is {self.recorded} already (its units' own flags): "
                 "the stages start from it")
        self.usable = self._usable()
        self.unmeasured: list[str] = []   # compositions the budget or --time left out
        self.left_out_by = ""             # which: "--time", "--stage-budget"
        self.close_rival: CloseRival | None = None    # the close call of this run's choice
        # what the database chose last time, and its close call: measured first again
        self.earlier = earlier if earlier and earlier.output == evaluator.target.output_rel \
            else None

    def _left_out(self, compositions: list[tuple[Stage, ...]], untrainable: bool,
                  by: str) -> None:
        """Remember what was not measured, for the run's summary (PGO compositions only
        while PGO could be trained)."""
        self.unmeasured = [stages.name(c) for c in compositions
                           if not (untrainable and Stage.PGO in c)]
        self.left_out_by = by

    def unmeasured_note(self) -> tuple[str, ...]:
        """The summary's line on the compositions never measured, and what measures them."""
        if not self.unmeasured:
            return ()
        more = ("a longer --time" if self.left_out_by == "--time"
                else "a larger --stage-budget (or --budget)")
        return (f"not measured ({self.left_out_by} ran out first): "
                f"{', '.join(self.unmeasured)}; {more} measures "
                f"{'it' if len(self.unmeasured) == 1 else 'them'}",)

    def _usable(self) -> set[Stage]:
        """The allowed stages that can run here; the others are said once, with why."""
        usable = set()
        for stage in self.allowed:
            why = stages.unavailable(stage, self.evaluator.target)
            if why:
                self.show(f"stage {stage} skipped: {why}")
            else:
                usable.add(stage)
        return usable

    def candidates(self) -> list[tuple[Stage, ...]]:
        """The link-time compositions to try, in order; on a recorded build that is LTO
        already, each as it builds there, the recorded build itself and repeats left
        out (on a ThinLTO build: pgo+lto, lto, pgo+thinlto)."""
        found: list[tuple[Stage, ...]] = []
        for composition in COMPOSITIONS:
            if not set(composition) <= self.usable:
                continue
            built = stages.effective(composition, self.recorded)
            if built != (self.recorded,) and built not in found:
                found.append(built)
        return again_first(by_cost(found, len(self.evaluator.units)), self.earlier)

    def choose(self, budget: int, deadline: Deadline | None = None
               ) -> tuple[Chosen | None, int]:
        """(the best verified composition or None, the evaluations it measured), within
        `budget` evaluations and the `deadline` (the stages' share of --time)."""
        best: Chosen | None = None
        spent = 0
        untrainable = False
        deadline = deadline or Deadline(None)
        pace = Pace()
        kinds = KindPace()       # a composition is judged by the ones of its LTO mode
        candidates = self.candidates()
        self._say_again(candidates)
        for number, composition in enumerate(candidates, 1):
            if Stage.PGO in composition:
                if untrainable:
                    continue
                try:
                    self.flags(composition)
                except (pgo.PgoError, EvaluateError, MeasureError) as error:
                    untrainable = True     # the training run failed: no PGO composition
                    self.show(f"stage pgo skipped: training failed: {error}")
                    continue
            if spent >= budget:
                self.show(f"stage budget spent ({counted(budget, 'evaluation')}); "
                          f"{stages.name(composition)} and later not measured")
                self._left_out(candidates[number - 1:], untrainable, "--stage-budget")
                break
            looks = 1 if self.measurements.deterministic else CONFIRMED
            each = kinds.each(lto_mode(composition))
            if not deadline.holds(None if each is None else each * looks):
                self.show(f"--time: not enough of the stages' half of it is left for "
                          f"{stages.name(composition)} and the ones after it (about "
                          f"{duration_text(each * looks)} each, with a confirmation)"
                          if each is not None and (deadline.left() or 0) > 0 else
                          f"--time: the stages' half of it is spent; "
                          f"{stages.name(composition)} and later not measured")
                self._left_out(candidates[number - 1:], untrainable, "--time")
                break
            ahead = min(len(candidates) - number + 1, budget - spent)
            self.show(f"[stage {number} of {len(candidates)}] {deadline.text(STAGES_TIME)}"
                      f"{pace.time_left(ahead)}{stages.name(composition)}")
            began = time.monotonic()
            entry, measured = self._verified(composition, best)
            kinds.add(lto_mode(composition), time.monotonic() - began, measured)
            spent += measured
            pace.measured += measured
            if entry is None:
                continue
            assert entry.ratio is not None
            if best is None or best.entry.ratio is None or entry.ratio < best.entry.ratio \
                    or self._tie(composition, entry, best):
                if best is not None and entry.ratio >= (best.entry.ratio or 0):
                    self.show(f"stage {stages.name(composition)} kept over {best.name}: "
                              f"as fast within {COST_TIE:.0%}, and a per-file candidate "
                              "relinks only what changed")
                best = self.chosen(composition, entry)
        if best is None:
            best, again = self._second_look(candidates, budget - spent, deadline, kinds)
            spent += again
        elif spent < budget:
            settled = against_its_rival(self, best, candidates, deadline, kinds)
            best, spent, self.close_rival = settled.chosen, spent + settled.spent, settled.rival
        return best, spent

    def _say_again(self, candidates: list[tuple[Stage, ...]]) -> None:
        """Say that last time's close call is measured first again, and what it was."""
        rival = self.earlier.rival if self.earlier else None
        names = [stages.name(c) for c in candidates[:2]]
        if rival is not None and rival.stages in names:
            self.show(f"last time's close call first: {' and '.join(names)} "
                      f"(the database's note: {rival.how})"[:400])

    def _second_look(self, candidates: list[tuple[Stage, ...]], left: int,
                     deadline: Deadline, kinds: KindPace) -> tuple[Chosen | None, int]:
        """When no composition was verified faster: the one whose only look read fastest,
        unclear but below 1, measured again with fresh pairs and twice as many, and
        confirmed as a first look is (None, 0 when there is none, or no budget or time
        for it).  On a noisy day PGO + LTO read "unclear" for bzip2 and zstd where an
        independent A/B found them 4-9 % faster, and the run shipped nothing: the
        stages are the largest lever.  An identical build passes both fresh looks about
        once in 1,600 runs, as a first look and its confirmation do."""
        if self.measurements.deterministic:
            return None, 0
        closest = promising(self.measurements.journal.of_phase(*STAGE_PHASES),
                            [stages.name(c) for c in candidates])
        if closest is None:
            return None, 0
        if left < 1:
            self.show(f"stage budget spent: no second look at {closest.stages}, which read "
                      f"{closest.ratio:.4f}x, unclear (--stage-budget raises it)")
            return None, 0
        composition = next(c for c in candidates if stages.name(c) == closest.stages)
        each = kinds.each(lto_mode(composition))
        if not deadline.holds(None if each is None else each * CONFIRMED * AGAIN_PAIRS):
            self.show(f"--time: no time left for a second look at {closest.stages}")
            return None, 0
        self.show(f"[stage, a second look] none verified faster; {closest.stages} read "
                  f"{closest.ratio:.4f}x, unclear: measured again with fresh pairs")
        entry, measured = self._verified(composition, None, Phase.STAGE_AGAIN)
        return (self.chosen(composition, entry) if entry else None), measured

    def chosen(self, composition: tuple[Stage, ...], entry: Entry) -> Chosen:
        """`composition`, verified by `entry`, as the run's baseline."""
        return Chosen(composition, self.flags(composition), entry,
                      self._profile if Stage.PGO in composition else None)

    def _tie(self, composition: tuple[Stage, ...], entry: Entry, best: Chosen | None) -> bool:
        return best is not None and cheaper_tie(composition, entry.ratio, best.stages,
                                                best.entry.ratio, len(self.evaluator.units))

    def flags(self, composition: tuple[Stage, ...]) -> StageFlags:
        profile_flag = ""
        if Stage.PGO in composition:
            if self._profile is None:
                self._profile = self.train()
            profile_flag = self._profile.use_flag()
        return stages.flags(composition, opt_level(self.evaluator), profile_flag)

    def _verified(self, composition: tuple[Stage, ...], best: Chosen | None,
                  first: Phase = Phase.STAGE) -> tuple[Entry | None, int]:
        """The composition's confirmed FASTER measurement, or None; and how many
        evaluations it took (journaled or new: a resumed run spends as the first did).
        A first look that does not beat `best` (nor ties it at less cost) is not
        confirmed: it cannot be chosen.  `first`: STAGE_AGAIN for a second look, which
        it and its confirmation take with AGAIN_PAIRS times the pairs."""
        name = stages.name(composition)
        flags = self.flags(composition)
        under = {u.id: flags.unit_flags for u in self.evaluator.units}
        journal = self.measurements.journal
        pairs = AGAIN_PAIRS if first == Phase.STAGE_AGAIN else 1

        def once(phase: Phase, what: str) -> Entry:
            # Tight (twice the pairs), as the final re-measurement is: the stages are the
            # largest lever of a run, and at 30 pairs on a noisy day PGO+LTO read
            # "unclear" for two suite programs an independent A/B found 4-9 % faster.
            return self.measurements.once(phase, {}, what, tight=True, under=under,
                                          stages=name, link_flags=flags.link_flags,
                                          more_pairs=pairs)

        entry = once(first, f"stage {name} against the recorded build"
                     + (", a second look" if first == Phase.STAGE_AGAIN else ""))
        if self._profile is not None and Stage.PGO in composition:
            say_match(self.evaluator, self._profile, composition, self.show)
        ahead = best.entry if best else None
        better = ahead is None or (entry.ratio is not None and ahead.ratio is not None
                                   and entry.ratio < ahead.ratio) \
            or self._tie(composition, entry, best)
        if entry.verdict == FASTER and entry.measured and better \
                and not self.measurements.deterministic:
            entry = once(Phase.STAGE_CONFIRM, f"  confirming stage {name} with fresh pairs")
        measured = 1 + bool(journal.find(Phase.STAGE_CONFIRM, entry.config))
        self.show(f"stage {name}: {entry.interval_text()} over the recorded build"
                  + (f" -> {entry.verdict}" if entry.measured else ""))
        verified = entry.verdict == FASTER and entry.measured and (
            better if self.measurements.deterministic else entry.phase == Phase.STAGE_CONFIRM)
        return (entry if verified else None), measured
