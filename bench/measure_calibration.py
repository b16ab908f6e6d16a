#!/usr/bin/env python3
"""Does `autopass try`'s measurement tell a real 3 % loss from noise, and never call an
identical binary faster?  Measured on Lua 5.4 from Debian sources, replayed by autopass,
running bench/workloads/lua_mix.lua (~0.2 s).

  (a) A/A: the baseline against a byte-identical copy, --trials times: the share
      wrongly called FASTER must be <= 5 %.
  (b) power: against a candidate made ~3 % slower by construction (a calibrated busy
      loop run before the same binary), --trials times: the share called SLOWER must
      be >= 90 %.  Its true slowdown is measured separately and printed.
  (c) cost: benchmark runs per verdict.

Usage: python bench/measure_calibration.py [--trials 30] [--metric wall] [--slowdown 0.03]
                                          [--max-pairs 30] [--only aa|power]
                                          [--fixed-pairs N] [--duet]

With --duet, every trial is measured both ways, side by side in one run: pairs one at a
time (ABBA), and as a duet ([measure].duet: both programs at once, a CPU each).

With --pool PAIRS (issue 64): PAIRS A/A pairs measured once, the way every A/B takes
them (ABBA order, on the CPU it pins), kept in pool.json, then cut into disjoint runs of
pairs, each judged by the A/B's own rule (stats.Sequential): as a search candidate is
(min_pairs to max_pairs, its looks and precision), as a final re-measurement is (twice
the pairs, half the precision), and at each single pair count those use, one look each.
A 95 % two-sided interval promises at most 2.5 % false "faster" and 2.5 % false "slower";
each rate is given with its own 95 % (Wilson) interval over the comparisons it has.
Power: the same pool with the candidate's values made --slowdown slower (the real noise,
a known effect), judged at max_pairs; the real slow candidate's trials (b) beside it.
--reanalyse POOL_JSON judges a kept pool again without running anything.
"""

from __future__ import annotations

import argparse
import collections
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))
import debian_sources  # noqa: E402

from autopass_build import config as cfg  # noqa: E402
from autopass_build.candidates.replay import Replayer  # noqa: E402
from autopass_build.capture.build_env import record_environment  # noqa: E402
from autopass_build.measuring import stats  # noqa: E402
from autopass_build.measuring.benchmark import Benchmark, run_once  # noqa: E402
from autopass_build.measuring.measure import compare  # noqa: E402
from autopass_build.store.index import Store  # noqa: E402

SPINNER = ("#include <stdlib.h>\nint main(int c, char **v) { volatile unsigned long i = 0; "
           "unsigned long n = strtoul(v[1], 0, 10); while (i < n) i++; return 0; }\n")


def build_lua(work: Path) -> tuple[str, Path]:
    program = debian_sources.LUA
    tree = debian_sources.fresh_copy(program.package, work / "lua")
    store_dir = tree / ".autopass"
    subprocess.run(list(program.build), cwd=tree / program.build_dir, check=True,
                   capture_output=True, env=record_environment(str(store_dir), str(tree)))
    replayer = Replayer(Store.open_existing(str(store_dir)))
    return replayer.build(str(tree / "src" / "lua"), {}).binary, tree


def slow_candidate(work: Path, baseline: str, bench: Benchmark, slowdown: float) -> str:
    """A wrapper script that burns a calibrated busy loop, then execs the baseline with
    the same arguments: `slowdown` x the baseline's time in all, start-up included."""
    spinner = work / "spin"
    (work / "spin.c").write_text(SPINNER)
    subprocess.run(["clang-19", "-O1", str(work / "spin.c"), "-o", str(spinner)], check=True)
    wrapper = work / "slow-lua"

    def write(iterations: int) -> None:
        wrapper.write_text(f'#!/bin/sh\n"{spinner}" {iterations}\nexec "{baseline}" "$@"\n')
        wrapper.chmod(0o755)

    write(0)
    base, empty = [], []
    for _ in range(15):  # interleaved: the wrapper's own start-up cost, measured
        base.append(run_once(bench, baseline, {}, 60).value)
        empty.append(run_once(bench, str(wrapper), {}, 60).value)
    base_time = statistics.median(base)
    startup = max(0.0, statistics.median(empty) - base_time)
    probe_n = 50_000_000
    start = time.perf_counter()
    subprocess.run([str(spinner), str(probe_n)], check=True)
    per_iteration = (time.perf_counter() - start) / probe_n
    write(max(0, int((slowdown * base_time - startup) / per_iteration)))
    return str(wrapper)


