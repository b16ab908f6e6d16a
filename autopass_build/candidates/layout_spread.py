"""How far a program's instruction count moves with its layout alone: the A/A that
calibrates a deterministic metric before it judges any candidate.

Callgrind's count of one binary repeats exactly, but a program that hashes an address
(a map keyed by pointers iterates in address order; a seed taken from a function's
address) does other work when the same code sits elsewhere.  A candidate's count then
differs from the baseline's by its code's effect *and* by where its code landed, and a
verdict that trusts the count to 0.05 % (stats.DETERMINISTIC_FLOOR) calls layout
"faster".  So, once a run, the baseline is counted twice and, where the two agree,
linked again with its input sections in four orders (lld's --shuffle-sections:
reversed, and three seeded shuffles; the same objects, so the same code), each order
counted:

    counts of the four orders ──▶ range R (largest log ratio apart)
    floor = MARGIN x R, or DETERMINISTIC_FLOOR where R is within it

MARGIN = 2: four draws of a layout effect spread evenly over a width W are 3/5 W apart
on average ((k-1)/(k+1) of W for k draws), and a candidate's layout may differ from the
baseline's by all of W.  The orders are all shuffled ones (ORDERS says why).
Where the reversed order and the first shuffle count the same to the instruction,
nothing moves the count and the other two are not
linked: the default floor stays, at the cost of two relinks and two counted runs (the
baseline's two counts are the first A/B's own).  A reordering that happens to count
alike on a program whose count does move is unlikely to do so to the instruction.

A program whose count moves from one run of the same binary to the next (Lua mixes
time(NULL) into its hash seed) is not calibrated: its pairs disagree, and the A/B
already judges them by their spread, as times are.  Where lld cannot link the program,
or a reordered program writes other output (it depends on its layout: nothing to
calibrate), the floor stays the default and the note says why.
"""

from __future__ import annotations

import math
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from autopass_build.candidates.candidate import Candidate
from autopass_build.candidates.replay import Replayer
from autopass_build.core import toolchain
from autopass_build.core.flags import UnitFlags
from autopass_build.core.outcome import EvaluationError, Outcome
from autopass_build.measuring import stats
from autopass_build.measuring.benchmark import Benchmark, run_once
from autopass_build.measuring.measure import baseline_reference
from autopass_build.measuring.output_check import Reference, check_output

MARGIN = 2.0
# lld's -1: reversed, then shuffles by a seed.  Not the unshuffled order: on
# tests/data/cpp-features (a C++ program and its shared library, 30 M instructions,
# most of them start-up) every shuffled order counted within 150 instructions of the
# others and the unshuffled one 2.9 % fewer: what shuffling changes beyond the order
# (not a candidate's) is not the layout a candidate moves.  Nor the recorded linker's:
# its program's start-up differs from lld's by a few hundred instructions.
ORDERS = (-1, 1, 2, 3)
SECTIONS = (".text*", ".rodata*", ".data*", ".bss*")   # never .init_array: its order runs


@dataclass(frozen=True)
class LayoutSpread:
    baseline: tuple[float, ...]   # the baseline's count, and again (the first A/B's)
    counts: tuple[float, ...]     # each reordered link's
    floor: float                  # the least log ratio a count is trusted to
    note: str = ""                # why nothing was calibrated ("" when it was)

    @property
    def repeats(self) -> bool:
        """Whether the baseline counted the same twice (a deterministic count)."""
        return _apart(self.baseline) <= stats.DETERMINISTIC_SPREAD

    @property
    def range(self) -> float:
        """The largest log ratio between two of the counts."""
        return _apart(self.counts)

    def moved(self) -> bool:
        return self.floor > stats.DETERMINISTIC_FLOOR

    def text(self) -> str:
        if not self.repeats:
            return (f"layout A/A: not needed: the baseline's own count moved "
                    f"{_apart(self.baseline):.2%} "
                    "from one run to the next (a seed from the time or the addresses), so "
                    "counts are judged by their spread over the pairs, as times are")
        if self.note:
            return f"layout A/A: not measured ({self.note})"
        seen = f"the baseline linked in {len(self.counts)} orders of its code and data"
        if not self.moved():
            return f"layout A/A: {seen} counts the same instructions"
        return (f"layout A/A: {seen} counts up to {self.range:.2%} apart (the program's "
                f"work depends on where its code and data sit): a count must move more "
                f"than {math.expm1(self.floor):.2%} to be called faster or slower")


