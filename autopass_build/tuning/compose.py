"""Whole-program stages first: which composition becomes the baseline of a tuning run.

    compositions in order of expected value (instruments/stages.py), the unavailable
    ones skipped with their reason ─▶ each measured against the recorded build, a
    FASTER one confirmed with fresh pairs (timing metrics) ─▶ the best confirmed one
    becomes the run's baseline; per-file flags are tuned on top of it

Stage evaluations come out of the run's budget, at most half of it, so per-file tuning
always gets the rest.  A composition's gain is in the journal (phase "stage") against
the recorded build; the report derives its gain against the compositions it extends.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from autopass_build.core.stage_flags import lto_level
from autopass_build.instruments import pgo, stages
from autopass_build.instruments.evaluate import EvaluateError, Evaluator
from autopass_build.instruments.measure import MeasureError
from autopass_build.instruments.stages import COMPOSITIONS, Stage, StageFlags
from autopass_build.instruments.stats import FASTER
from autopass_build.tuning.journal import Entry, Phase
from autopass_build.tuning.measuring import Measurements


@dataclass
class Chosen:
    """The composition that became the baseline, and what it adds to the build."""
    stages: tuple[Stage, ...]
    flags: StageFlags
    entry: Entry                       # its verified measurement against the recording
    profile: pgo.TrainedProfile | None

    @property
    def name(self) -> str:
        return stages.name(self.stages)


def opt_level(evaluator: Evaluator) -> str:
    """The LTO link's codegen level for the target's units (one of LTO_LEVELS: what the
    database's target section may hold)."""
    return lto_level({u.opt_level for u in evaluator.units})


class Composer:
    def __init__(self, evaluator: Evaluator, measurements: Measurements,
                 allowed: tuple[Stage, ...], train: Callable[[], pgo.TrainedProfile],
                 show: Callable[[str], None]):
        self.evaluator = evaluator
        self.measurements = measurements
        self.allowed = allowed
        self.train = train               # trains (or finds) the PGO profile, once
        self.show = show
        self._profile: pgo.TrainedProfile | None = None

    def candidates(self) -> list[tuple[Stage, ...]]:
        """The compositions to try, in order; unavailable stages are said once."""
        skipped: dict[Stage, str] = {}
        for stage in self.allowed:
            why = stages.unavailable(stage, self.evaluator.target)
            if why:
                skipped[stage] = why
                self.show(f"stage {stage} skipped: {why}")
        usable = set(self.allowed) - set(skipped)
        return [c for c in COMPOSITIONS if set(c) <= usable]

    def choose(self, budget: int) -> tuple[Chosen | None, int]:
        """(the best verified composition or None, the evaluations it measured)."""
        best: Chosen | None = None
        spent = 0
        untrainable = False
        for composition in self.candidates():
            if Stage.PGO in composition:
                if untrainable:
                    continue
                try:
                    self._flags(composition)
                except (pgo.PgoError, EvaluateError, MeasureError) as error:
                    untrainable = True     # the training run failed: no PGO composition
                    self.show(f"stage pgo skipped: training failed: {error}")
                    continue
            if spent >= budget:
                self.show(f"stage budget spent ({budget} evaluations); "
                          f"{stages.name(composition)} and later not measured")
                break
            entry, measured = self._verified(composition, best.entry if best else None)
            spent += measured
            if entry is None:
                continue
            assert entry.ratio is not None
            if best is None or best.entry.ratio is None or entry.ratio < best.entry.ratio:
                best = Chosen(composition, self._flags(composition), entry,
                              self._profile if Stage.PGO in composition else None)
        return best, spent

    def _flags(self, composition: tuple[Stage, ...]) -> StageFlags:
        profile_flag = ""
        if Stage.PGO in composition:
            if self._profile is None:
                self._profile = self.train()
            profile_flag = self._profile.use_flag()
        return stages.flags(composition, opt_level(self.evaluator), profile_flag)

    def _verified(self, composition: tuple[Stage, ...], best: Entry | None
                  ) -> tuple[Entry | None, int]:
        """The composition's confirmed FASTER measurement, or None; and how many
        evaluations it took (journaled or new: a resumed run spends as the first did).
        A first look that does not beat `best` is not confirmed: it cannot be chosen."""
        name = stages.name(composition)
        flags = self._flags(composition)
        under = {u.id: flags.unit_flags for u in self.evaluator.units}
        journal = self.measurements.journal
        entry = self.measurements.once(Phase.STAGE, {}, f"stage {name} against the recorded "
                                       "build", under=under, stages=name,
                                       link_flags=flags.link_flags)
        better = best is None or (entry.ratio is not None and best.ratio is not None
                                  and entry.ratio < best.ratio)
        if entry.verdict == FASTER and entry.measured and better \
                and not self.measurements.deterministic:
            entry = self.measurements.once(Phase.STAGE_CONFIRM, {}, f"  confirming stage "
                                           f"{name} with fresh pairs", under=under,
                                           stages=name, link_flags=flags.link_flags)
        measured = 1 + bool(journal.find(Phase.STAGE_CONFIRM, entry.config))
        self.show(f"stage {name}: {entry.interval_text()} of the recorded build"
                  + (f" -> {entry.verdict}" if entry.measured else ""))
        verified = entry.verdict == FASTER and entry.measured and (
            better if self.measurements.deterministic else entry.phase == Phase.STAGE_CONFIRM)
        return (entry if verified else None), measured
