"""A tuning run's budget in time as well as evaluations, and how long it will likely take.

Users think in time: `autopass tune --time 45m` ([tune].time) lets a run take at most
that long (this invocation's wall time; a resumed run gets it anew), on top of or
instead of the evaluation budget.  The stages may take half of it, as they take half of
the evaluations; the search stops starting candidates when what is left would not hold
the steps after it (BOLT, the final re-measurement), and a step starts only when its
estimated cost fits.  An A/B that is still taking pairs when the time is up ends with
the pair it is on, once past its first look (tuning/measuring.CUT_AT_TIME), so a run ends
past its time by a build, a pair or a first look, and the final measurements of what
ships.  The pace of the evaluations so far says how long the rest will likely take,
from the first one on.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from autopass_build.core.durations import duration_text
from autopass_build.core.plural import counted as counted_text
from autopass_build.core.stage_flags import BOLT, LAYOUT

if TYPE_CHECKING:
    from autopass_build.tuning.settings import TuneRequest

UNCOUNTED = 100_000       # a budget this large is `tune --time` alone: the time decides
BOLT_EVALUATIONS = 2      # the BOLT step: a measurement and its confirmation
STEP_EVALUATIONS = 2      # another step on top after the search (CS-PGO): the same


@dataclass
class Pace:
    """How long this process's evaluations of one kind took, on average, so that the
    progress line can say about how long the rest will take (PCRE2 at budget 8: 15
    minutes with no word of it).  Compiles that cost no measurement (screened out,
    identical to the baseline) and confirmations are part of the pace: the user waits
    for them too."""
    started: float = field(default_factory=time.monotonic)
    measured: int = 0

    def each(self) -> float | None:
        """Seconds per evaluation so far (None before the first one ends)."""
        if self.measured == 0:
            return None
        return (time.monotonic() - self.started) / self.measured

    def time_left(self, evaluations_left: int) -> str:
        """"the rest about 12 min · ", or nothing before the first evaluation ends."""
        each = self.each()
        if each is None or evaluations_left <= 0:
            return ""
        return f"the rest about {duration_text(each * evaluations_left)} · "


CONFIRMED = 2      # evaluations a stage takes when it looks faster: the look, the confirmation


@dataclass
class KindPace:
    """Seconds per evaluation by kind (the stages': their LTO mode), so that the next
    step is judged by steps like it: on cppcheck a ThinLTO composition took 1.6 min and
    a full-LTO one 5, and their average let a full-LTO stage start with 3 minutes of the
    stages' time left; it took 8.5."""
    seconds: dict[str, float] = field(default_factory=dict)
    evaluations: dict[str, int] = field(default_factory=dict)

    def add(self, kind: str, seconds: float, evaluations: int) -> None:
        if evaluations > 0:
            self.seconds[kind] = self.seconds.get(kind, 0.0) + seconds
            self.evaluations[kind] = self.evaluations.get(kind, 0) + evaluations

    def each(self, kind: str) -> float | None:
        """Seconds per evaluation of `kind`; of all kinds when none of it ran yet; None
        before any."""
        if self.evaluations.get(kind):
            return self.seconds[kind] / self.evaluations[kind]
        total = sum(self.evaluations.values())
        return sum(self.seconds.values()) / total if total else None


class Deadline:
    """The end of a run's time budget (None: no time budget)."""

    def __init__(self, seconds: float | None):
        self.seconds = seconds
        self.end = time.monotonic() + seconds if seconds is not None else None

    def left(self) -> float | None:
        return None if self.end is None else self.end - time.monotonic()

    def share(self, fraction: float) -> "Deadline":
        """A deadline at `fraction` of the time left now (the stages' half)."""
        left = self.left()
        return Deadline(None if left is None else max(0.0, left * fraction))

    def holds(self, seconds: float | None) -> bool:
        """Whether `seconds` more fit before the end (always, without a time budget;
        True when nothing says how long a step takes)."""
        left = self.left()
        return left is None or (left > 0 and (seconds is None or seconds <= left))

    def text(self, of: str = "--time") -> str:
        """"5 min of --time left · " (`of`: whose time it is), or nothing without one."""
        left = self.left()
        return "" if left is None else f"{duration_text(max(0.0, left))} of {of} left · "


def stage_budget(request: TuneRequest) -> int:
    """Evaluations the stages may take: [tune].stage_budget, else half the budget."""
    given = request.stage_budget
    return min(given, request.budget) if given else max(1, request.budget // 2)


def search_budget(budget: int, spent: int, reserved: int) -> int:
    """The per-file search's share of a run's `budget`: what the stages have not
    `spent`, less what the steps after it keep (`reserved`); a budget of `--time` alone
    stays uncounted (the time decides, and progress shows no count out of 100,000)."""
    if budget >= UNCOUNTED:
        return UNCOUNTED
    return budget - spent - reserved


def step_evaluations(steps: Sequence[str]) -> int:
    """What the steps after the search (stage names) keep of the budget: each its own,
    and BOLT in place of layout where both are among them (it runs when BOLT is not
    kept on top of layout)."""
    instead = BOLT_EVALUATIONS if BOLT in steps and LAYOUT in steps else 0
    return instead + sum(_evaluations_of(step) for step in steps)


def _evaluations_of(step: str) -> int:
    return BOLT_EVALUATIONS if step == BOLT else STEP_EVALUATIONS


def split_text(request: TuneRequest, stage_budget: int, compositions: int,
               after: list[str]) -> str:
    """How the budget is split, said before anything is measured: `compositions` the
    stage compositions to measure, `after` the steps tried on top after the search
    (cspgo, layout, bolt)."""
    instead = BOLT in after and LAYOUT in after       # BOLT in place of layout, if it must
    reserved = step_evaluations(after)
    # each composition a look and a confirmation; when none is verified, a second look
    # at the closest and its confirmation (stage_choice.Composer._second_look)
    most = min(stage_budget, 2 * compositions + 1)
    rest = request.budget - most - reserved
    counted = request.budget < UNCOUNTED
    names = {"cspgo": "CS-PGO", "bolt": "BOLT"}
    return ((f"budget {request.budget} evaluations: " if counted else "budget: ")
            + (f"the stages up to {most} "
               f"({counted_text(compositions, 'composition')}, each confirmed when faster, "
               "the closest looked at again when none is; --stage-budget changes it)"
               if compositions else "no stages")
            + "".join(f", {names.get(step, step)} {_evaluations_of(step)}" for step in after)
            + (f", BOLT in place of layout {BOLT_EVALUATIONS} (if not kept on top of it)"
               if instead else "")
            + (f", per-file flags at least {max(0, rest)}" if counted else
               ", per-file flags the rest")
            + (f"; --time {duration_text(request.time_limit)}: the stages up to "
               "half of it" if request.time_limit else ""))
