"""The agent strategy: analyst, planner and diagnoser (see `agents/`) behind ask/tell.

Each proposal is a set of per-unit knob changes on top of the incumbent (the best
clearly-faster configuration so far).  With attribution (`tune --attribute`) the
incumbent is composed per unit (`credit.py`): each unit keeps the knobs that made its own
cost lowest in a candidate the program as a whole did not find slower, so a change that
made its unit faster is built on even when another change in the same candidate hid it.
A proposal naming a unit, knob or value outside the space, or one that a constraint
undoes, is not measured: it goes back to the planner as feedback.  A candidate that regresses or fails goes to the diagnoser, whose lesson the
planner reads from then on.  `start` builds the agents' context (evidence, profile,
run folder) and backend from the run before the first `ask`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterator

from autopass_build.measuring.stats import SLOWER
from autopass_build.tuning.strategies.base import WAIT, Option, Point, StartError, Strategy

if TYPE_CHECKING:
    from autopass_build.tuning.agents.context import Context, Trial
    from autopass_build.tuning.agents.roles import Backend, Diagnosis, Lesson, Proposal
    from autopass_build.tuning.journal import Entry
    from autopass_build.tuning.run import RunContext
    from autopass_build.tuning.space import JointSpace

MAX_EMPTY_ROUNDS = 3


class AgentStrategy(Strategy):
    name = "agent"
    summary = "analyst -> planner -> diagnoser over compiler evidence ([agent] backend)"
    OPTIONS = {
        "batch": Option(4, "candidates the planner proposes per round", 1, 20),
    }

    space: JointSpace              # the agents name units and knobs: a joint space's blocks

    def __init__(self, space: JointSpace, seed: int = 0, options: dict | None = None):
        super().__init__(space, seed, options)
        self.history: list[Trial] = []          # in order
        self.lessons: list[Lesson] = []
        self.feedback: list[str] = []
        self.incumbent: Point = space.default()
        self.diagnosis: Diagnosis | None = None
        self.context: Context | None = None     # from `start`
        self.backend: Backend | None = None     # rules, openai or replay, from `start`
        self._info: dict[Point, Entry] = {}

    def start(self, run: RunContext) -> None:
        from autopass_build.tuning import agents

        functions = run.hot_functions()
        shares = run.shares()
        units = {s: run.unit_of(s) for s in run.sources}
        hot = [agents.HotUnit(s, shares.get(s, 0.0), functions.get(s, {}), units[s].opt_level)
               for s in run.sources]
        shared, own = _shared_and_own(run.space)
        self.context = agents.Context(run.store, units, shared, hot, run.journal.folder,
                                      unit_knobs=own)
        try:
            self.backend = agents.make_backend(run.config.agent, run.journal.folder,
                                               run.show, resume=run.resume)
        except agents.AgentUnavailable as error:
            raise StartError(str(error)) from None

    def tell(self, point: Point, value: float | None, info: Entry | None = None) -> None:
        super().tell(point, value, info)
        point = tuple(point)
        if info is not None:
            self._info[point] = info
        if value is not None and info is not None and info.effects and info.verdict != SLOWER:
            merged = self.credit.merge(self.incumbent, point, ties_to_challenger=False)
            if merged is not None:      # each unit's block from where it cost least
                self.incumbent = merged
                return
        if self.value(point) < self.value(self.incumbent):
            self.incumbent = point

    def proposals(self) -> Iterator[Point]:
        from autopass_build.tuning.agents.context import Trial

        if self.context is None or self.backend is None:
            raise RuntimeError("the agent strategy asks only after start(run)")
        self.diagnosis = self.backend.analyse(self.context)
        empty_rounds = 0
        while empty_rounds < MAX_EMPTY_ROUNDS:
            proposals = self.backend.plan(self.context, self.diagnosis, self.history,
                                          self._incumbent_changes(), self.lessons,
                                          self.feedback[-10:], self.options["batch"])
            # every hypothesis of a plan applies to the incumbent the planner saw, so a
            # plan is one batch: measured together, then read
            planned: list[tuple[Proposal, Point]] = []
            for proposal in proposals:
                point = self._point_for(proposal)
                if point is None:
                    continue
                if point in self.seen or point in (p for _, p in planned):
                    self.feedback.append(f"{proposal.changes} was measured already")
                    continue
                planned.append((proposal, point))
            for _, point in planned:
                yield point
            yield WAIT
            for proposal, point in planned:
                info = self._info.get(point)
                trial = Trial(len(self.history) + 1, proposal.changes,
                              str(info.outcome) if info else "?", info.ratio if info else None,
                              info.verdict if info else None, info.detail if info else "",
                              {e.source: e for e in (info.effects if info else ())})
                self.history.append(trial)
                if trial.regressed():
                    self.lessons.append(self.backend.diagnose(self.context, trial))
            empty_rounds = 0 if planned else empty_rounds + 1

    def _incumbent_changes(self) -> dict[str, dict[str, str]]:
        changes = {}
        for label, space, block in self.space.split(self.incumbent):
            chosen = {k.name: k.short(i) for k, i in zip(space.knobs, block) if i}
            if chosen:
                changes[label] = chosen
        return changes

    def _point_for(self, proposal) -> Point | None:
        """The incumbent with the proposal applied, or None (and feedback) if invalid."""
        point = list(self.incumbent)
        labels = [b[0] for b in self.space.blocks]
        for unit, changes in proposal.changes.items():
            if unit not in labels:
                self.feedback.append(f"unit {unit!r} is not tuned; units: {', '.join(labels)}")
                return None
            coords = self.space.block_coordinates(unit)
            knobs = self.space.blocks[labels.index(unit)][1].knobs
            names = [k.name for k in knobs]
            for name, value in changes.items():
                if name not in names:
                    self.feedback.append(f"knob {name!r} does not exist; knobs: {', '.join(names)}")
                    return None
                knob = knobs[names.index(name)]
                index = knob.index_of(str(value))
                if index is None:
                    self.feedback.append(f"{name}={value!r} is not a value of {name}; values: "
                                         + ", ".join(knob.short(i) for i in range(len(knob.values))))
                    return None
                point[coords[names.index(name)]] = index
        kept_out = [f"{label}: {f.knob} ({f.why})" for label, space, block
                    in self.space.split(tuple(point)) for f in space.forbids(block)]
        repaired = self.space.repair(tuple(point))
        if kept_out:
            self.feedback.append("not for these units, reset to as recorded: "
                                 + "; ".join(kept_out))
        elif repaired != tuple(point):
            self.feedback.append(f"{proposal.changes} breaks a constraint (see limited_by in "
                                 "the knob table); dependent knobs were reset")
        return repaired


def _shared_and_own(space: "JointSpace"):
    """The knobs every tuned unit has (flags), and each unit's own (its decisions on its
    hot loops and functions: tuning/decision_knobs.py)."""
    names = [{k.name for k in block.knobs} for _, block in space.blocks]
    common = set.intersection(*names) if names else set()
    first = space.blocks[0][1]
    shared = first.without({k.name for k in first.knobs} - common, "not every unit's")
    shared.notes = list(first.notes)
    own = {label: tuple(k for k in block.knobs if k.name not in common)
           for label, block in space.blocks}
    return shared, own
