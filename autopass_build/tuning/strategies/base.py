"""The one contract every strategy keeps: ask for a point, tell its value, repeat.

    strategy = make("ga", space, seed=7, options={"population": 12})
    while (point := strategy.ask()) is not None:
        strategy.tell(point, objective(point))     # lower is better; None = it failed

A point is a tuple of value indexes (see `space.py`); the space gives `dims`,
`default()`, `valid()`, `repair()` and `sample(rng)`.  The default point (the build as
recorded) is known to be worth 1.0 (the tuner measures candidate/baseline ratios), so
no strategy spends an evaluation on it.  Strategies are written as generators that
yield points and read what was told from `self.seen`; the base class never hands out
a point twice (a configuration is measured once) and never an invalid one.  Same
space, seed, options and told values give the same sequence of points: that is what
makes `autopass tune --resume` exact.

Batches (a cluster measures several candidates at once): `ask_batch(k)` hands out up to
k points before any of them is told.  A generator yields `WAIT` where what it proposes
next depends on values told since its last `WAIT` (the end of a generation, of a
greedy coordinate, of a plan), so a batch stops there.  Asked one at a time the points
are told before the next ask, and WAIT is passed over: the sequence of points is the
same whatever the batch size, which keeps a run on a cluster of any size, resumed on
another, the run it would have been.
"""

from __future__ import annotations

import difflib
import math
import random
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterator, Protocol

from autopass_build.core.errors import AutopassError
from autopass_build.tuning.space import JointSpace, Point
from autopass_build.tuning.strategies.credit import UnitCredit

if TYPE_CHECKING:   # types only: strategies stay importable without a run
    from autopass_build.tuning.journal import Entry
    from autopass_build.tuning.run import RunContext

MAX_SKIPS = 5000     # consecutive already-seen proposals before a strategy counts as done
WAIT: Point = ()     # yielded by a generator: the next points need what was told so far


class Searchable(Protocol):
    dims: list[int]

    def default(self) -> Point: ...
    def valid(self, point: Point) -> bool: ...
    def repair(self, point: Point) -> Point: ...
    def sample(self, rng: random.Random) -> Point: ...


class OptionError(AutopassError, ValueError):
    pass


class StartError(AutopassError):
    """The strategy cannot run here (say, its LLM endpoint is not configured)."""


@dataclass(frozen=True)
class Option:
    default: float | int
    doc: str
    low: float
    high: float

    def check(self, name: str, value: object, strategy: str) -> float | int:
        kind = type(self.default)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or (
                kind is int and not float(value).is_integer()):
            raise OptionError(f"{strategy} option {name}: expected {kind.__name__}, "
                              f"got {value!r}")
        if not self.low <= value <= self.high:
            raise OptionError(f"{strategy} option {name} = {value}: must be between "
                              f"{self.low:g} and {self.high:g}")
        return kind(value)


class Strategy:
    name = "strategy"
    summary = ""
    OPTIONS: dict[str, Option] = {}

    def __init__(self, space: Searchable, seed: int = 0, options: dict | None = None):
        self.space = space
        self.seed = seed
        self.rng = random.Random(seed)
        self.options = self.resolve_options(options or {})
        self.seen: dict[Point, float] = {space.default(): 1.0}
        self.credit = UnitCredit(_unit_blocks(space))   # per-unit costs (tune --attribute)
        self._proposals = self.proposals()
        self._pending: set[Point] = set()     # handed out by ask_batch, not told yet

    @classmethod
    def resolve_options(cls, given: dict) -> dict:
        unknown = [k for k in given if k not in cls.OPTIONS]
        if unknown:
            close = difflib.get_close_matches(unknown[0], list(cls.OPTIONS), n=1)
            known = ", ".join(cls.OPTIONS) or "none"
            raise OptionError(f"{cls.name} has no option {unknown[0]!r}"
                              + (f"; did you mean {close[0]!r}?" if close else "")
                              + f" (options: {known})")
        return {name: opt.check(name, given[name], cls.name) if name in given else opt.default
                for name, opt in cls.OPTIONS.items()}

    # -- the contract ------------------------------------------------------------------
    def ask(self) -> Point | None:
        """The next point to measure, or None when the strategy has nothing new."""
        batch = self.ask_batch(1)
        return batch[0] if batch else None

    def ask_batch(self, most: int) -> list[Point]:
        """Up to `most` new points that need no value told before them (see WAIT); an
        empty list when the strategy has nothing new."""
        batch: list[Point] = []
        for _ in range(MAX_SKIPS):
            if len(batch) >= most:
                break
            try:
                point = tuple(next(self._proposals))
            except StopIteration:
                break
            if point == WAIT:
                if batch:
                    break
                continue       # told already: asked one by one, or a batch just began
            if not self.space.valid(point):
                raise AssertionError(f"{self.name} proposed the invalid point {point}")
            if point not in self.seen and point not in self._pending \
                    and point not in batch:
                batch.append(point)
        self._pending.update(batch)
        return batch

    def start(self, run: "RunContext") -> None:
        """Called once by the tuner before the first `ask`, with what the run knows
        (evidence, profile, journal folder); raises StartError when the strategy cannot
        run.  The classical strategies need nothing from it."""

    def tell(self, point: Point, value: float | None, info: "Entry | None" = None) -> None:
        """`value` is the candidate/baseline ratio (lower is better); None: it failed.
        `info` (the journal entry: outcome, verdict, detail) is for strategies that read
        it; its per-unit effects, when attribution measured them, go to `self.credit`."""
        self.seen[tuple(point)] = math.inf if value is None else float(value)
        self._pending.discard(tuple(point))
        if info is not None and info.effects:
            self.credit.record(tuple(point), info.effects)

    # -- for subclasses ----------------------------------------------------------------
    def proposals(self) -> Iterator[Point]:
        raise NotImplementedError

    def value(self, point: Point) -> float:
        """What was told about `point` (inf when it failed or was never told)."""
        return self.seen.get(tuple(point), math.inf)

    def best(self) -> tuple[Point, float]:
        return min(self.seen.items(), key=lambda kv: (kv[1], kv[0]))

    def random_point(self) -> Point:
        return self.space.sample(self.rng)


def _unit_blocks(space: Searchable) -> list[tuple[str, range]]:
    """Each unit's label and coordinates; none for a space that is not one per unit."""
    if not isinstance(space, JointSpace):
        return []
    return [(label, space.block_coordinates(label)) for label, _ in space.blocks]
