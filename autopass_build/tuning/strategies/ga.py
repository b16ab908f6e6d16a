"""Genetic algorithm: tournament selection, uniform crossover, per-gene mutation,
repair to the nearest valid point, and the best individual kept (elitism).  With
per-unit credit (`credit.py`) crossover hands each unit's block down whole from the
parent in which that unit cost less."""

from __future__ import annotations

from typing import Iterator

from autopass_build.tuning.strategies.base import WAIT, Option, Point, Strategy


class Genetic(Strategy):
    name = "ga"
    summary = "genetic algorithm with repair of invalid offspring"
    OPTIONS = {
        "population": Option(8, "individuals per generation", 2, 1000),
        "crossover": Option(0.9, "probability that two parents cross over", 0.0, 1.0),
        "mutation": Option(0.0, "per-gene mutation probability (0: 1 / number of genes)",
                           0.0, 1.0),
        "tournament": Option(2, "individuals per selection tournament", 1, 100),
    }

    def proposals(self) -> Iterator[Point]:
        size = self.options["population"]
        population = [self.space.default()] + [self.random_point() for _ in range(size - 1)]
        while True:
            yield from population
            yield WAIT        # a generation is measured whole, then selected from
            ranked = sorted(population, key=lambda p: (self.value(p), p))
            children = [ranked[0]]
            while len(children) < size:
                child = self._crossover(self._select(population), self._select(population))
                children.append(self.space.repair(self._mutate(child)))
            population = children

    def _select(self, population: list[Point]) -> Point:
        contestants = [self.rng.choice(population) for _ in range(self.options["tournament"])]
        return min(contestants, key=lambda p: (self.value(p), p))

    def _crossover(self, a: Point, b: Point) -> Point:
        if self.rng.random() >= self.options["crossover"]:
            return a
        child = [x if self.rng.random() < 0.5 else y for x, y in zip(a, b)]
        for label, coordinates in self.credit.blocks if self.credit.told else ():
            cost_a, cost_b = self.credit.cost(a, label), self.credit.cost(b, label)
            if cost_a is not None and cost_b is not None and cost_a != cost_b:
                better = a if cost_a < cost_b else b
                for c in coordinates:
                    child[c] = better[c]
        return tuple(child)

    def _mutate(self, point: Point) -> Point:
        rate = self.options["mutation"] or 1.0 / len(point)
        return tuple(self.rng.randrange(n) if self.rng.random() < rate else v
                     for v, n in zip(point, self.space.dims))
