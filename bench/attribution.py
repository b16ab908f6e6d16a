#!/usr/bin/env python3
"""Attribution calibrated: how much an unchanged unit's attributed cost moves between
runs of one binary, per method, next to the whole program's; and how often an A/A (no
real change) is called "faster".

For each program (tune_classical.CASES, built at -O3 by its own build, recorded and
profiled), its hottest units take turns as the "changed" unit of an A/A trial: the
baseline binary against itself, `--pairs` interleaved perf runs of each side (what
`autopass tune --attribute` does per candidate).  Per trial:

    controlled   the unit's samples over the samples outside it, pair by pair
    absolute     the unit's samples per run
    program      all samples per run (the whole program's own A/A, same runs)

Output: per program and method, the run-to-run spread (standard deviation of the
per-pair log ratio, in percent) and the false-"faster" rate of the verdicts (the
interval of `stats.estimate` below 1), as a table and JSON.

    python bench/attribution.py --programs bzip2,lua5.4 --trials 20
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import tune_classical as tc  # noqa: E402

from autopass_build.instruments import attribution, sampling, stats  # noqa: E402
from autopass_build.instruments.evaluate import Evaluator  # noqa: E402
from autopass_build.instruments.hotspots import load as load_profile  # noqa: E402

METHODS = ("controlled", "absolute", "program")


def series(base: list[dict[str, float]], cand: list[dict[str, float]], unit: str,
           method: str) -> tuple[list[float], list[float]]:
    def value(run: dict[str, float]) -> float:
        if method == "program":
            return sum(run.values())
        if method == "absolute":
            return run.get(unit, 0.0)
        return run.get(unit, 0.0) / max(1.0, sum(v for u, v in run.items() if u != unit))
    return [value(r) for r in base], [value(r) for r in cand]


def trial(units_of, evaluator: Evaluator, unit: str, pairs: int) -> dict[str, dict]:
    base = evaluator.baseline()
    bench = evaluator.bench
    runs: dict[str, list[dict[str, float]]] = {"base": [], "cand": []}
    for i in range(pairs):
        for side in (("base", "cand") if i % 2 == 0 else ("cand", "base")):
            samples = sampling.perf_samples(bench.argv(base.binary), bench.cwd,
                                            bench.env(base.env), bench.run.timeout * 3,
                                            attribution.FREQUENCY)
            runs[side].append(attribution.by_unit(samples, units_of))
    result = {}
    for method in METHODS:
        b, c = series(runs["base"], runs["cand"], unit, method)
        usable = [(x, y) for x, y in zip(b, c) if x > 0 and y > 0]
        logs = [math.log(y / x) for x, y in usable]
        est = stats.estimate([x for x, _ in usable], [y for _, y in usable])
        result[method] = {"spread": statistics.stdev(logs) if len(logs) > 1 else None,
                          "faster": est.high < 1.0, "slower": est.low > 1.0,
                          "ratio": est.ratio}
    return result


def run_program(name: str, work: Path, trials: int, pairs: int, units: int) -> dict:
    store, config = tc.prepare(name, work, "cpu")
    evaluator = Evaluator(store, config)
    units_of = attribution.unit_mapper(evaluator.defined_functions())
    found = load_profile(store.dir)
    hot = [u for u in (found.unit_shares() if found else {})][:units]
    rows = {m: {"spreads": [], "faster": 0, "slower": 0} for m in METHODS}
    for t in range(trials):
        unit = hot[t % len(hot)]
        tc.log(f"{name}: A/A trial {t + 1}/{trials} on {unit}")
        for method, r in trial(units_of, evaluator, unit, pairs).items():
            if r["spread"] is not None:
                rows[method]["spreads"].append(r["spread"])
            rows[method]["faster"] += r["faster"]
            rows[method]["slower"] += r["slower"]
    return {"program": name, "units": hot, "trials": trials, "pairs": pairs,
            "methods": {m: {"spread_pct": 100 * statistics.median(v["spreads"]),
                            "false_faster": v["faster"] / trials,
                            "false_slower": v["slower"] / trials}
                        for m, v in rows.items()}}


def table(results: list[dict]) -> str:
    lines = ["| program | method | run-to-run spread (median sd of log ratio) | A/A called "
             "faster | A/A called slower |", "|---|---|---|---|---|"]
    for r in results:
        for method, m in r["methods"].items():
            lines.append(f"| {r['program']} | {method} | {m['spread_pct']:.1f} % | "
                         f"{m['false_faster']:.0%} | {m['false_slower']:.0%} |")
    total = {m: sum(r["methods"][m]["false_faster"] * r["trials"] for r in results)
             / max(1, sum(r["trials"] for r in results)) for m in METHODS}
    lines.append("")
    lines.append("all programs, A/A called faster: "
                 + ", ".join(f"{m} {v:.1%}" for m, v in total.items()))
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     epilog=__doc__.split("\n\n", 1)[1],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--programs", default="bzip2,lua5.4,libzstd,sqlite3")
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--pairs", type=int, default=8)
    parser.add_argument("--units", type=int, default=3, help="hottest units to rotate")
    parser.add_argument("--out", default="attribution-out")
    args = parser.parse_args()
    started = time.monotonic()
    results = []
    with tempfile.TemporaryDirectory(prefix="autopass-attr-") as scratch:
        for name in args.programs.split(","):
            results.append(run_program(name, Path(scratch) / name, args.trials, args.pairs,
                                       args.units))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    text = table(results)
    (out / "attribution.json").write_text(json.dumps(
        {"results": results, "minutes": round((time.monotonic() - started) / 60, 1)},
        indent=1))
    (out / "attribution.md").write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
