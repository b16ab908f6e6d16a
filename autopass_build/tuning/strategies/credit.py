"""Per-unit credit: what attribution told about each unit's own cost, by that unit's flags.

A candidate's whole-program ratio mixes every unit it changed: one unit 10 % faster and
another 5 % slower read as "no change".  With `tune --attribute` each search entry also
carries each changed unit's own cost (`UnitEffect`), and a point of the joint space is
one block of knobs per unit, so a unit's block can be judged by its unit's cost:

    greedy  a knob of unit U keeps the value that made U cheapest (and did not make the
            program decisively slower)
    ga      crossover hands each unit's block down whole from the parent in which that
            unit cost less
    de      selection is per block: the target takes the trial's block of each unit that
            cost no more in the trial
    pso     each particle's own best, and the swarm's best, are composed block by block
            from the blocks that made their unit cheapest
    agent   the incumbent its proposals build on is composed block by block in the same
            way (from candidates the program did not find slower), and the rules
            planner escalates a knob that made its own unit faster
    random  learns nothing from values, so credit changes nothing

A unit's cost is told as the whole program's is (`measuring.value_for_strategy`): the
ratio when its verdict was decisive, 1.0 when not, so no strategy chases noise; a block
measured in several candidates (GA and DE carry blocks over) gets the geometric mean.
The block "as recorded" costs 1.0 by definition.  Without attribution nothing is told
here, every question answers None and each strategy runs exactly as before.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Iterable

from autopass_build.measuring.stats import FASTER, SLOWER
from autopass_build.tuning.space import Point

if TYPE_CHECKING:
    from autopass_build.measuring.attribution import UnitEffect



class UnitCredit:
    def __init__(self, blocks: list[tuple[str, range]]):
        self.blocks = blocks                        # (unit label, its coordinates)
        self._coordinates = dict(blocks)
        self._logs: dict[tuple[str, Point], list[float]] = {}

    @property
    def told(self) -> bool:
        """Whether any unit's cost was told (attribution is on and measured something)."""
        return bool(self._logs)

    def record(self, point: Point, effects: Iterable["UnitEffect"]) -> None:
        for effect in effects:
            if effect.source not in self._coordinates or not effect.ratio > 0:
                continue
            cost = effect.ratio if effect.verdict in (FASTER, SLOWER) else 1.0
            key = (effect.source, self.block(point, effect.source))
            self._logs.setdefault(key, []).append(math.log(cost))

    def block(self, point: Point, label: str) -> Point:
        return tuple(point[c] for c in self._coordinates[label])

    def cost(self, point: Point, label: str) -> float | None:
        """Unit `label`'s own cost with its flags in `point` (1.0 as recorded), or None
        when attribution never measured that block."""
        block = self.block(point, label)
        if not any(block):
            return 1.0
        logs = self._logs.get((label, block))
        return math.exp(sum(logs) / len(logs)) if logs else None

    def label_of(self, coordinate: int) -> str | None:
        return next((label for label, coordinates in self.blocks
                     if coordinate in coordinates), None)

    def merge(self, keep: Point, challenger: Point, ties_to_challenger: bool) -> Point | None:
        """`keep` with each unit's block replaced by `challenger`'s where that unit cost
        less in `challenger` (or as much, with `ties_to_challenger`); None when nothing
        was told or a block that differs was never measured (the caller then decides by
        the whole program's value)."""
        if not self.told:
            return None
        merged = list(keep)
        for label, coordinates in self.blocks:
            if self.block(keep, label) == self.block(challenger, label):
                continue
            kept, challenging = self.cost(keep, label), self.cost(challenger, label)
            if kept is None or challenging is None:
                return None
            if challenging < kept or (ties_to_challenger and challenging == kept):
                for c in coordinates:
                    merged[c] = challenger[c]
        return tuple(merged)
