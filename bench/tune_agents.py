#!/usr/bin/env python3
"""The agent against the classical strategies: same programs, budget, seed and metric,
in one run (the machinery of tune_classical.py, with `agent` among the strategies).

Acceptance (issue 6): the agent's geomean speedup over -O3 is at least the best
classical strategy's, and the agent reaches that strategy's final tuning result in at
most half the evaluations.  Printed after the table.

Usage: python bench/tune_agents.py [--budget 20] [--classical random,greedy,ga,de,pso]
           [--programs lua5.4,bzip2,libzstd] [--metric cpu] [--seed 0] [--out FILE.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import tune_classical as tc  # noqa: E402


def evaluations_to_reach(rows_by_strategy: dict, program: str, strategy: str, target: float
                         ) -> int | None:
    """First evaluation at which `strategy`'s best clear ratio on `program` <= target."""
    trace = rows_by_strategy[(program, strategy)]["trace"]
    for count, best in enumerate(trace, 1):
        if best is not None and best <= target:
            return count
    return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--budget", type=int, default=20)
    parser.add_argument("--classical", default="random,greedy,ga,de,pso")
    parser.add_argument("--programs", default="lua5.4,bzip2,libzstd")
    parser.add_argument("--metric", default="cpu")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out")
    args = parser.parse_args()
    strategies = ["agent"] + args.classical.split(",")
    rows, started = [], time.monotonic()
    with tempfile.TemporaryDirectory(prefix="autopass-tune-agents-") as scratch:
        for name in args.programs.split(","):
            work = Path(scratch) / name
            work.mkdir()
            store, config = tc.prepare(name, work, args.metric)
            for strategy in strategies:
                rows.append(tc.tune_one(store, config, strategy, args.budget, args.seed,
                                        work, name))
                tc.log(f"{name}/{strategy}: {rows[-1]}")
                if args.out:
                    Path(args.out).write_text(json.dumps(rows, indent=1))
    print(f"\ntune_agents: budget {args.budget}, metric {args.metric}, seed {args.seed}, "
          f"{time.strftime('%Y-%m-%d')}, {round((time.monotonic() - started) / 60)} min")
    tc.print_table(rows, strategies)
    verdict(rows, strategies[1:], args.programs.split(","))
    return 0


def verdict(rows: list[dict], classical: list[str], programs: list[str]) -> None:
    def geo(strategy: str) -> float:
        return tc.geomean([r["speedup"] or 1.0 for r in rows if r["strategy"] == strategy])

    best = max(classical, key=geo)
    print(f"agent geomean {geo('agent'):.4f}x vs best classical ({best}) {geo(best):.4f}x: "
          f"{'PASS' if geo('agent') >= geo(best) else 'FAIL'}")
    by = {(r["program"], r["strategy"]): r for r in rows}
    for program in programs:
        target = by[(program, best)]["tuning_best"]
        if target is None:
            print(f"  {program}: {best} found no clear gain; nothing to reach")
            continue
        mine = evaluations_to_reach(by, program, "agent", target)
        theirs = evaluations_to_reach(by, program, best, target)
        ok = mine is not None and theirs is not None and mine <= theirs / 2
        print(f"  {program}: {best} reached {target:.4f}x in {theirs} evaluations; the agent "
              f"in {mine if mine is not None else 'never'} -> {'PASS' if ok else 'FAIL'}")


if __name__ == "__main__":
    sys.exit(main())
