"""What a tuning run knows once it is set up (`RunContext`), handed to strategies
(`Strategy.start`) and
to the screener, so that neither is wired up by setting attributes from outside; and
what it ends with (`TuneResult`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from autopass_build.candidates.evaluate import Evaluator
from autopass_build.config import Config
from autopass_build.evidence.hotspots import Profile
from autopass_build.store.build_records import CommandMates, UnitRecord
from autopass_build.store.index import Store
from autopass_build.tuning.conclude import Winner
from autopass_build.tuning.journal import Entry, Journal
from autopass_build.tuning.space import JointSpace


@dataclass
class RunContext:
    store: Store
    config: Config
    evaluator: Evaluator                 # the run's baseline (PGO flags included, if any)
    journal: Journal
    space: JointSpace                    # one block per tuned source
    hot: Profile | None                  # the stored profile, when it is this target's
    show: Callable[[str], None]          # progress messages
    seed: int = 0
    resume: bool = False

    @property
    def sources(self) -> list[str]:
        return [label for label, _ in self.space.blocks]

    def unit_of(self, source: str) -> UnitRecord:
        """The recorded unit a tuned source stands for (the first, for libtool twins)."""
        return next(u for u in self.evaluator.units if u.source_rel == source)

    def shares(self) -> dict[str, float]:
        """Each unit's share of the profile, in percent."""
        return self.hot.unit_shares() if self.hot else {}

    def hot_functions(self) -> dict[str, dict[str, float]]:
        """source -> {function: its share of the profile}, split evenly between the
        units that define a function of that name."""
        functions: dict[str, dict[str, float]] = {}
        for f in (self.hot.functions if self.hot else []):
            for unit in f.units:
                functions.setdefault(unit, {})[f.symbol] = f.share / len(f.units)
        return functions


@dataclass
class TuneResult:
    journal: Journal
    sources: list[str]
    measured: int                      # search evaluations in the journal
    best: Entry | None                 # the incumbent, if any candidate was clearly faster
    final: Entry | None                # the final re-measurement
    winners: list[Winner]
    flags_db: str | None               # where the winners were written
    stages: str = ""                   # the whole-program stages written (BOLT included)
    searched_on: str = ""              # the stages the per-file search ran on
    notes: tuple[str, ...] = ()        # what the summary should explain
    # a source compiled in one command with others -> those others (they took its flags)
    command_mates: CommandMates = field(default_factory=dict)
