"""Particle swarm: continuous positions over the value indexes, rounded to the grid and
repaired when evaluated; each particle follows its own best and the swarm's best.  With
per-unit credit (`credit.py`) both bests are composed block by block from the blocks
that made their unit cheapest."""

from __future__ import annotations

from typing import Iterator

from autopass_build.tuning.strategies.base import WAIT, Option, Point, Strategy


class ParticleSwarm(Strategy):
    name = "pso"
    summary = "particle swarm optimisation on the knob indexes"
    OPTIONS = {
        "particles": Option(8, "particles in the swarm", 2, 1000),
        "inertia": Option(0.7, "weight of a particle's own velocity", 0.0, 2.0),
        "cognitive": Option(1.5, "pull towards the particle's best", 0.0, 4.0),
        "social": Option(1.5, "pull towards the swarm's best", 0.0, 4.0),
    }

    def proposals(self) -> Iterator[Point]:
        dims = self.space.dims
        starts = [self.space.default()] + [self.random_point()
                                           for _ in range(self.options["particles"] - 1)]
        positions = [[float(v) for v in p] for p in starts]
        velocities = [[self.rng.uniform(-1, 1) * (n - 1) / 2 for n in dims] for _ in starts]
        own_best = list(starts)
        while True:
            moved: list[Point] = []
            for position in positions:
                point = self.space.repair(tuple(min(n - 1, max(0, round(x)))
                                                for x, n in zip(position, dims)))
                yield point
                moved.append(point)
            yield WAIT        # the swarm moves once every particle is measured
            for i, point in enumerate(moved):
                own_best[i] = self._better_of(own_best[i], point)
            swarm_best = min(own_best, key=lambda p: (self.value(p), p))
            for best in own_best if self.credit.told else ():
                swarm_best = self._better_of(swarm_best, best)
            for i, position in enumerate(positions):
                for k, n in enumerate(dims):
                    velocity = (self.options["inertia"] * velocities[i][k]
                                + self.options["cognitive"] * self.rng.random()
                                * (own_best[i][k] - position[k])
                                + self.options["social"] * self.rng.random()
                                * (swarm_best[k] - position[k]))
                    velocities[i][k] = max(-(n - 1), min(n - 1, velocity))
                    position[k] = min(n - 1.0, max(0.0, position[k] + velocities[i][k]))

    def _better_of(self, best: Point, point: Point) -> Point:
        merged = self.credit.merge(best, point, ties_to_challenger=False)
        if merged is not None:
            return self.space.repair(merged)
        return point if self.value(point) < self.value(best) else best