def true_ratio(bench: Benchmark, base: str, cand: str, pairs: int = 40) -> float:
    b, c = [], []
    for i in range(pairs):
        order = (base, cand) if i % 2 == 0 else (cand, base)
        values = {exe: run_once(bench, exe, {}, 60).value for exe in order}
        b.append(values[base])
        c.append(values[cand])
    return stats.estimate(b, c).ratio


def trials(benches: dict[str, Benchmark], base: str, cand: str, n: int, label: str
           ) -> dict[str, list]:
    """`n` verdicts of `cand` against `base` by each way of measuring in `benches`, the
    ways taking turns (each trial once each, the first way alternating)."""
    results: dict[str, list] = {mode: [] for mode in benches}
    for i in range(n):
        modes = list(benches) if i % 2 == 0 else list(reversed(benches))
        for mode in modes:
            result = compare(benches[mode], base, {}, cand, {})
            results[mode].append(result)
            print(f"  {label} trial {i + 1}/{n} ({mode}): {result.verdict} "
                  f"({result.estimate.describe() if result.estimate else result.outcome}), "
                  f"{result.runs} runs", file=sys.stderr)
    return results


def summary(results: list) -> tuple[collections.Counter, float]:
    return (collections.Counter(r.verdict for r in results),
            statistics.mean(r.runs for r in results) if results else 0.0)


def median_half_width(results: list) -> float:
    widths = [r.estimate.half_width / r.estimate.ratio for r in results if r.estimate]
    return statistics.median(widths) if widths else float("nan")


def collect_pool(bench: Benchmark, base: str, copy: str, pairs: int) -> dict:
    """`pairs` A/A pairs as measure.compare takes them: ABBA, pinned as it pins."""
    from autopass_build.measuring.duet import Side
    from autopass_build.measuring.measure import _pair, measured_cpu

    cpu = measured_cpu(bench, base, {}, None)
    sides = (Side(base, {}, 60.0), Side(copy, {}, 60.0))
    for side in sides:                   # warm-up, as compare's
        run_once(bench, side.exe, {}, 60.0, cpu=cpu)
    baseline, candidate, started = [], [], time.monotonic()
    for n in range(pairs):
        value, run, _ = _pair(bench, sides, None, cpu, None, n)
        baseline.append(value)
        candidate.append(run.value)
        if (n + 1) % 500 == 0:
            left = (time.monotonic() - started) / (n + 1) * (pairs - n - 1)
            print(f"  pool: {n + 1}/{pairs} pairs, about {left / 60:.0f} min left",
                  file=sys.stderr)
    return {"baseline": baseline, "candidate": candidate, "cpu": cpu,
            "metric": bench.measure.metric}


def wilson(hits: int, n: int) -> tuple[float, float]:
    """The 95 % Wilson interval of a rate of `hits` in `n`."""
    if n == 0:
        return (0.0, 1.0)
    z, p = 1.96, hits / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * ((p * (1 - p) / n + z * z / (4 * n * n)) ** 0.5) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def judged(baseline: list[float], candidate: list[float], rule: stats.Sequential,
           chunk: int) -> collections.Counter:
    """The verdicts of `rule` on disjoint runs of `chunk` pairs of the pool."""
    found: collections.Counter = collections.Counter()
    for start in range(0, len(baseline) - chunk + 1, chunk):
        b, c = baseline[start:start + chunk], candidate[start:start + chunk]
        verdict = None
        for n in range(1, chunk + 1):
            _, verdict = rule.judge(b[:n], c[:n])
            if verdict:
                break
        found[verdict or stats.UNCLEAR] += 1
    return found


