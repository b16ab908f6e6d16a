#!/usr/bin/env python3
"""How often tune's choice of stages falls below the best composition, across seeds.

For each program (default: bzip2, lua5.4, libzstd: tune_classical.CASES, each built at
-O3 by its own build system), in one run:

    reference   every composition (pgo+lto, lto, pgo, pgo+thinlto, thinlto) A/B'd
                against -O3 by an independent A/B with many pairs (40-80)
    per seed    `autopass tune` with its stages only (a stage budget of 10, the search
                given what is left), and the composition it chose

A choice falls below the best when the best composition's reference interval lies
clearly above the chosen one's (or nothing was chosen where the best is clearly faster
than -O3).  Prints the reference table, each seed's choice, and the count.

Usage: python bench/stage_seeds.py [--programs bzip2,lua5.4,libzstd] [--seeds 0,1,2,3]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import tune_classical as tc  # noqa: E402

from autopass_build.candidates import pgo, stages  # noqa: E402
from autopass_build.candidates.evaluate import Evaluator  # noqa: E402
from autopass_build.candidates.stages import COMPOSITIONS  # noqa: E402
from autopass_build.tuning.stage_choice import opt_level  # noqa: E402
from autopass_build.tuning.tuner import Tuner, TuneRequest  # noqa: E402

LINK_TIME = ("pgo", "lto", "thinlto")


def reference(store, config, profile) -> dict[str, dict]:
    """Each composition's speedup over -O3 by an independent A/B with many pairs."""
    evaluator = Evaluator(store, config)
    level = opt_level(evaluator)
    measure = replace(config.measure, min_pairs=40, max_pairs=80, precision=0.003)
    found = {}
    for composition in COMPOSITIONS:
        name = stages.name(composition)
        flags = stages.flags(composition, level, profile.use_flag())
        tc.log(f"reference A/B of {name}")
        result = Evaluator(store, config).evaluate(
            {u.id: flags.unit_flags for u in evaluator.units}, measure=measure,
            link_flags=flags.link_flags)
        est = result.comparison.estimate if result.comparison else None
        speedup, low, high = est.speedup() if est else (None, None, None)
        found[name] = {"speedup": speedup, "low": low, "high": high}
    return found


def choice(store, config, seed: int, work: Path, name: str) -> str:
    """The composition `autopass tune` chose with this seed ("none": none verified)."""
    request = TuneRequest(strategy="random", budget=12, stage_budget=10, seed=seed,
                          max_units=1, stages=LINK_TIME,
                          flags_db=str(work / f"{name}-{seed}.flags.json"))
    tuner = Tuner(store, config, request, lambda m: None)
    tuner.run()
    return tuner.chosen.name if tuner.chosen else "none"


def below_best(chosen: str, ref: dict[str, dict]) -> bool:
    """The best composition is clearly faster than the chosen one (or than -O3, when
    nothing was chosen): its interval's low end above the other's high end."""
    best = max(ref.values(), key=lambda r: r["speedup"] or 0)
    if not best["low"]:
        return False
    other_high = ref[chosen]["high"] if chosen in ref else 1.0
    return best["low"] > (other_high or 0)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     epilog=__doc__.split("\n\n", 1)[1],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--programs", default="bzip2,lua5.4,libzstd")
    parser.add_argument("--seeds", default="0,1,2,3")
    parser.add_argument("--metric", default="cpu", choices=tc.cfg.METRICS)
    parser.add_argument("--out", default="stage-choice.json")
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    started, results = time.monotonic(), {}
    with tempfile.TemporaryDirectory(prefix="autopass-stage-choice-") as scratch:
        for name in args.programs.split(","):
            work = Path(scratch) / name
            work.mkdir()
            store, config = tc.prepare(name, work, args.metric)
            profile = pgo.train(Evaluator(store, config))
            ref = reference(store, config, profile)
            chosen = {seed: choice(store, config, seed, work, name) for seed in seeds}
            results[name] = {"reference": ref, "chosen": chosen,
                             "below": [s for s, c in chosen.items() if below_best(c, ref)]}
            Path(args.out).write_text(json.dumps(results, indent=1))
    falls = sum(len(r["below"]) for r in results.values())
    runs = sum(len(r["chosen"]) for r in results.values())
    for name, r in results.items():
        print(f"\n{name}:")
        for comp, v in r["reference"].items():
            print(f"  {comp:<12} {v['speedup'] or 0:.3f}x [{v['low'] or 0:.3f}, "
                  f"{v['high'] or 0:.3f}]")
        print("  chosen by seed: " + ", ".join(f"{s}: {c}" for s, c in r["chosen"].items())
              + (f"; below the best: seeds {r['below']}" if r["below"] else ""))
    print(f"\ntune's choice fell clearly below the best composition in {falls} of {runs} "
          f"runs ({round((time.monotonic() - started) / 60)} min; metric {args.metric})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
