"""Statistics for A/B timing on a noisy machine.

Baseline and candidate run interleaved, so each pair (baseline_i, candidate_i) shares
the machine's state at that moment.  The quantity is the candidate/baseline ratio;
we work with the paired log-ratios d_i = log(candidate_i / baseline_i).

Method (named so it can be checked): the **Hodges-Lehmann estimate** of the paired
log-ratio (the median of the Walsh averages (d_i + d_j) / 2), with the **exact
Wilcoxon signed-rank confidence interval**.  It needs no normality, only that the
paired differences be symmetric around their centre -- which holds exactly when the
candidate equals the baseline, the case where a false "faster" matters.  Measured in
tests/test_stats.py's simulations: a percentile bootstrap of the median undercovered
(6 % false "faster" at n <= 40), the sign-test interval was safe but missed 15 % of
clear 10 % gains; this method is safe and finds them.  Pairing cancels slow drifts of
the machine.  Because the interval is looked at several times as pairs accumulate,
each look uses a Bonferroni-corrected level, so over the whole sequence the chance of
calling an identical candidate "faster" stays at most (1 - level) / 2.  Too few pairs
for the level give an unbounded interval: no verdict yet.

The interval assumes independent pairs; on this VM they are not quite: over a pool of
12,000 A/A pairs (bench/measure_calibration.py --pool) consecutive log-ratios correlated
at 0.07 and means of 10-60 pairs varied 1.2x as much as independent ones would, and the
sequential rule called 3.2 % of A/As "faster" and 3.2 % "slower" where 2.5 % each is
promised.  So the interval is widened around its centre by sqrt((1 + r) / (1 - r)), the
AR(1) variance inflation, with r the comparison's own lag-1 autocorrelation (0 to 0.5,
from 8 pairs on): on the same pool 2.0 % and 1.8 %, at the cost of 30.5 % -> 27.8 %
power against a 3 % loss at 30 pairs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum
from statistics import NormalDist


class Verdict(str, Enum):
    """What an A/B says of a candidate; a string in the journal and in messages."""
    FASTER = "faster"
    SLOWER = "slower"
    SAME = "same"          # the interval is inside +-precision: no difference worth having
    UNCLEAR = "unclear"    # ran out of pairs before the interval separated

    def __str__(self) -> str:
        return self.value


FASTER, SLOWER, SAME, UNCLEAR = Verdict.FASTER, Verdict.SLOWER, Verdict.SAME, Verdict.UNCLEAR
# Callgrind's count of a real program moves by tens of instructions in hundreds of
# millions between runs of one binary (probably its environment and auxiliary vector):
# log ratios within one part per million of each other are taken as agreeing.
DETERMINISTIC_SPREAD = 1e-6
# What moves a count without a change of code: the same program built in two folders runs
# 0.02 % more or fewer instructions (the binary's path, in the auxiliary vector and the
# strings the C library reads; seen on the test suite's cluster nodes), so a ratio is
# known to within that only, however well its repeats agree.  Held to 0.05 % each side:
# a stage whose count moved by 0.003 % was called "faster" and chosen before.
DETERMINISTIC_FLOOR = 5e-4


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


def walsh_averages(diffs: list[float]) -> list[float]:
    return sorted((diffs[i] + diffs[j]) / 2 for i in range(len(diffs))
                  for j in range(i, len(diffs)))


def signed_rank_critical(n: int, alpha: float) -> int:
    """Largest c with P(T <= c) <= alpha / 2 for the Wilcoxon signed-rank statistic T
    of n pairs under the null (exact, by counting subsets of ranks); -1 if none."""
    total = n * (n + 1) // 2
    counts = [1] + [0] * total
    for rank in range(1, n + 1):
        for s in range(total, rank - 1, -1):
            counts[s] += counts[s - rank]
    cumulative, critical = 0, -1
    for c in range(total + 1):
        cumulative += counts[c]
        if cumulative / 2 ** n > alpha / 2:
            break
        critical = c
    return critical


def fewest_pairs(level: float) -> int:
    """The fewest pairs that give a bounded signed-rank interval at `level` (6 at 95 %)."""
    n = 1
    while signed_rank_critical(n, 1 - level) < 0:
        n += 1
    return n


def hodges_lehmann_interval(diffs: list[float], level: float) -> tuple[float, float, float]:
    """(estimate, low, high) of the centre of `diffs`; unbounded if n is too small."""
    walsh = walsh_averages(diffs)
    centre = median(walsh)
    c = signed_rank_critical(len(diffs), 1 - level)
    if c < 0:
        return centre, -math.inf, math.inf
    return centre, walsh[c], walsh[len(walsh) - 1 - c]


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

    @property
    def bounded(self) -> bool:
        """False when the pairs are too few for any interval at this level (it reads
        [0, inf]: 5 pairs at 95 %, say)."""
        return self.low > 0 and math.isfinite(self.high)

    def too_few(self) -> str:
        return (f"no {self.level:.1%} interval from {self.pairs} pairs "
                f"(it needs {fewest_pairs(self.level)})")

    def interval_text(self, low: float, high: float) -> str:
        """"95.0% interval [low, high], N pairs" (of the ratio or of the speedup), or
        why there is none."""
        if not self.bounded:
            return self.too_few()
        return f"{self.level:.1%} interval [{low:.4f}, {high:.4f}], {self.pairs} pairs"

    def describe(self) -> str:
        if not self.bounded:
            return f"{self.ratio:.4f}x, {self.too_few()}"
        return (f"{self.ratio:.4f}x [{self.low:.4f}, {self.high:.4f}] "
                f"({self.level:.1%} interval, {self.pairs} pairs)")

    def speedup(self) -> tuple[float, float, float]:
        """(speedup, low, high): baseline / candidate, the inverse of the ratio; an
        interval open at 0 (too few pairs to bound it) stays open, at infinity."""
        return _inverse(self.ratio), _inverse(self.high), _inverse(self.low)

    def describe_speedup(self) -> str:
        speedup, low, high = self.speedup()
        return f"speedup {speedup:.4f}x, {self.interval_text(low, high)}"


def _inverse(value: float) -> float:
    return math.inf if value <= 0 else 1 / value


def repeats_agree(baseline: list[float], candidate: list[float]) -> bool:
    """Whether a deterministic metric's pairs repeat: more pairs would tell no more."""
    diffs = log_ratios(baseline, candidate)
    return len(diffs) >= 2 and max(diffs) - min(diffs) <= DETERMINISTIC_SPREAD


