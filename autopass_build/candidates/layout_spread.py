"""How far a program's instruction count moves with its layout alone: the A/A that
calibrates a deterministic metric before it judges any candidate.

Callgrind's count of one binary repeats exactly, but a program that hashes an address
(Lua seeds its string hashes with `&lua_newstate`; a C++ map keyed by pointers iterates
in address order) does other work when the same code sits elsewhere.  A candidate's
count then differs from the baseline's by its code's effect *and* by where its code
landed, and a verdict that trusts the count to 0.05 % (stats.DETERMINISTIC_FLOOR)
calls layout "faster".  So, once a run, the baseline is linked again with its input
sections in three other orders (lld's --shuffle-sections: reversed, and two seeded
shuffles; the same objects, so the same code) and each order is counted:

    counts of the baseline and its three reorderings ──▶ range R (largest log ratio apart)
    floor = MARGIN x R, or DETERMINISTIC_FLOOR where R is within it

MARGIN = 2: four draws of a layout effect spread evenly over a width W are 3/5 W apart
on average ((k-1)/(k+1) of W for k draws), and a candidate's layout may differ from the
baseline's by all of W.  Measured on Lua (bench/layout_spread.py: PGO + LTO in nine
orders, counts 2.1 % apart on four levels): a floor set from four of the nine covers
98 % of the layout-only pairs on average, 69 % at worst; from three, with the same
margin, 94 % and 19 % (three draws on one level see no spread at all).  A program whose
count does not move keeps the default floor, at the cost of three relinks and four
counted runs (one is the first A/B's own).  Where lld cannot link the program, or a
reordered program writes other output (it depends on its layout: nothing to
calibrate), the floor stays the default and the note says why.
"""

from __future__ import annotations

import math
import shutil
from collections.abc import Callable
from dataclasses import dataclass

from autopass_build.candidates.candidate import Candidate
from autopass_build.candidates.replay import Replayer
from autopass_build.core import toolchain
from autopass_build.core.flags import UnitFlags
from autopass_build.core.outcome import EvaluationError, Outcome
from autopass_build.measuring import stats
from autopass_build.measuring.benchmark import Benchmark, run_once
from autopass_build.measuring.output_check import Reference, check_output

MARGIN = 2.0
SEEDS = (-1, 1, 2)           # lld: -1 reverses the order, another number shuffles by it
SECTIONS = (".text*", ".rodata*", ".data*", ".bss*")   # never .init_array: its order runs


@dataclass(frozen=True)
class LayoutSpread:
    counts: tuple[float, ...]     # the baseline's count, then each reordered link's
    floor: float                  # the least log ratio a count is trusted to
    note: str = ""                # why nothing was calibrated ("" when it was)

    @property
    def range(self) -> float:
        """The largest log ratio between two of the counts."""
        if len(self.counts) < 2:
            return 0.0
        return math.log(max(self.counts) / min(self.counts))

    def moved(self) -> bool:
        return self.floor > stats.DETERMINISTIC_FLOOR

    def text(self) -> str:
        if self.note:
            return f"layout A/A: not measured ({self.note})"
        seen = f"the baseline linked in {len(self.counts) - 1} other code and data orders"
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
    """The spread of `baseline`'s count over its reordered links (see the docstring)."""
    def count(built: Candidate) -> tuple[float | None, str]:
        done = run_once(bench, built.binary, built.env, bench.run.timeout * 100,
                        metric="instructions")
        if done.outcome != Outcome.OK or done.value is None:
            return None, f"a counted run failed: {done.outcome} {done.detail[:120]}"
        return done.value, check_output(bench, reference, done)

    first = run_once(bench, baseline.binary, baseline.env, bench.run.timeout, metric="wall")
    reference = Reference(first.status, first.stdout, first.stderr, first.files,
                          first.stdout_cut)
    base_count, problem = count(baseline)
    if base_count is None:
        return LayoutSpread((), stats.DETERMINISTIC_FLOOR, problem)
    lld = toolchain.find_tool("ld.lld")
    if lld is None:
        return LayoutSpread((base_count,), stats.DETERMINISTIC_FLOOR, "no ld.lld found: "
                            "install lld-19 (`autopass setup` does), or set AUTOPASS_LLD")
    counts = [base_count]
    for seed in SEEDS:
        if progress:
            progress(f"layout A/A: linking the baseline in another order ({len(counts)} of "
                     f"{len(SEEDS)})")
        try:
            built = replayer.build(target, unit_flags, link_flags + shuffled(lld, seed))
        except EvaluationError as error:
            return LayoutSpread(tuple(counts), stats.DETERMINISTIC_FLOOR,
                                f"lld could not link it in another order: {str(error)[:160]}")
        try:
            value, problem = count(built)
        finally:
            if built.folder != baseline.folder:
                shutil.rmtree(built.folder, ignore_errors=True)
        if value is None or problem:
            return LayoutSpread(tuple(counts), stats.DETERMINISTIC_FLOOR,
                                "in another order the program " + (problem or "did not run"))
        counts.append(value)
    return LayoutSpread(tuple(counts), floor_of(LayoutSpread(tuple(counts), 0.0).range))


def floor_of(seen: float) -> float:
    """The floor for counts seen `seen` (a log ratio) apart: a range within the default
    floor is what any two builds move (the linker's own start-up work: lld's program
    and the recorded linker's differ by a few hundred instructions), nothing to widen."""
    return stats.DETERMINISTIC_FLOOR if seen <= stats.DETERMINISTIC_FLOOR else MARGIN * seen