def analyse(pool: dict, min_pairs: int, max_pairs: int, precision: float,
            slowdown: float) -> list[dict]:
    """Each way the A/B judges, on the pool: its false FASTER and SLOWER rates."""
    base, cand = pool["baseline"], pool["candidate"]
    ways = [("search candidate", stats.Sequential(min_pairs, max_pairs, precision),
             max_pairs),
            ("final re-measurement", stats.Sequential(min_pairs, 2 * max_pairs,
                                                      precision / 2), 2 * max_pairs)]
    singles = sorted({n for _, rule, _ in ways for n in rule.looks} | {min_pairs})
    for n in singles:
        for _, rule, _ in ways[:1]:
            ways.append((f"one look at {n} pairs ({rule.look_level:.2%})",
                         stats.Sequential(n, n, 1e-9, level=1 - (1 - rule.look_level)), n))
        ways.append((f"one look at {n} pairs (95 %)", stats.Sequential(n, n, 1e-9), n))
    rows = []
    for label, rule, chunk in ways:
        found = judged(base, cand, rule, chunk)
        total = sum(found.values())
        rows.append({"way": label, "pairs": chunk, "comparisons": total,
                     "faster": found[stats.FASTER], "slower": found[stats.SLOWER],
                     "faster_ci": wilson(found[stats.FASTER], total),
                     "slower_ci": wilson(found[stats.SLOWER], total)})
    slower = [c * (1 + slowdown) for c in cand]
    found = judged(base, slower, stats.Sequential(min_pairs, max_pairs, precision), max_pairs)
    total = sum(found.values())
    rows.append({"way": f"power: {slowdown:.0%} slower, search candidate ({max_pairs} pairs "
                        "at most)", "pairs": max_pairs, "comparisons": total,
                 "slower": found[stats.SLOWER], "slower_ci": wilson(found[stats.SLOWER], total),
                 "faster": found[stats.FASTER], "faster_ci": wilson(found[stats.FASTER], total)})
    return rows