def shuffled(lld: str, seed: int) -> tuple[str, ...]:
    """Link flags that place the same input sections in another order (`lld`: its path)."""
    return (f"--ld-path={lld}",) + tuple(f"-Wl,--shuffle-sections={glob}={seed}"
                                         for glob in SECTIONS)


def measure(replayer: Replayer, target: str, unit_flags: UnitFlags,
            link_flags: tuple[str, ...], bench: Benchmark, baseline: Candidate,
            progress: Callable[[str], None] | None = None) -> LayoutSpread:
    """The spread of `baseline`'s count over its reordered links (see the docstring);
    none where the baseline's own count does not repeat (the pairs' spread covers it)."""
    count = _CountedRun(bench, baseline_reference(bench, baseline.binary, baseline.env,
                                                  None)[0])
    base_count, problem = count(baseline)
    repeat, _ = count(baseline) if base_count is not None else (None, "")
    if base_count is None or repeat is None:
        return LayoutSpread((), (), stats.DETERMINISTIC_FLOOR,
                            problem or "a counted run failed")
    counted = (base_count, repeat)
    if _apart(counted) > stats.DETERMINISTIC_SPREAD:
        return LayoutSpread(counted, (), stats.DETERMINISTIC_FLOOR)
    lld = toolchain.find_tool("ld.lld")
    if lld is None:
        return LayoutSpread(counted, (), stats.DETERMINISTIC_FLOOR, "no ld.lld found: "
                            "install lld-19 (`autopass setup` does), or set AUTOPASS_LLD")
    counts: list[float] = []
    for seed in ORDERS:
        if progress:
            progress(f"layout A/A: linking the baseline by lld in order {len(counts) + 1} "
                     f"of {len(ORDERS)}")
        value, problem = _count_linked(replayer, target, unit_flags,
                                       link_flags + shuffled(lld, seed), baseline, count)
        if value is None or problem:
            return LayoutSpread(counted, tuple(counts), stats.DETERMINISTIC_FLOOR, problem)
        counts.append(value)
        if len(counts) == 2 and _apart(counts) <= stats.DETERMINISTIC_SPREAD:
            break           # two orders, the same count to the instruction: nothing moves it
    return LayoutSpread(counted, tuple(counts), floor_of(_apart(counts)))


def _apart(counts: Sequence[float]) -> float:
    """The largest log ratio between two of `counts` (0 for fewer than two)."""
    return math.log(max(counts) / min(counts)) if len(counts) > 1 else 0.0


def _count_linked(replayer: Replayer, target: str, unit_flags: UnitFlags,
                  link_flags: tuple[str, ...], baseline: Candidate, count: _CountedRun
                  ) -> tuple[float | None, str]:
    """The count of the baseline's objects linked with `link_flags`; (None, why) when
    lld cannot link them or the program then runs otherwise."""
    try:
        built = replayer.build(target, unit_flags, link_flags)
    except EvaluationError as error:
        return None, f"lld could not link it in another order: {str(error)[:160]}"
    try:
        value, problem = count(built)
    finally:
        if built.folder != baseline.folder:
            shutil.rmtree(built.folder, ignore_errors=True)
    if value is None or problem:
        return None, "in another order the program " + (problem or "did not run")
    return value, ""


class _CountedRun:
    """One counted run of a build: (its instructions, or None; what is wrong with its
    output against `reference`, or why it did not run)."""

    def __init__(self, bench: Benchmark, reference: Reference):
        self.bench, self.reference = bench, reference

    def __call__(self, built: Candidate) -> tuple[float | None, str]:
        done = run_once(self.bench, built.binary, built.env, self.bench.run.timeout * 100,
                        metric="instructions")
        if done.outcome != Outcome.OK or done.value is None:
            return None, f"a counted run failed: {done.outcome} {done.detail[:120]}"
        return done.value, check_output(self.bench, self.reference, done)


def floor_of(seen: float) -> float:
    """The floor for counts seen `seen` (a log ratio) apart: a range within the default
    floor is what any two builds of one program may move anyway, nothing to widen."""
    return stats.DETERMINISTIC_FLOOR if seen <= stats.DETERMINISTIC_FLOOR else MARGIN * seen
