"""Per-unit credit in the classical strategies (search/credit.py).

A simulated program of four units, each a quarter of the run, each with its own best
flags.  The whole-program A/B is told as the tuner tells it: a ratio only when it is
decisive, and no single unit's gain is big enough to be (that is the case attribution
exists for).  Attribution tells each changed unit's own cost.  With that credit every
learning strategy must find clearly better programs than the same strategy on the
whole-program values alone, and random search must be untouched by it.
"""

from __future__ import annotations

import math
import random
import statistics

import pytest

from autopass_build.core.outcome import Outcome
from autopass_build.measuring.attribution import CONTROLLED, UnitEffect
from autopass_build.measuring.stats import FASTER, SAME, SLOWER, UNCLEAR
from autopass_build.tuning import strategies as search
from autopass_build.tuning.journal import Entry, Phase
from autopass_build.tuning.space import JointSpace, Knob, Space
from autopass_build.tuning.strategies.credit import UnitCredit

UNITS = ("a.c", "b.c", "c.c", "d.c")
SHARE = 1 / len(UNITS)
WHOLE_DECISIVE = 0.05     # above one unit's best gain (0.25 x 0.14): per-unit effects hide
UNIT_DECISIVE = 0.02


def _knob(name: str, count: int) -> Knob:
    return Knob(name, ((),) + tuple((f"-f{name}{i}",) for i in range(1, count)), name)


SPACE = JointSpace([(unit, Space((_knob("x", 4), _knob("y", 4), _knob("z", 3))))
                    for unit in UNITS])
BEST = {unit: tuple(random.Random(unit).randrange(1, n) for n in (4, 4, 3))
        for unit in UNITS}


def unit_cost(unit: str, block: tuple[int, ...]) -> float:
    """0.95 per knob on its best value, 1.04 per knob on another non-default value."""
    return math.prod(1.0 if v == 0 else 0.95 if v == best else 1.04
                     for v, best in zip(block, BEST[unit]))


def whole_cost(point: tuple[int, ...]) -> float:
    return sum(SHARE * unit_cost(unit, block) for unit, _, block in SPACE.split(point))


def measured(point: tuple[int, ...], n: int, attributed: bool) -> tuple[float, Entry]:
    whole = whole_cost(point)
    decisive = abs(whole - 1) > WHOLE_DECISIVE
    effects = []
    for unit, _, block in SPACE.split(point):
        if attributed and any(block):
            cost = unit_cost(unit, block)
            verdict = (SAME if abs(cost - 1) <= UNIT_DECISIVE
                       else FASTER if cost < 1 else SLOWER)
            effects.append(UnitEffect(unit, cost, cost * 0.99, cost * 1.01, 8, 25.0,
                                      verdict, CONTROLLED))
    entry = Entry(n, Phase.SEARCH, f"c{n}", {}, Outcome.OK,
                  (FASTER if whole < 1 else SLOWER) if decisive else UNCLEAR,
                  whole, whole * 0.97, whole * 1.03, 10, effects=tuple(effects))
    return (whole if decisive else 1.0), entry


def tune(name: str, seed: int, attributed: bool, budget: int = 40) -> list[tuple[int, ...]]:
    strategy = search.make(name, SPACE, seed)
    asked = []
    while len(asked) < budget and (point := strategy.ask()) is not None:
        asked.append(point)
        strategy.tell(point, *measured(point, len(asked), attributed))
    return asked


@pytest.mark.parametrize("name", ["greedy", "ga", "de", "pso"])
def test_credit_finds_what_the_whole_program_cannot_see(name: str) -> None:
    def best_found(attributed: bool) -> float:
        return statistics.mean(min(whole_cost(p) for p in tune(name, seed, attributed))
                               for seed in range(5))

    with_credit, without = best_found(True), best_found(False)
    # Without credit a learning strategy is blind here; with it, it composes units' gains.
    assert with_credit < without - 0.02, (name, with_credit, without)


def test_random_search_is_untouched_by_credit() -> None:
    assert tune("random", 3, True) == tune("random", 3, False)


@pytest.mark.parametrize("name", search.CLASSICAL)
def test_same_seed_same_sequence_with_credit(name: str) -> None:
    assert tune(name, 5, True, budget=25) == tune(name, 5, True, budget=25)


def test_a_unit_cost_is_the_mean_of_its_decisive_measurements() -> None:
    credit = UnitCredit([(unit, SPACE.block_coordinates(unit)) for unit in UNITS])
    point = tuple([1, 0, 0] + [0] * 9)
    assert credit.cost(point, "a.c") is None and not credit.told
    assert credit.cost(SPACE.default(), "a.c") == 1.0       # as recorded, by definition

    def told(ratio: float, verdict: str) -> None:
        credit.record(point, [UnitEffect("a.c", ratio, ratio, ratio, 8, 25.0, verdict,
                                         CONTROLLED)])

    told(0.81, FASTER)
    told(0.97, UNCLEAR)                     # not decisive: counts as 1.0, not as 0.97
    assert credit.cost(point, "a.c") == pytest.approx(math.sqrt(0.81))
    told(1.3, SLOWER)
    assert credit.cost(point, "a.c") == pytest.approx((0.81 * 1.3) ** (1 / 3))   # now above 1
    other = tuple([0, 0, 0, 1] + [0] * 8)
    assert credit.merge(point, other, ties_to_challenger=False) is None   # b.c unmeasured
    credit.record(other, [UnitEffect("b.c", 0.9, 0.88, 0.92, 8, 25.0, FASTER, CONTROLLED)])
    # b.c is cheaper in `other`, a.c is cheaper (1.0) as recorded in `other` than in `point`
    assert credit.merge(point, other, ties_to_challenger=False) == other
    assert credit.merge(other, point, ties_to_challenger=False) == other