def estimate(baseline: list[float], candidate: list[float], level: float = 0.95,
             deterministic: bool = False, floor: float = DETERMINISTIC_FLOOR) -> Estimate:
    """`deterministic`: the metric repeats (callgrind's instruction count); when the
    repeats agree within DETERMINISTIC_SPREAD, the ratio is known to within that spread,
    whatever the number of pairs, and no closer than `floor` (a log ratio: at least
    DETERMINISTIC_FLOOR, more for a program whose count moves with its layout alone,
    candidates/layout_spread.py)."""
    diffs = log_ratios(baseline, candidate)
    if not diffs:
        raise ValueError("no usable pairs")
    if deterministic and repeats_agree(baseline, candidate):
        centre = median(diffs)
        low = min(min(diffs), centre - floor)
        high = max(max(diffs), centre + floor)
    else:
        centre, low, high = _widened(diffs, *hodges_lehmann_interval(diffs, level))
    return Estimate(math.exp(centre), math.exp(low), math.exp(high), len(diffs), level)


AUTOCORRELATION_FROM = 8      # pairs before the lag-1 autocorrelation is estimated
AUTOCORRELATION_CAP = 0.5     # a larger estimate from few pairs is mostly chance


def lag1_autocorrelation(values: list[float]) -> float:
    """The lag-1 autocorrelation of `values` in pair order (0 when they are constant)."""
    mean = sum(values) / len(values)
    spread = sum((v - mean) ** 2 for v in values)
    if spread == 0:
        return 0.0
    return sum((values[i] - mean) * (values[i + 1] - mean)
               for i in range(len(values) - 1)) / spread


def _widened(diffs: list[float], centre: float, low: float, high: float
             ) -> tuple[float, float, float]:
    """The interval widened for pairs that correlate with their neighbours (see the
    module's docstring); an unbounded one stays as it is."""
    if len(diffs) < AUTOCORRELATION_FROM or not (math.isfinite(low) and math.isfinite(high)):
        return centre, low, high
    r = min(AUTOCORRELATION_CAP, max(0.0, lag1_autocorrelation(diffs)))
    factor = math.sqrt((1 + r) / (1 - r))
    return centre, centre - (centre - low) * factor, centre + (high - centre) * factor


