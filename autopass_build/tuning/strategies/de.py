"""Differential evolution (DE/rand/1/bin) over the value indexes, rounded to the grid
and repaired; a trial replaces its target when it is at least as good.  With per-unit
credit (`credit.py`) selection is per unit block: the target takes the trial's block of
each unit that cost no more in the trial."""

from __future__ import annotations

from typing import Iterator

from autopass_build.tuning.strategies.base import WAIT, Option, Point, Strategy


class DifferentialEvolution(Strategy):
    name = "de"
    summary = "differential evolution (rand/1/bin) on the knob indexes"
    OPTIONS = {
        "population": Option(8, "vectors in the population", 4, 1000),
        "weight": Option(0.6, "differential weight F", 0.0, 2.0),
        "crossover": Option(0.7, "crossover probability CR", 0.0, 1.0),
    }

    def proposals(self) -> Iterator[Point]:
        size = self.options["population"]
        population = [self.space.default()] + [self.random_point() for _ in range(size - 1)]
        yield from population
        while True:
            # generational (each trial from the same population), so that a generation
            # is one batch: its trials are measured together, then selected
            trials = [self._trial(population, i) for i in range(len(population))]
            yield from trials
            yield WAIT
            for i, (target, trial) in enumerate(zip(list(population), trials)):
                merged = self.credit.merge(target, trial, ties_to_challenger=True)
                if merged is not None:
                    population[i] = self.space.repair(merged)
                elif self.value(trial) <= self.value(target):
                    population[i] = trial

    def _trial(self, population: list[Point], i: int) -> Point:
        others = [p for j, p in enumerate(population) if j != i]
        a, b, c = self.rng.sample(others, 3)
        forced = self.rng.randrange(len(a))
        trial = []
        for k, n in enumerate(self.space.dims):
            if k == forced or self.rng.random() < self.options["crossover"]:
                value = round(a[k] + self.options["weight"] * (b[k] - c[k]))
                trial.append(min(n - 1, max(0, value)))
            else:
                trial.append(population[i][k])
        return self.space.repair(tuple(trial))
