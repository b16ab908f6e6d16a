"""The per-file search loop every strategy shares, and the composite after it.

    strategy.ask ─▶ [screen] ─▶ replay + A/B (identical to the baseline: free) ─▶ confirm
        ▲                                                                          │
        └─────────────────────────── strategy.tell ◀── journal ◀──────────────────┘
    then, with attribution: the per-unit winners composed, measured and confirmed

A configuration is measured once (the journal is the cache, so a resumed run asks the
same questions and gets the journaled answers).  The budget counts measurements: a
screened-out candidate costs a compile, one that compiles to the baseline's program
byte for byte costs a compile and no runs, and neither is counted.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from autopass_build.core.durations import duration_text
from autopass_build.core.flags import UnitFlags
from autopass_build.core.plural import counted
from autopass_build.measuring.stats import FASTER
from autopass_build.tuning import composite
from autopass_build.tuning.clock import UNCOUNTED, Deadline, Pace
from autopass_build.tuning.journal import Entry, Journal, Phase
from autopass_build.tuning.measuring import (
    Measurements,
    config_key,
    flags_text,
    value_for_strategy,
)
from autopass_build.tuning.run import RunContext
from autopass_build.tuning.strategies import Strategy

if TYPE_CHECKING:   # screening (scikit-learn) is imported only when a run screens
    from autopass_build.tuning.screen import Screener

MAX_IDENTICAL = 200       # candidates identical to the baseline (free) before a run stops


def measured_in_search(journal: Journal) -> int:
    """Search evaluations that count against the budget: those that were measured."""
    return sum(1 for e in journal.of_phase(Phase.SEARCH) if not e.identical)


# Under --time, the steps after the search keep at most this share of the time left when
# the search starts; the rest is the search's, where the decisions carried in the IR are.
# With every step planned (CS-PGO, layout, three link-level knobs, BOLT and BOLT in place
# of layout: 15 evaluations) and two-minute evaluations, LAME's steps kept all 19 minutes
# the stages left of `--time 30m`, and the search measured nothing.  In our runs of them,
# a step was kept now and then (CS-PGO and layout once each on Lua, the latter not again
# in the next run; ext-TSP once on zstd, 0.9 %), where the search's decisions gained
# 1.27x on the loop kernels.  BOLT still goes first among the steps
# (steps_on_top._bolt_first).  At 2/3, bc's `--time 20m` (8 min left when the search
# began) stopped the search after one evaluation, one short of the decision worth 1.12x
# there, and the steps then used about half of the 6 minutes kept: BOLT first left the
# others out, and BOLT took 2 or 3 minutes (the run ended with 3 of its 20 unused).
STEPS_SHARE = 1 / 2


class Search:
    """One run's search: `budget` measured search evaluations at most (the journal's
    earlier ones included), then the composite when attribution is on."""

    def __init__(self, measurements: Measurements, strategy: Strategy, budget: int,
                 show: Callable[[str], None], screener: "Screener | None" = None,
                 deadline: Deadline | None = None, kept_after: int = 1,
                 first_each: float | None = None):
        """`deadline`: the run's time budget; `kept_after`: how many evaluations' time
        the steps after the search need (the final re-measurement, BOLT); `first_each`:
        the seconds an evaluation is expected to take before the first one ends (a
        stage's, which builds and measures the program as a candidate does)."""
        self.measurements = measurements
        self.journal = measurements.journal
        self.strategy = strategy
        self.budget = budget
        self.show = show
        self.screener = screener
        self.deadline = deadline or Deadline(None)
        self.kept_after = kept_after
        self.first_each = first_each
        left = self.deadline.left()
        self.kept_at_most = None if left is None else STEPS_SHARE * max(0.0, left)

    def run(self, run: RunContext) -> Entry | None:
        """The incumbent after the search (and the composite), if any.  Candidates come
        in batches as wide as the cluster's verdict nodes (one on this machine alone);
        each batch is journaled in order and told to the strategy in order."""
        strategy, journal, screener = self.strategy, self.journal, self.screener
        self.measured, self.unmeasured = measured_in_search(journal), 0
        pace = Pace()
        while self.measured < self.budget and self.unmeasured <= MAX_IDENTICAL:
            if not self._time_for_one_more(pace, self.measured):
                break
            points = strategy.ask_batch(self._width())
            if not points:
                self.show(f"{strategy.name} has no new candidate after {self.measured} "
                          "evaluations: the space is exhausted for it")
                break
            flags = [run.space.flags_by_label(point) for point in points]
            entries = self._evaluated(flags, pace)
            for point, its_flags, entry in zip(points, flags, entries):
                entry = self.confirmed(entry, its_flags)
                strategy.tell(point, value_for_strategy(entry), entry)
        if screener:
            screener.persist()
        if self.measurements.attributor is not None:
            self._composite()
        return self.measurements.incumbent()

    def _side_by_side(self) -> int:
        """Candidates measured at once: the cluster's verdict nodes, else one."""
        remote = self.measurements.remote
        return remote.width if remote else 1

    def _width(self) -> int:
        """The next batch's size: side by side, within what is left of the budget."""
        return max(1, min(self._side_by_side(), self.budget - self.measured))

    def _evaluated(self, batch: list[UnitFlags], pace: Pace) -> list[Entry]:
        """Each candidate's entry: the journal's, screened out, or measured (the batch's
        measured ones at once)."""
        journal, screener = self.journal, self.screener
        entries: list[Entry | None] = []
        measuring: list[tuple[int, UnitFlags, object]] = []
        for flags in batch:
            key = config_key(flags)
            entry = journal.find(Phase.SEARCH, key) or journal.find(Phase.SCREENED, key)
            if entry is None:
                judgement = screener.judge(flags) if screener else None
                if judgement and not judgement.measure:
                    self.show(f"  screened out {flags_text(flags)}: {judgement.why}")
                    entry = self.measurements.screened(flags, judgement)
                else:
                    self._announce(flags, judgement, pace)
                    measuring.append((len(entries), flags, judgement))
            entries.append(entry)
        measured = self.measurements.measure_many(
            Phase.SEARCH, [f for _, f, _ in measuring], [j for _, _, j in measuring])
        for (i, _, _), entry in zip(measuring, measured):
            if entry.identical:      # cost a compile, not a measurement
                self.measured, self.unmeasured = self.measured - 1, self.unmeasured + 1
                # not indented: a detail line would be thinned out of the log
                self.show("identical to the baseline, byte for byte: not measured, "
                          "not counted against the budget")
            else:
                pace.measured += 1
            if screener:
                screener.learn(entry)
            entries[i] = entry
        return [e for e in entries if e is not None]

    def _announce(self, flags: UnitFlags, judgement, pace: Pace) -> None:
        self.measured += 1
        counted = self.deadline.left() is None or self.budget < UNCOUNTED
        self.show(f"[{self.measured}{f'/{self.budget}' if counted else ''}] "
                  f"{self._incumbent_text()}{self.deadline.text()}"
                  f"{pace.time_left(self.budget - self.measured + 1) if counted else ''}"
                  f"measuring {flags_text(flags)}"
                  + (f" ({judgement.why})" if judgement else ""))

    def _time_for_one_more(self, pace: Pace, measured: int) -> bool:
        """Whether the time budget holds one more batch and the steps after the search
        (at the pace so far); said once when it does not.  The pace is wall time per
        evaluation, so on a cluster a batch of `width` (measured side by side) and each
        step after it (measured alone) take about `width` times that."""
        # before the first evaluation ends, a stage's pace: one search evaluation that
        # outlasts the time left would take the time kept for BOLT (SQLite, --time 10m)
        each = pace.each() or self.first_each
        batch = self._side_by_side()
        if each is None:
            return True
        kept = each * batch * self.kept_after
        if self.kept_at_most is not None:
            kept = min(kept, self.kept_at_most)
        if self.deadline.holds(each * batch + kept):
            return True
        left = self.deadline.left() or 0.0
        self.show(f"--time: the search stops after {counted(measured, 'evaluation')}; the "
                  f"{duration_text(max(0.0, left))} left are kept for the steps after it "
                  f"(an evaluation takes about {duration_text(each or 0.0)})")
        return False

    def confirmed(self, entry: Entry, flags: UnitFlags) -> Entry:
        """A FASTER candidate that would become the incumbent is measured again, with
        fresh pairs, before anything builds on it.  Among many candidates one false
        "faster" is likely (20 identical candidates at 2.5 % each: 40 %); two in a row
        for the same candidate are not.  Deterministic metrics need no second look.
        Returns the entry that counts: the confirmation when there is one."""
        if entry.verdict != FASTER or self.measurements.deterministic or entry.ratio is None:
            return entry
        check = self.journal.find(Phase.CONFIRM, entry.config)
        if check is None:
            best = self.measurements.incumbent()
            if best is not None and best.ratio is not None and best.ratio <= entry.ratio:
                return entry             # not a new incumbent: nothing builds on it
            self.show(f"  confirming #{entry.n} ({entry.ratio:.4f}x) with fresh pairs")
            check = self.measurements.measure(Phase.CONFIRM, flags)
        return check

    def _composite(self) -> None:
        """The per-unit winners of attribution composed into one candidate, measured by
        the whole-program A/B and confirmed like any would-be incumbent."""
        winners = composite.per_unit_winners(self.journal)
        flags = composite.candidate(self.journal, winners)
        if flags is None:
            self.show("composite: " + ("no unit was attributed a clear gain" if not winners
                                       else "the per-unit winners are one candidate "
                                       "measured already"))
            return
        self.show(f"composite of the per-unit winners: {composite.describe(winners)}")
        entry = self.measurements.once(Phase.COMPOSITE, flags, "measuring the composite")
        self.confirmed(entry, flags)

    def _incumbent_text(self) -> str:
        best = self.measurements.incumbent()
        return "no clear gain yet · " if best is None else \
            f"best {best.interval_text()} (#{best.n}) · "
