"""Statistics for A/B timing on a noisy machine.

Baseline and candidate run interleaved, so each pair (baseline_i, candidate_i) shares
the machine's state at that moment.  The quantity is the candidate/baseline ratio;
we work with the paired log-ratios d_i = log(candidate_i / baseline_i).

Method (named so it can be checked): the **median paired log-ratio**, with a
**percentile bootstrap** confidence interval (resampling pairs, fixed seed, so a
verdict is reproducible).  The median ignores the odd run disturbed by another
process; pairing cancels slow drifts of the machine.  Because the interval is looked
at several times as pairs accumulate, each look uses a Bonferroni-corrected level, so
that over the whole sequence the chance of calling an identical candidate "faster"
stays at most (1 - level) / 2.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

FASTER = "faster"
SLOWER = "slower"
SAME = "same"          # the interval is inside +-precision: no difference worth having
UNCLEAR = "unclear"    # ran out of pairs before the interval separated

BOOTSTRAP_SAMPLES = 2000


def median(values: list[float]) -> float:
    ordered = sorted(values)
    n = len(ordered)
    if n == 0:
        raise ValueError("median of no values")
    mid = n // 2
    return ordered[mid] if n % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def log_ratios(baseline: list[float], candidate: list[float]) -> list[float]:
    if len(baseline) != len(candidate):
        raise ValueError("baseline and candidate need the same number of runs")
    return [math.log(c / b) for b, c in zip(baseline, candidate) if b > 0 and c > 0]


def bootstrap_interval(diffs: list[float], level: float, seed: int = 0,
                       samples: int = BOOTSTRAP_SAMPLES) -> tuple[float, float]:
    """Percentile bootstrap interval of the median of `diffs`."""
    rng = random.Random(seed)
    n = len(diffs)
    medians = sorted(median([diffs[rng.randrange(n)] for _ in range(n)])
                     for _ in range(samples))
    tail = (1 - level) / 2
    low = medians[max(0, int(math.floor(tail * samples)))]
    high = medians[min(samples - 1, int(math.ceil((1 - tail) * samples)) - 1)]
    return low, high


@dataclass(frozen=True)
class Estimate:
    ratio: float        # candidate / baseline (below 1: the candidate is faster)
    low: float
    high: float
    pairs: int
    level: float

    @property
    def half_width(self) -> float:
        return (self.high - self.low) / 2

    def describe(self) -> str:
        return (f"{self.ratio:.4f}x [{self.low:.4f}, {self.high:.4f}] "
                f"({self.level:.1%} interval, {self.pairs} pairs)")


def estimate(baseline: list[float], candidate: list[float], level: float = 0.95,
             seed: int = 0) -> Estimate:
    diffs = log_ratios(baseline, candidate)
    if not diffs:
        raise ValueError("no usable pairs")
    low, high = bootstrap_interval(diffs, level, seed)
    return Estimate(math.exp(median(diffs)), math.exp(low), math.exp(high), len(diffs), level)


def verdict(est: Estimate, precision: float, final: bool) -> str | None:
    """FASTER / SLOWER when the interval excludes 1; SAME when it is narrower than
    +-precision around a ratio within precision of 1; UNCLEAR at the last look."""
    if est.high < 1.0:
        return FASTER
    if est.low > 1.0:
        return SLOWER
    if est.half_width < precision and abs(est.ratio - 1) < precision:
        return SAME
    return UNCLEAR if final else None


def look_schedule(min_pairs: int, max_pairs: int) -> list[int]:
    """Pair counts at which the interval is inspected: min, then doubling, then max."""
    looks = [min_pairs]
    while looks[-1] * 2 < max_pairs:
        looks.append(looks[-1] * 2)
    if looks[-1] != max_pairs:
        looks.append(max_pairs)
    return looks


def per_look_level(level: float, looks: int) -> float:
    """Bonferroni: spread the error of `level` over `looks` inspections."""
    return 1 - (1 - level) / looks
