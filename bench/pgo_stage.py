#!/usr/bin/env python3
"""PGO as a stage, on real programs from Debian sources built at -O3 by their own build
systems: -O3, PGO alone, tuned without PGO, tuned on PGO -- each an A/B against -O3,
and tuned-on-PGO also against PGO alone, all in one run.

The tuned variants use the rules agent at the same budget; each is re-verified by an
independent A/B (fresh runs) of the replayed build.  Target (issue 10): tuned on PGO
ahead of PGO alone on the geomean.

Usage: python bench/pgo_stage.py [--budget 12] [--programs bzip2,lua5.4] [--metric cpu]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import tune_classical as tc  # noqa: E402

from autopass_build import pgo  # noqa: E402
from autopass_build.evaluate import Evaluator  # noqa: E402
from autopass_build.tuner import TuneRequest, Tuner  # noqa: E402


def ab(evaluator: Evaluator, flags: dict, base: dict) -> tuple[float, float, float, str]:
    """Speedup of `flags` over `base` (both per-unit flag maps), with its interval."""
    evaluator.base_flags = {}
    evaluator._baseline = None
    evaluator._baseline_memo = []
    if base:   # the baseline is the `base` build: measure flags on top of nothing else
        evaluator.base_flags = base
        flags = {uid: tuple(f for f in fl if f not in base.get(uid, ())) for uid, fl in flags.items()}
    measure = replace(evaluator.bench.measure, min_pairs=10, max_pairs=30, precision=0.005)
    result = evaluator.evaluate(flags, measure=measure)
    est = result.comparison.estimate if result.comparison else None
    if est is None:
        return 1.0, 1.0, 1.0, str(result.outcome)
    return 1 / est.ratio, 1 / est.high, 1 / est.low, result.comparison.verdict or "unclear"


def run_program(name: str, work: Path, budget: int, metric: str) -> list[dict]:
    store, config = tc.prepare(name, work, metric)
    evaluator = Evaluator(store, config)
    tc.log(f"{name}: training PGO")
    profile = pgo.train(evaluator)
    use = pgo.flags_for(evaluator, profile)
    rows = []

    def tuned(on_pgo: bool) -> dict:
        request = TuneRequest(strategy="agent", budget=budget, pgo=on_pgo,
                              flags_db=str(work / f"{name}-{on_pgo}.flags.json"))
        result = Tuner(store, config, request,
                       lambda m: None if m.startswith("  ") else tc.log(f"{name}: {m}")).run()
        by_unit = {u.id: w.flags for w in result.winners for u in evaluator.units
                   if u.source_rel == w.source}
        return {uid: (use[uid] if on_pgo else ()) + by_unit.get(uid, ())
                for uid in (set(use) if on_pgo else set(by_unit))}

    variants = {"PGO alone": use, "tuned": tuned(False), "tuned on PGO": tuned(True)}
    for label, flags in variants.items():
        tc.log(f"{name}: A/B {label} vs -O3")
        rows.append({"program": name, "variant": label, "vs": "-O3",
                     "result": ab(evaluator, flags, {})})
    tc.log(f"{name}: A/B tuned on PGO vs PGO alone")
    rows.append({"program": name, "variant": "tuned on PGO", "vs": "PGO alone",
                 "result": ab(evaluator, variants["tuned on PGO"], use)})
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--budget", type=int, default=12)
    parser.add_argument("--programs", default="bzip2,lua5.4")
    parser.add_argument("--metric", default="cpu")
    args = parser.parse_args()
    rows, started = [], time.monotonic()
    with tempfile.TemporaryDirectory(prefix="autopass-pgo-stage-") as scratch:
        for name in args.programs.split(","):
            work = Path(scratch) / name
            work.mkdir()
            rows += run_program(name, work, args.budget, args.metric)
    print(f"\npgo_stage: budget {args.budget}, metric {args.metric}, "
          f"{time.strftime('%Y-%m-%d')}, {round((time.monotonic() - started) / 60)} min")
    print(f"{'program':<9} {'variant':<14} {'vs':<10} {'speedup [95% CI]':<28} verdict")
    for r in rows:
        s, lo, hi, verdict = r["result"]
        print(f"{r['program']:<9} {r['variant']:<14} {r['vs']:<10} "
              f"{f'{s:.4f}x [{lo:.4f}, {hi:.4f}]':<28} {verdict}")
    for variant, vs in (("PGO alone", "-O3"), ("tuned", "-O3"), ("tuned on PGO", "-O3"),
                        ("tuned on PGO", "PGO alone")):
        mine = [r["result"][0] for r in rows if r["variant"] == variant and r["vs"] == vs]
        print(f"geomean {variant} vs {vs}: {tc.geomean(mine):.4f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