def verdict(est: Estimate, precision: float, final: bool) -> Verdict | None:
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


def useful_looks(looks: list[int], level: float, pairs_per_value: int = 1) -> list[int]:
    """Drop looks with too few pairs to ever bound the interval at the corrected level:
    they cannot decide anything, and each one spent widens every other look.  A duet
    judges each `pairs_per_value` pairs as one value (duet.swapped_pairs_merged)."""
    kept = list(looks)
    while len(kept) > 1:
        alpha = 1 - per_look_level(level, len(kept))
        if signed_rank_critical(kept[0] // pairs_per_value, alpha) >= 0:
            break
        kept.pop(0)
    return kept


def gains_more(first: tuple[float, float, float], second: tuple[float, float, float],
               level: float = 0.95) -> bool:
    """Whether `first` gains clearly more than `second`: two A/Bs of their own, each a
    (ratio, low, high) of a candidate over the same baseline build (below 1: faster).
    The difference of their log-ratios against the spread each interval implies, read
    as a normal one at `level` (the intervals a sequential A/B reports are at a
    stricter level, so the spread is overstated and the rule is conservative): True
    only when it is beyond `level`'s z, so two equal gains are told apart this way at
    most (1 - level) / 2 of the time."""
    z = NormalDist().inv_cdf((1 + level) / 2)
    (a, a_low, a_high), (b, b_low, b_high) = first, second
    if min(a, a_low, a_high, b, b_low, b_high) <= 0 or not all(
            math.isfinite(v) for v in (a_low, a_high, b_low, b_high)):
        return False
    spread = math.hypot(math.log(a_high / a_low), math.log(b_high / b_low)) / (2 * z)
    difference = math.log(b) - math.log(a)          # above 0: `first` is the faster
    return difference > 0 and (spread == 0 or difference / spread > z)


def per_look_level(level: float, looks: int) -> float:
    """Bonferroni: spread the error of `level` over `looks` inspections."""
    return 1 - (1 - level) / looks


class Sequential:
    """The verdict rule of one A/B, looked at as pairs accumulate: at the pair counts of
    `look_schedule` (those that can bound an interval at all), each look at the
    Bonferroni-corrected level, until FASTER, SLOWER or SAME, or UNCLEAR at the last.
    The A/B (measure.compare) and its calibration (bench/measure_calibration.py) both
    judge with this, so what is calibrated is what runs."""

    def __init__(self, min_pairs: int, max_pairs: int, precision: float,
                 level: float = 0.95, deterministic: bool = False, pairs_per_value: int = 1,
                 floor: float = DETERMINISTIC_FLOOR):
        self.max_pairs, self.precision, self.deterministic = max_pairs, precision, deterministic
        self.floor = floor
        looks = look_schedule(min_pairs, max_pairs)
        self.looks = looks if deterministic else useful_looks(looks, level, pairs_per_value)
        self.look_level = per_look_level(level, len(self.looks))

    def judge(self, baseline: list[float], candidate: list[float], pairs: int | None = None,
              out_of_time: bool = False) -> tuple[Estimate | None, Verdict | None]:
        """After the latest pair: (the estimate, when this is a look; the verdict, when
        this look decides).  `pairs` is how many pairs ran when the values given are
        fewer (a duet merges each two swapped pairs into one value).  `out_of_time` (the
        run's --time is up): the A/B ends here, past the first look; a verdict other
        than UNCLEAR only at a look of the schedule, which is what the calibration
        covers (an extra look would be one more chance of a false FASTER)."""
        n = len(baseline) if pairs is None else pairs
        if n not in self.looks:
            if not out_of_time or n < self.looks[0]:
                return None, None
            return self._estimate(baseline, candidate), UNCLEAR
        est = self._estimate(baseline, candidate)
        # counts that repeat are known as well as they will be: a look later is this one
        settled = self.deterministic and repeats_agree(baseline, candidate)
        return est, verdict(est, self.precision,
                            final=n >= self.max_pairs or settled or out_of_time)

    def _estimate(self, baseline: list[float], candidate: list[float]) -> Estimate:
        return estimate(baseline, candidate, self.look_level, deterministic=self.deterministic,
                        floor=self.floor)