def pool_report(rows: list[dict]) -> str:
    lines = []
    for r in rows:
        total = r["comparisons"] or 1
        lines.append(f"  {r['way']:<44} {r['comparisons']:>4} comparisons: "
                     f"FASTER {r['faster']} ({r['faster'] / total:.1%} "
                     f"[{r['faster_ci'][0]:.1%}, {r['faster_ci'][1]:.1%}]), "
                     f"SLOWER {r['slower']} ({r['slower'] / total:.1%} "
                     f"[{r['slower_ci'][0]:.1%}, {r['slower_ci'][1]:.1%}])")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=30)
    parser.add_argument("--metric", default="wall", choices=cfg.METRICS)
    parser.add_argument("--slowdown", type=float, default=0.03)
    parser.add_argument("--only", choices=("aa", "power"), help="run one half")
    parser.add_argument("--max-pairs", type=int, default=30,
                        help="[measure].max_pairs for every verdict (default 30)")
    parser.add_argument("--fixed-pairs", type=int, default=0, metavar="N",
                        help="every verdict on N pairs (min_pairs = max_pairs = N, no "
                             "early stop), so that interval widths compare the noise")
    parser.add_argument("--duet", action="store_true",
                        help="measure each trial twice, side by side: pairs one at a time "
                             "and as a duet ([measure].duet: both at once, a CPU each)")
    parser.add_argument("--pool", type=int, default=0, metavar="PAIRS",
                        help="calibrate the verdict rule on PAIRS A/A pairs (see above)")
    parser.add_argument("--lua-size", type=int, default=0,
                        help="lua_mix.lua's size argument (default: its own, ~0.2 s)")
    parser.add_argument("--reanalyse", type=Path, metavar="POOL_JSON")
    parser.add_argument("--out", type=Path, default=Path("calibration-out"))
    args = parser.parse_args()
    defaults = cfg.MeasureConfig()
    if args.reanalyse:
        pool = json.loads(args.reanalyse.read_text())
        print(pool_report(analyse(pool, defaults.min_pairs, args.max_pairs,
                                  defaults.precision, args.slowdown)))
        return 0
    work = Path(tempfile.mkdtemp(prefix="autopass-calibration-"))
    baseline, tree = build_lua(work)
    # The copy sits at a path of the same length, as replayed candidates do: argv and
    # environment size shift the stack and change run time by themselves (Mytkowicz et
    # al., ASPLOS 2009); an A/A with a shorter path measured 3/30 false FASTER here.
    base_folder = Path(baseline).parent
    copy = base_folder.parent / ("f" * len(base_folder.name)) / Path(baseline).name
    copy.parent.mkdir()
    shutil.copy2(baseline, copy)
    size = f', "{args.lua_size}"' if args.lua_size else ""
    config = cfg.parse(f"""
[run]
command = ["{{exe}}", "{HERE / 'workloads' / 'lua_mix.lua'}"{size}]
timeout = 60
[measure]
metric = "{args.metric}"
max_pairs = {args.fixed_pairs or args.max_pairs}
""" + (f"min_pairs = {args.fixed_pairs}\nprecision = 0.000001\n" if args.fixed_pairs else ""),
        project_dir=str(work))
    bench = Benchmark.from_config(config)
    benches = {"one at a time": bench}
    if args.duet:
        benches["duet"] = Benchmark.from_config(
            cfg.with_overrides(config, measure={"duet": True}))
    if args.pool:
        print(f"Lua 5.4 + lua_mix.lua, metric {args.metric}: {args.pool} A/A pairs",
              file=sys.stderr)
        pool = collect_pool(bench, baseline, str(copy), args.pool)
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "pool.json").write_text(json.dumps(pool))
        rows = analyse(pool, config.measure.min_pairs, args.max_pairs,
                       config.measure.precision, args.slowdown)
        (args.out / "calibration.json").write_text(json.dumps(rows, indent=1))
        print(f"metric {args.metric}; median run "
              f"{statistics.median(pool['baseline']):.3f}; pool of {args.pool} pairs\n"
              + pool_report(rows))
        if args.only == "aa":
            shutil.rmtree(work, ignore_errors=True)
            return 0
    slow = slow_candidate(work, baseline, bench, args.slowdown)
    measured_slowdown = true_ratio(bench, baseline, slow) if args.only != "aa" else float("nan")
    print(f"Lua 5.4 + lua_mix.lua, metric {args.metric}, {args.trials} trials each; "
          f"measure settings: min_pairs {config.measure.min_pairs}, max_pairs "
          f"{config.measure.max_pairs}, precision {config.measure.precision}", file=sys.stderr)
    a_a_by = trials(benches, baseline, str(copy), args.trials, "A/A") \
        if args.only != "power" else {}
    power_by = trials(benches, baseline, slow, args.trials, "power") \
        if args.only != "aa" else {}
    print(f"\nmetric: {args.metric}; {args.trials} trials each"
          + (f"; the slow candidate measured at {measured_slowdown:.4f}x over 40 paired runs"
             if power_by else ""))
    for mode in benches:
        if len(benches) > 1:
            print(f"\n{mode}:")
        _report(a_a_by.get(mode, []), power_by.get(mode, []), args)
    shutil.rmtree(work, ignore_errors=True)
    return 0


def _report(a_a: list, power: list, args) -> None:
    (aa_counts, aa_cost), (pw_counts, pw_cost) = summary(a_a), summary(power)
    if a_a:
        print(f"(a) A/A:   wrongly FASTER {aa_counts[stats.FASTER]}/{args.trials} "
              f"({aa_counts[stats.FASTER] / args.trials:.1%}, target <= 5 %); "
              f"verdicts {dict(aa_counts)}; median interval half-width "
              f"{median_half_width(a_a):.2%}")
    if power:
        print(f"(b) power: SLOWER {pw_counts[stats.SLOWER]}/{args.trials} "
              f"({pw_counts[stats.SLOWER] / args.trials:.1%}, target >= 90 %); "
              f"verdicts {dict(pw_counts)}; median interval half-width "
              f"{median_half_width(power):.2%}")
    print("(c) cost:  runs per verdict (warm-up and the correctness run included): "
          + ", ".join(f"{label} {cost:.1f}" for label, cost, done in
                      (("A/A", aa_cost, a_a), ("power", pw_cost, power)) if done)
          + f"; max_pairs {args.fixed_pairs or args.max_pairs}")


if __name__ == "__main__":
    sys.exit(main())
