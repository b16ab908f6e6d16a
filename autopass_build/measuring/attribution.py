"""Attribution: how much each changed unit's own cost moved, not only the program's.

A change that makes one unit x faster moves the whole program by about x times the
unit's share, which this host's noise hides (a 3 % whole-program difference needs ~80
pairs).  So after an A/B, baseline and candidate run again, interleaved, under
`perf record -e cpu-clock` (software sampling: no hardware counters needed), and each
function's samples are summed by the unit that defines it (`unit_of`).

    per run:  samples of unit u, and of the control (every sample outside the units
              the candidate changed: other units, libraries, the kernel)
    per pair: d = log(cand_u / cand_control) - log(base_u / base_control)

The control is measured in the same run, so a machine that is slower during a run
slows both and cancels ("controlled").  When the changed units hold nearly all samples
there is no control to speak of, and the unit's own samples per run are compared
("absolute").  Each unit's ratio and interval come from the same Hodges-Lehmann /
Wilcoxon method as the whole-program A/B (stats.py).  Where the metric is instructions,
each side runs once under callgrind instead and a unit's ratio is its exact instruction
count, candidate over baseline ("exact"): nothing to sample, nothing to control.
Attribution is a search signal, not a verdict: bench/attribution.py measures its spread
and its A/A false-"faster" rate, and the whole-program A/B still decides what is
written.
"""

from __future__ import annotations

import math
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass

from autopass_build.measuring import stats
from autopass_build.measuring.benchmark import DETERMINISTIC_METRICS, Benchmark
from autopass_build.measuring.binaries import debugless_copy
from autopass_build.measuring.sampling import (
    Samples,
    SamplingError,
    callgrind_counts,
    perf_report,
    split_source,
    with_source,
)

FREQUENCY = 4999                 # samples per second of CPU time
MIN_CONTROL_SHARE = 0.10         # below this the controlled method has nothing to lean on
CONTROLLED, ABSOLUTE, EXACT = "controlled", "absolute", "exact"
SUFFIXES = (".cold", ".part.", ".constprop.", ".isra.", ".llvm.", ".lto_priv.")


AttributionError = SamplingError     # attribution cannot run: perf missing or failing


@dataclass(frozen=True)
class UnitEffect:
    """A unit's own cost in the candidate against the baseline (below 1: faster)."""
    source: str
    ratio: float
    low: float
    high: float
    pairs: int
    share: float          # the unit's share of the baseline's samples, in percent
    verdict: str          # stats.FASTER / SLOWER / SAME / UNCLEAR
    method: str           # CONTROLLED or ABSOLUTE

    def text(self) -> str:
        return (f"{self.source}: {self.ratio:.3f}x [{self.low:.3f}, {self.high:.3f}] "
                f"{self.verdict} ({self.share:.0f}% of the samples, {self.method})")


def unit_mapper(defined: dict[str, list[str]]) -> Callable[[str, str], list[str]]:
    """symbol -> the units defining it; compiler clones ('f.cold', 'f.llvm.123') count
    for the function they were cut from, a static function told apart by its source
    ('flow (reverb.c)', sampling.with_source) for the units of that source, and a weak
    function told apart by its binary ('mix (libthird.so)') as `defined` keys it: by the
    key, or by the object perf saw it run in (`objects`: a program that exports its copy
    makes a library run it, so only one object may show it)."""
    def named(symbol: str) -> list[str]:
        if symbol in defined:
            return defined[symbol]
        for suffix in SUFFIXES:
            if suffix in symbol:
                return defined.get(symbol.split(suffix, 1)[0], [])
        return []

    def units(key: str, obj: str = "") -> list[str]:
        for kept in (key, with_source(key, obj) if obj else ""):
            if kept in defined and split_source(kept)[1]:   # the copy one binary keeps
                return defined[kept]
        symbol, source = split_source(key)
        owners = named(symbol)
        return [u for u in owners if os.path.basename(u) == source] or owners
    return units


def by_unit(samples: Samples, units_of: Callable[[str, str], list[str]],
            objects: dict[str, str] | None = None) -> dict[str, float]:
    """Samples per unit (a symbol several units define is split between them); the
    samples in no unit (libraries, the kernel) under ""."""
    result: dict[str, float] = {}
    for symbol, count in samples.items():
        owners = units_of(symbol, (objects or {}).get(symbol, "")) or [""]
        for owner in owners:
            result[owner] = result.get(owner, 0.0) + count / len(owners)
    return result


