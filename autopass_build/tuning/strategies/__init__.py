"""Search strategies behind one ask/tell contract (see `base.py`).

| name     | what it does                                                     |
|----------|------------------------------------------------------------------|
| random   | valid points at random                                           |
| greedy   | coordinate descent, hottest unit's knobs first                   |
| ga       | genetic algorithm, repair of invalid offspring                   |
| de       | differential evolution (rand/1/bin)                              |
| pso      | particle swarm                                                   |
| agent    | analyst, planner, diagnoser over compiler evidence (`agents/`)   |

With `tune --attribute`, the learning strategies also judge each unit's block of knobs
by that unit's own attributed cost (`credit.py` says how, per strategy).

Options per strategy: `STRATEGIES[name].OPTIONS` (default, meaning, bounds);
`autopass tune --list-strategies` prints them.
"""

from __future__ import annotations

from autopass_build.tuning.strategies.agent import AgentStrategy
from autopass_build.tuning.strategies.base import (
    Option,
    OptionError,
    Point,
    Searchable,
    StartError,
    Strategy,
)
from autopass_build.tuning.strategies.de import DifferentialEvolution
from autopass_build.tuning.strategies.ga import Genetic
from autopass_build.tuning.strategies.greedy import Greedy
from autopass_build.tuning.strategies.pso import ParticleSwarm
from autopass_build.tuning.strategies.random_search import RandomSearch

__all__ = ["CLASSICAL", "STRATEGIES", "Option", "OptionError", "Point", "Searchable",
           "StartError", "Strategy", "describe_all", "make"]

STRATEGIES: dict[str, type[Strategy]] = {
    cls.name: cls for cls in (AgentStrategy, RandomSearch, Greedy, Genetic,
                              DifferentialEvolution, ParticleSwarm)
}


def make(name: str, space: Searchable, seed: int = 0, options: dict | None = None) -> Strategy:
    if name not in STRATEGIES:
        raise OptionError(f"no strategy {name!r}; choose one of {', '.join(STRATEGIES)}")
    return STRATEGIES[name](space, seed, options)


def describe_all() -> str:
    lines = []
    for name, cls in STRATEGIES.items():
        lines.append(f"{name}: {cls.summary}")
        for option, spec in cls.OPTIONS.items():
            lines.append(f"    {option} = {spec.default}  ({spec.doc}; "
                         f"{spec.low:g}..{spec.high:g})")
    return "\n".join(lines)


CLASSICAL = tuple(name for name in STRATEGIES if name != AgentStrategy.name)
