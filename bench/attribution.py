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

With --composite N, also the composite's own A/A rate.  In an A/A tuning run every unit
"winner" is false and its flags change nothing, so the composite is the baseline again;
it is written only if the whole-program A/B calls it faster (the tune's measure settings)
AND the confirmation with fresh pairs does too (tuner._confirmed).  Each of the N trials
measures the baseline's identical binary that way, as if a composite had been formed
every time: an upper bound, since a real run forms one only when attribution erred.

    python bench/attribution.py --programs bzip2,lua5.4 --trials 20
    python bench/attribution.py --programs bzip2,lame --trials 0 --composite 20
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

from autopass_build.candidates.evaluate import Evaluator  # noqa: E402
from autopass_build.evidence.hotspots import load as load_profile  # noqa: E402
from autopass_build.measuring import attribution, sampling, stats  # noqa: E402

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


def run_program(name: str, work: Path, trials: int, pairs: int, units: int,
                composites: int) -> dict:
    store, config = tc.prepare(name, work, "cpu")
    evaluator = Evaluator(store, config)
    composite = composite_trials(evaluator, name, composites) if composites else None
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
            "composite": composite,
            "methods": {m: {"spread_pct": 100 * statistics.median(v["spreads"])
                            if v["spreads"] else math.nan,
                            "false_faster": v["faster"] / max(1, trials),
                            "false_slower": v["slower"] / max(1, trials)}
                        for m, v in rows.items()}}


def composite_trials(evaluator: Evaluator, name: str, trials: int) -> dict:
    """The composite's decision on a no-change candidate, `trials` times."""
    faster = confirmed = 0
    for t in range(trials):
        first = evaluator.evaluate({}, measure_identical=True).comparison
        called = bool(first and first.verdict == stats.FASTER)
        again = (evaluator.evaluate({}, measure_identical=True).comparison if called
                 else None)
        kept = bool(again and again.verdict == stats.FASTER)
        faster, confirmed = faster + called, confirmed + kept
        tc.log(f"{name}: composite A/A {t + 1}/{trials}: "
               f"{first.verdict if first else 'failed'}"
               + (f", confirmation {again.verdict if again else 'failed'}" if called else ""))
    return {"trials": trials, "called_faster": faster, "confirmed_faster": confirmed}


def table(results: list[dict]) -> str:
    lines = ["| program | method | run-to-run spread (median sd of log ratio) | A/A called "
             "faster | A/A called slower |", "|---|---|---|---|---|"]
    for r in results:
        for method, m in (r["methods"] if r["trials"] else {}).items():
            lines.append(f"| {r['program']} | {method} | {m['spread_pct']:.1f} % | "
                         f"{m['false_faster']:.0%} | {m['false_slower']:.0%} |")
    total = {m: sum(r["methods"][m]["false_faster"] * r["trials"] for r in results)
             / max(1, sum(r["trials"] for r in results)) for m in METHODS}
    lines.append("")
    lines.append("all programs, A/A called faster: "
                 + ", ".join(f"{m} {v:.1%}" for m, v in total.items()))
    composites = [(r["program"], r["composite"]) for r in results if r.get("composite")]
    for program, c in composites:
        lines.append(f"{program}: composite A/A called faster {c['called_faster']}/"
                     f"{c['trials']}, confirmed faster (would be written) "
                     f"{c['confirmed_faster']}/{c['trials']}")
    if composites:
        n = sum(c["trials"] for _, c in composites)
        kept = sum(c["confirmed_faster"] for _, c in composites)
        lines.append(f"all programs, composite A/A confirmed faster: {kept}/{n} "
                     f"({kept / n:.1%}; target <= 5 %)")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     epilog=__doc__.split("\n\n", 1)[1],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--programs", default="bzip2,lua5.4,libzstd,sqlite3")
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--pairs", type=int, default=8)
    parser.add_argument("--units", type=int, default=3, help="hottest units to rotate")
    parser.add_argument("--composite", type=int, default=0, metavar="N",
                        help="also N composite A/A trials per program")
    parser.add_argument("--out", default="attribution-out")
    args = parser.parse_args()
    started = time.monotonic()
    results = []
    with tempfile.TemporaryDirectory(prefix="autopass-attr-") as scratch:
        for name in args.programs.split(","):
            results.append(run_program(name, Path(scratch) / name, args.trials, args.pairs,
                                       args.units, args.composite))
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