def effects(base_runs: list[dict[str, float]], cand_runs: list[dict[str, float]],
            changed: list[str], precision: float, level: float = 0.95) -> list[UnitEffect]:
    """Each changed unit's effect from paired runs (per-unit samples of each run)."""
    pairs = list(zip(base_runs, cand_runs))
    base_total = sum(sum(b.values()) for b, _ in pairs) or 1.0
    control_share = sum(_control(b, changed) for b, _ in pairs) / base_total
    method = CONTROLLED if control_share >= MIN_CONTROL_SHARE else ABSOLUTE
    found = []
    for source in changed:
        share = 100.0 * sum(b.get(source, 0.0) for b, _ in pairs) / base_total
        base, cand = [], []
        for b, c in pairs:
            if method == CONTROLLED:
                base.append(b.get(source, 0.0) / max(_control(b, changed), 1.0))
                cand.append(c.get(source, 0.0) / max(_control(c, changed), 1.0))
            else:
                base.append(b.get(source, 0.0))
                cand.append(c.get(source, 0.0))
        usable = [(x, y) for x, y in zip(base, cand) if x > 0 and y > 0]
        if len(usable) < 2:
            continue                      # too few samples in this unit to say anything
        est = stats.estimate([x for x, _ in usable], [y for _, y in usable], level)
        decided = stats.verdict(est, precision, final=True) or stats.UNCLEAR
        found.append(UnitEffect(source, est.ratio, _finite(est.low), _finite(est.high),
                                est.pairs, round(share, 2), decided, method))
    return found


def exact_effects(base: dict[str, float], cand: dict[str, float], changed: list[str],
                  precision: float, floor: float = stats.DETERMINISTIC_FLOOR
                  ) -> list[UnitEffect]:
    """Each changed unit's effect from one deterministic count per side: the ratio is
    known to within what moves a count without a change of code (`floor`: the default,
    or more where the program's count moves with its layout), so that is its interval,
    as a whole program's count has."""
    total = sum(base.values()) or 1.0
    found = []
    for source in changed:
        before, after = base.get(source, 0.0), cand.get(source, 0.0)
        if before <= 0 or after <= 0:
            continue
        ratio = after / before
        low, high = (ratio * math.exp(side * floor) for side in (-1, 1))
        decided = stats.verdict(stats.Estimate(ratio, low, high, 1, 1.0), precision,
                                final=True) or stats.UNCLEAR
        found.append(UnitEffect(source, ratio, low, high, 1,
                                round(100.0 * before / total, 2), decided, EXACT))
    return found


def _control(run: dict[str, float], changed: list[str]) -> float:
    return sum(v for unit, v in run.items() if unit not in changed)


def _finite(value: float) -> float:
    return value if math.isfinite(value) else (0.0 if value < 0 else 1e9)


@dataclass(frozen=True)
class ProfiledSide:
    """One binary of the comparison, with the functions its own objects define (a
    candidate's flags can keep functions out of line that the baseline inlined)."""
    binary: str
    env: dict[str, str]
    defined: dict[str, list[str]]


class Attributor:
    """Runs the attribution of one candidate against the baseline (Evaluator.evaluate's
    `attribute`): `pairs` interleaved perf runs of each, or one callgrind run of each
    where the metric is instructions (the baseline's counted once)."""

    def __init__(self, bench: Benchmark, pairs: int = 8):
        self.bench = bench
        self.pairs = pairs
        self._counted: dict[tuple, dict[str, float]] = {}    # the baseline's, by binary

    def __call__(self, base: ProfiledSide, cand: ProfiledSide, changed: list[str],
                 floor: float = stats.DETERMINISTIC_FLOOR) -> list[UnitEffect]:
        """`floor`: what a count is trusted to (Evaluator.count_floor)."""
        if self.bench.measure.metric in DETERMINISTIC_METRICS:
            return exact_effects(self._counts(base, memo=True), self._counts(cand),
                                 changed, self.bench.measure.precision, floor)
        return self._sampled(base, cand, changed)

    def _counts(self, side: ProfiledSide, memo: bool = False) -> dict[str, float]:
        """Instructions per unit in one callgrind run of `side`."""
        stat = os.stat(side.binary)
        key = (side.binary, stat.st_size, stat.st_mtime_ns, tuple(sorted(side.env.items())))
        if memo and key in self._counted:
            return self._counted[key]
        bench = self.bench
        with tempfile.TemporaryDirectory(prefix="autopass-attribute-") as scratch:
            argv = bench.argv(debugless_copy(side.binary, scratch))
            counts = callgrind_counts(argv, bench.cwd, bench.env(side.env),
                                      bench.run.timeout * 60, bench.stdin)
        units = by_unit(counts, unit_mapper(side.defined))
        if memo:
            self._counted[key] = units
        return units

    def _sampled(self, base: ProfiledSide, cand: ProfiledSide, changed: list[str]
                 ) -> list[UnitEffect]:
        bench = self.bench
        runs: dict[str, list[dict[str, float]]] = {"base": [], "cand": []}
        sides = {"base": base, "cand": cand}
        mappers = {name: unit_mapper(side.defined) for name, side in sides.items()}
        for i in range(self.pairs):
            for name in (("base", "cand") if i % 2 == 0 else ("cand", "base")):
                side = sides[name]
                read = perf_report(bench.argv(side.binary), bench.cwd,
                                   bench.env(side.env), bench.run.timeout * 3, FREQUENCY,
                                   bench.stdin)
                runs[name].append(by_unit(read.samples, mappers[name], read.objects))
        return effects(runs["base"], runs["cand"], changed, bench.measure.precision)
