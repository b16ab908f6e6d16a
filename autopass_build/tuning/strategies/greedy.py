"""Greedy coordinate descent: one knob at a time, every value of it, keep the best.

Coordinates are visited in the space's order (the tuner puts the hottest unit's knobs
first).  A sweep over all coordinates repeats while it improved the incumbent.  With
per-unit credit (`credit.py`) a knob's values are judged by its own unit's cost.
"""

from __future__ import annotations

from typing import Iterator

from autopass_build.tuning.strategies.base import WAIT, Option, Point, Strategy


class Greedy(Strategy):
    name = "greedy"
    summary = "coordinate descent over the knobs of the hottest units first"
    OPTIONS = {
        "sweeps": Option(3, "full passes over all coordinates at most", 1, 100),
    }

    def proposals(self) -> Iterator[Point]:
        incumbent = self.space.default()
        for _ in range(self.options["sweeps"]):
            improved = False
            for coordinate, count in enumerate(self.space.dims):
                tried = []
                for value in range(count):
                    if value == incumbent[coordinate]:
                        continue
                    changed = list(incumbent)
                    changed[coordinate] = value
                    point = self.space.repair(tuple(changed))
                    if point != incumbent:
                        yield point
                        tried.append(point)
                yield WAIT    # a coordinate's values are measured together, then compared
                for point in tried:
                    if self._better(point, incumbent, coordinate):
                        incumbent, improved = point, True
            if not improved:
                return

    def _better(self, point: Point, incumbent: Point, coordinate: int) -> bool:
        """By the unit's own cost where attribution measured both, as long as the
        program did not get decisively slower; else by the whole program's value."""
        label = self.credit.label_of(coordinate)
        if label is not None and self.credit.told:
            mine, theirs = self.credit.cost(point, label), self.credit.cost(incumbent, label)
            if mine is not None and theirs is not None:
                return mine < theirs and self.value(point) <= max(1.0, self.value(incumbent))
        return self.value(point) < self.value(incumbent)
