#!/usr/bin/env python3
"""How far a real program's instruction count moves with its layout alone, and whether
the floor autopass sets from three counts covers it (candidates/layout_spread.py).

The program is recorded at -O3 (tune_classical.CASES), built on the given stages,
counted twice as built (does its count repeat at all?), and linked again by lld in
`--orders` orders of its sections (at least a run's four: reversed, then shuffles by
seed; the same objects, so the same code); each is counted once by callgrind.  The floor autopass sets
is the one from the first four orders (layout_spread.ORDERS); every pair of the counted
layouts is a layout-only "candidate",
and the share of pairs whose difference is within a floor is how often a change of
layout alone stays unjudged (the rest would be called faster or slower).  Printed: that
share for the floor a run sets, and its mean and worst over every draw of four (and of
three, the margin's alternative) from the layouts counted.

Usage: python bench/layout_spread.py [--program lua5.4] [--stages pgo,lto]
           [--orders 8] [--out layout-spread-out]
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import shutil
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))
import tune_classical as tc  # noqa: E402

from autopass_build.candidates import layout_spread, pgo, stages  # noqa: E402
from autopass_build.candidates.evaluate import Evaluator  # noqa: E402
from autopass_build.core import toolchain  # noqa: E402
from autopass_build.measuring.benchmark import run_once  # noqa: E402
from autopass_build.tuning.stage_choice import opt_level  # noqa: E402


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0],
                                     epilog=__doc__.split("\n\n", 1)[1],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--program", default="lua5.4", choices=sorted(tc.CASES))
    parser.add_argument("--stages", default="pgo,lto", help="'' for the recorded build")
    parser.add_argument("--orders", type=int, default=8,
                        help="reordered links counted (at least a run's four)")
    parser.add_argument("--out", type=Path, default=Path("layout-spread-out"))
    args = parser.parse_args()
    lld = toolchain.find_tool("ld.lld")
    if lld is None:
        raise SystemExit("no ld.lld: install lld-19 (scripts/setup.sh does)")
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="autopass-layout-") as scratch:
        store, config = tc.prepare(args.program, Path(scratch), "instructions")
        evaluator = Evaluator(store, config)
        composition = stages.parse([s for s in args.stages.split(",") if s])
        profile = pgo.train(evaluator) if stages.Stage.PGO in composition else None
        flags = stages.flags(composition, opt_level(evaluator),
                             profile.use_flag() if profile else "")
        unit_flags = {u.id: flags.unit_flags for u in evaluator.units}
        extra = max(0, args.orders - len(layout_spread.ORDERS))   # more seeds than a run's
        orders = list(layout_spread.ORDERS) + list(range(4, 4 + extra))
        repeats, counts = [], []
        for label, link in [("as built", ()), ("as built, again", ())] + [
                (f"order {seed}", layout_spread.shuffled(lld, seed)) for seed in orders]:
            built = evaluator.replayer.build(evaluator.target.output, unit_flags,
                                             flags.link_flags + link)
            done = run_once(evaluator.bench, built.binary, built.env,
                            evaluator.bench.run.timeout * 100, metric="instructions")
            shutil.rmtree(built.folder, ignore_errors=True)
            if done.value is None:
                raise SystemExit(f"{label}: callgrind could not count it: {done.detail}")
            (counts if link else repeats).append(done.value)
            log(f"{label}: {done.value:.0f} instructions "
                f"({done.value / repeats[0] - 1:+.3%} against the build as built)")
    pairs = [abs(math.log(a / b)) for a, b in itertools.combinations(counts, 2)]

    def within(sample: tuple[float, ...]) -> float:
        floor = layout_spread.floor_of(math.log(max(sample) / min(sample)))
        return sum(p <= floor for p in pairs) / len(pairs)

    draws = {k: [within(s) for s in itertools.combinations(counts, k)] for k in (3, 4)}
    kept = len(layout_spread.ORDERS)
    run_floor = layout_spread.floor_of(math.log(max(counts[:kept]) / min(counts[:kept])))
    full = math.log(max(counts) / min(counts))
    result = {"program": args.program, "stages": args.stages, "counts": counts,
              "as_built": repeats, "repeats": abs(math.log(repeats[1] / repeats[0])) <= 1e-6,
              "range_of_all": math.expm1(full), "floor_of_a_run": math.expm1(run_floor),
              "pairs_within_a_runs_floor": within(tuple(counts[:kept])),
              "draws": {k: {"mean": sum(v) / len(v), "worst": min(v)} for k, v in draws.items()},
              "minutes": round((time.monotonic() - started) / 60, 1)}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "layout_spread.json").write_text(json.dumps(result, indent=1))
    log(f"the build as built counted twice: {'the same' if result['repeats'] else 'NOT the same'}"
        f" ({repeats[1] / repeats[0] - 1:+.4%})")
    log(f"{args.program} on {args.stages or 'the recorded build'}: {len(counts)} layouts, "
        f"counts {math.expm1(full):.2%} apart at most; a run's floor (the first {kept}): "
        f"{math.expm1(run_floor):.2%}, {result['pairs_within_a_runs_floor']:.0%} of the "
        f"{len(pairs)} layout pairs within it")
    for k, values in draws.items():
        log(f"  floors from any {k} of the layouts: {sum(values) / len(values):.0%} of the "
            f"pairs within on average, {min(values):.0%} at worst")
    return 0


if __name__ == "__main__":
    sys.exit(main())
