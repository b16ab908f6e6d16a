"""The agent strategy: analyst, planner and diagnoser (see `agents/`) behind ask/tell.

Each proposal is a set of per-unit knob changes on top of the incumbent (the best
clearly-faster configuration so far).  A proposal naming a unit, knob or value outside
the space, or one that a constraint undoes, is not measured: it goes back to the planner
as feedback.  A candidate that regresses or fails goes to the diagnoser, whose lesson the
planner reads from then on.  The tuner attaches the agents' context (evidence, run
folder) as `strategy.context` before the first `ask`.
"""

from __future__ import annotations

from typing import Iterator

from autopass_build.tuning.search.base import Option, Point, Strategy

MAX_EMPTY_ROUNDS = 3


class AgentStrategy(Strategy):
    name = "agent"
    summary = "analyst -> planner -> diagnoser over compiler evidence ([agent] backend)"
    OPTIONS = {
        "batch": Option(4, "candidates the planner proposes per round", 1, 20),
    }

    context = None       # agents.Context, attached by the tuner
    backend = None       # agents backend (rules, openai, replay)

    def __init__(self, space, seed: int = 0, options: dict | None = None):
        super().__init__(space, seed, options)
        self.history = []          # agents.Trial, in order
        self.lessons = []
        self.feedback: list[str] = []
        self.incumbent: Point = space.default()
        self.diagnosis = None
        self._info: dict[Point, dict] = {}

    def tell(self, point: Point, value: float | None, info: dict | None = None) -> None:
        super().tell(point, value, info)
        self._info[tuple(point)] = info or {}
        if self.value(point) < self.value(self.incumbent):
            self.incumbent = tuple(point)

    def proposals(self) -> Iterator[Point]:
        from autopass_build.tuning.agents.context import Trial

        if self.context is None or self.backend is None:
            raise RuntimeError("the agent strategy needs the tuner's context")
        self.diagnosis = self.backend.analyse(self.context)
        empty_rounds = 0
        while empty_rounds < MAX_EMPTY_ROUNDS:
            proposals = self.backend.plan(self.context, self.diagnosis, self.history,
                                          self._incumbent_changes(), self.lessons,
                                          self.feedback[-10:], self.options["batch"])
            measured = 0
            for proposal in proposals:
                point = self._point_for(proposal)
                if point is None:
                    continue
                if point in self.seen:
                    self.feedback.append(f"{proposal.changes} was measured already")
                    continue
                yield point
                measured += 1
                info = self._info.get(point, {})
                trial = Trial(len(self.history) + 1, proposal.changes,
                              info.get("outcome", "?"), info.get("ratio"),
                              info.get("verdict"), info.get("detail", ""))
                self.history.append(trial)
                if trial.regressed():
                    self.lessons.append(self.backend.diagnose(self.context, trial))
            empty_rounds = 0 if measured else empty_rounds + 1

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
        repaired = self.space.repair(tuple(point))
        if repaired != tuple(point):
            self.feedback.append(f"{proposal.changes} breaks a constraint (see limited_by in "
                                 "the knob table); dependent knobs were reset")
        return repaired
