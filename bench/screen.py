#!/usr/bin/env python3
"""Screening on real programs: measured evaluations needed with and without it, and with
knowledge transferred from the other programs versus learned from scratch.

For each program (tune_classical.CASES, built at -O3 by its own build system), the same
strategy, seed and budget three times:

    plain        every candidate measured (autopass tune --no-screen)
    scratch      --screen, knowledge from this run only
    transfer     --screen, starting from what the scratch runs of the OTHER programs
                 measured (run after all scratch runs)

The default metric is callgrind instructions on lighter inputs (LIGHT): deterministic,
so "reached 95 % of the best" is about the search, not about noise; --metric cpu uses
the suite's ~1 s workloads instead.

Reported per run: evaluations (measured) until the best clear gain reached 95 % of the
plain run's final best, candidates screened out, the tuning best, and an independent
A/B of the tuned build against -O3.  Target (issue 9): >= 30 % fewer evaluations on the
geomean, final gain not worse beyond its interval.

Usage: python bench/screen.py [--programs bzip2,lua5.4] [--strategy random] [--budget 16]
           [--seed 0] [--metric instructions] [--out FILE.json]
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

from autopass_build import screen  # noqa: E402
from autopass_build.tuner import TuneRequest, Tuner  # noqa: E402


# Inputs that take ~2-5 s under callgrind (the suite's take ~1 s natively, ~50 s there).
LIGHT = {
    "bzip2": lambda work: ["{exe}", "-9", "-c", str(tc.text_input(work / "bz-light.txt", 0.3))],
    "lua5.4": lambda work: ["{exe}", str(HERE / "workloads" / "lua_mix.lua"), "1"],
}


def one_run(store, config, name: str, label: str, args, work: Path, knowledge: Path | None
            ) -> dict:
    request = TuneRequest(strategy=args.strategy, budget=args.budget, seed=args.seed,
                          max_units=4, screen=knowledge is not None,
                          knowledge=str(knowledge) if knowledge else "",
                          flags_db=str(work / f"{name}-{label}.flags.json"))
    started = time.monotonic()
    result = Tuner(store, config, request,
                   lambda m: None if m.startswith("  ") else tc.log(f"{name}/{label}: {m}")).run()
    entries = result.journal.entries
    row = {"program": name, "run": label, "evaluations": result.measured,
           "screened": sum(1 for e in entries if e["phase"] == "screened"),
           "trace": tc.best_trace(result.journal), "seconds": round(time.monotonic() - started),
           "tuning_best": result.best["ratio"] if result.best else None,
           "winners": {w.source: " ".join(w.flags) for w in result.winners}}
    row.update(tc.verify(store, config, result, name, label))
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--programs", default="bzip2,lua5.4")
    parser.add_argument("--strategy", default="random")
    parser.add_argument("--budget", type=int, default=16)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--metric", default="instructions", choices=tc.cfg.METRICS)
    parser.add_argument("--out")
    parser.add_argument("--render", metavar="ROWS_JSON",
                        help="only print the table again from an earlier --out file")
    args = parser.parse_args()
    names = args.programs.split(",")
    if args.render:
        report(json.loads(Path(args.render).read_text()), names, args, 0)
        return 0
    rows, prepared, started = [], {}, time.monotonic()
    with tempfile.TemporaryDirectory(prefix="autopass-screen-") as scratch:
        folder = Path(scratch)
        for name in names:
            work = folder / name
            work.mkdir()
            light = LIGHT.get(name) if args.metric == "instructions" else None
            prepared[name] = (*tc.prepare(name, work, args.metric, light), work)
            store, config, _ = prepared[name]
            rows.append(one_run(store, config, name, "plain", args, work, None))
            rows.append(one_run(store, config, name, "scratch", args, work,
                                work / "knowledge.json"))
        for name in names:
            store, config, work = prepared[name]
            shared = screen.Knowledge(str(work / "transfer.json"))
            for other in names:
                if other != name:
                    shared.add(screen.Knowledge.load(str(prepared[other][2] / "knowledge.json"))
                               .samples)
            shared.save()
            tc.log(f"{name}/transfer: {len(shared.samples)} evaluations from "
                   f"{len(shared.programs())} other program(s)")
            rows.append(one_run(store, config, name, "transfer", args, work,
                                work / "transfer.json"))
            if args.out:
                Path(args.out).write_text(json.dumps(rows, indent=1))
    report(rows, names, args, time.monotonic() - started)
    return 0


def report(rows: list[dict], names: list[str], args, seconds: float) -> None:
    print(f"\nscreen: {args.strategy}, budget {args.budget}, seed {args.seed}, metric "
          f"{args.metric}, {time.strftime('%Y-%m-%d')}, {round(seconds / 60)} min")
    print(f"{'program':<9} {'run':<9} {'to 95% of plain':>15} {'screened':>8} "
          f"{'tuning best':>11} {'verified vs -O3 [95% CI]':<28} verdict")
    by = {(r["program"], r["run"]): r for r in rows}
    ratios: dict[str, list[float]] = {"scratch": [], "transfer": []}
    for name in names:
        target = by[(name, "plain")]["tuning_best"]
        plain_steps = tc.reached(by[(name, "plain")]["trace"], target)
        for run in ("plain", "scratch", "transfer"):
            r = by.get((name, run))
            if r is None:
                print(f"{name:<9} {run:<9} (not run)")
                continue
            steps = tc.reached(r["trace"], target)
            if run != "plain" and plain_steps:
                # not reached within the budget counts as the whole budget
                ratios[run].append((steps or args.budget) / plain_steps)
            speed = (f"{r['speedup']:.4f}x [{r['low']:.4f}, {r['high']:.4f}]"
                     if r["speedup"] else "-")
            best = f"{r['tuning_best']:.4f}" if r["tuning_best"] else "none"
            print(f"{name:<9} {run:<9} {steps or '-':>15} {r['screened']:>8} {best:>11} "
                  f"{speed:<28} {r['verdict']}")
    for run, values in ratios.items():
        if values:
            print(f"geomean evaluations to 95 % of plain's best, {run} / plain: "
                  f"{tc.geomean(values):.3f} over {len(values)} program(s) "
                  f"(target <= 0.70)")
        else:
            print(f"{run}: no program where the plain run found a clear gain; nothing to "
                  "compare")


if __name__ == "__main__":
    sys.exit(main())
