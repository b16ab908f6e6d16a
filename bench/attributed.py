#!/usr/bin/env python3
"""Attributed tuning against whole-program tuning, at equal budget and seed.

For each program (tune_classical.CASES; `lame` is the numeric codec: hot code spread
over several units, each at most about a quarter of the run), built by its own build
system at -O3 and recorded: `autopass tune` twice with the same strategy, budget and
seed, once measuring candidates by the whole program only, once with `--attribute`
(per-unit perf attribution and the composite of the per-unit winners).  With
`--stages`, both tune per-file flags on top of the whole-program stages `tune` chooses
(from pgo, lto and thinlto, or the ones `--stage-set` names), and the written result is
compared with that stages build.  Each written result is then measured by an independent
A/B against its baseline (-O3, or the stages build): fresh runs, 10-30 pairs.  A stages
run also measures the whole result (stages and per-file flags) against -O3 in a second
independent A/B: what a user of `autopass tune` gets over the build they had.

    python bench/attributed.py --programs lame --budget 20
    python bench/attributed.py --programs bzip2,lua5.4 --stages --budget 20
    python bench/attributed.py --programs lame --stages --stage-set pgo --methods attributed
    python bench/attributed.py --programs lame --native     # -march=native in the space

Under LTO or ThinLTO, attribution is off (tune says why: functions cross units at link
time), so on a stages baseline with link-time optimization both methods tune alike.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import tune_classical as tc  # noqa: E402

from autopass_build.candidates.evaluate import Evaluator  # noqa: E402
from autopass_build.core.names import METRICS, STAGES  # noqa: E402
from autopass_build.tuning.journal import Phase  # noqa: E402
from autopass_build.tuning.tuner import Tuner, TuneRequest  # noqa: E402

LINK_TIME_STAGES = tuple(s for s in STAGES if s != "bolt")   # BOLT: not the point here


def tune(store, config, name: str, work: Path, strategy: str, budget: int, seed: int,
         attribute: bool, stages: tuple[str, ...], native: bool = False) -> dict:
    label = "attributed" if attribute else "whole-program"
    request = TuneRequest(strategy=strategy, budget=budget, seed=seed, max_units=4,
                          stages=stages, attribute=attribute, native=native,
                          flags_db=str(work / f"{name}-{label}.flags.json"))
    started = time.monotonic()
    tuner = Tuner(store, config, request,
                  lambda m: None if m.startswith("  ") else tc.log(f"{name}/{label}: {m}"))
    result = tuner.run()
    journal = result.journal
    composites = journal.of_phase(Phase.COMPOSITE)
    attributed = [f for e in journal.of_phase(Phase.SEARCH) for f in e.effects]
    chosen = tuner.chosen
    return {"program": name, "method": label, "evaluations": result.measured,
            "minutes": round((time.monotonic() - started) / 60, 1),
            "winners": {w.source: " ".join(w.flags) for w in result.winners},
            "stages": chosen.name if chosen else "",
            "stage_flags": (list(chosen.flags.unit_flags), list(chosen.flags.link_flags))
            if chosen else ([], []),
            "unit_effects": len(attributed),
            "unit_faster": sum(1 for f in attributed if f.verdict == "faster"),
            "composite": composites[-1].interval_text() if composites else "",
            "run": journal.run_id, "winners_raw": [(w.source, list(w.flags))
                                                   for w in result.winners]}


def verify(store, config, row: dict, over_o3: bool = False) -> dict:
    """The written per-file flags against their baseline (-O3, or the stages build), or
    with `over_o3` the stages and the per-file flags together against -O3, independently
    measured."""
    unit_flags, link_flags = (tuple(f) for f in row["stage_flags"])
    if not row["winners_raw"] and not (over_o3 and (unit_flags or link_flags)):
        return {"speedup": 1.0, "low": 1.0, "high": 1.0, "verdict": "nothing written"}
    evaluator = Evaluator(store, config)
    if (unit_flags or link_flags) and not over_o3:
        evaluator.rebase({u.id: unit_flags for u in evaluator.units}, link_flags)
    by_unit = {u.id: tuple(flags) for source, flags in row["winners_raw"]
               for u in evaluator.units if u.source_rel == source}
    if over_o3:
        by_unit = {u.id: unit_flags + by_unit.get(u.id, ()) for u in evaluator.units}
    measure = replace(config.measure, min_pairs=10, max_pairs=30, precision=0.005)
    tc.log(f"{row['program']}/{row['method']}: verifying against "
           f"{'-O3' if over_o3 else row['stages'] or '-O3'}")
    evaluation = evaluator.evaluate(by_unit, measure=measure,
                                    link_flags=link_flags if over_o3 else ())
    est = evaluation.comparison.estimate if evaluation.comparison else None
    if est is None:
        return {"speedup": None, "low": None, "high": None, "verdict": str(evaluation.outcome)}
    speedup, low, high = est.speedup()
    return {"speedup": speedup, "low": low, "high": high,
            "verdict": evaluation.comparison.verdict or "unclear"}


def speed_text(result: dict | None) -> str:
    if not result:
        return "-"
    if not result.get("speedup"):
        return result.get("verdict", "?")
    return (f"{result['speedup']:.3f}x [{result['low']:.3f}, {result['high']:.3f}] "
            f"{result['verdict']}")


def markdown(rows: list[dict], meta: dict) -> str:
    lines = [f"Attributed vs whole-program tuning ({meta['strategy']}, budget "
             f"{meta['budget']}, seed {meta['seed']}, metric {meta.get('metric', 'cpu')}, "
             f"{meta['minutes']} min"
             + (", on top of the chosen stages" if meta["stages"] else "")
             + (", -march=native allowed" if meta.get("native") else "") + ")", "",
             "| program | method | stages | written | verified speedup [interval] | "
             "stages + written over -O3 | per-unit effects (faster) | composite | tuning min |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        written = "; ".join(f"{s}: {f}" for s, f in r["winners"].items()) or "nothing"
        lines.append(f"| {r['program']} | {r['method']} | {r['stages'] or '-'} | "
                     f"{written[:120]} | {speed_text(r)} | {speed_text(r.get('over_o3'))} | "
                     f"{r['unit_effects']} ({r['unit_faster']}) | {r['composite'] or '-'} | "
                     f"{r['minutes']} |")
    for method in ("whole-program", "attributed"):
        values = [r["speedup"] for r in rows if r["method"] == method and r.get("speedup")]
        if values:
            mean = math.exp(sum(math.log(v) for v in values) / len(values))
            lines.append(f"\n{method}: geomean {mean:.3f}x over "
                         f"{'the stages build' if meta['stages'] else '-O3'}")
        totals = [r["over_o3"]["speedup"] for r in rows if r["method"] == method
                  and r.get("over_o3", {}).get("speedup")]
        if totals:
            mean = math.exp(sum(math.log(v) for v in totals) / len(totals))
            lines.append(f"{method}: stages and per-file flags together, geomean "
                         f"{mean:.3f}x over -O3")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     epilog=__doc__.split("\n\n", 1)[1],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--programs", default="lame")
    parser.add_argument("--strategy", default="random")
    parser.add_argument("--budget", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--stages", action="store_true",
                        help="per-file flags on top of the stages tune chooses")
    parser.add_argument("--stage-set", default=",".join(LINK_TIME_STAGES),
                        help="with --stages, the stages tune chooses from "
                             "(default %(default)s; pgo alone keeps attribution on)")
    parser.add_argument("--methods", default="whole-program,attributed",
                        help="which of whole-program,attributed to run")
    parser.add_argument("--native", action="store_true",
                        help="let the search try -march=native (tune --native: the result "
                             "runs on this CPU family only)")
    parser.add_argument("--metric", default="cpu", choices=METRICS,
                        help="what tuning and the independent A/Bs measure (default cpu)")
    parser.add_argument("--out", default="attributed-out")
    args = parser.parse_args()
    stages = tuple(s for s in args.stage_set.split(",") if s) if args.stages else ()
    unknown = set(stages) - set(STAGES)
    if unknown:
        parser.error(f"--stage-set: unknown stage {sorted(unknown)[0]!r}; choose from "
                     f"{', '.join(STAGES)}")
    started = time.monotonic()
    rows = []
    with tempfile.TemporaryDirectory(prefix="autopass-attributed-") as scratch:
        for name in args.programs.split(","):
            work = Path(scratch) / name
            store, config = tc.prepare(name, work, args.metric)
            for attribute in [m == "attributed" for m in args.methods.split(",")]:
                row = tune(store, config, name, work, args.strategy, args.budget, args.seed,
                           attribute, stages, args.native)
                row.update(verify(store, config, row))
                if stages:
                    row["over_o3"] = verify(store, config, row, over_o3=True)
                rows.append(row)
    meta = {"strategy": args.strategy, "budget": args.budget, "seed": args.seed,
            "native": args.native, "metric": args.metric,
            "stages": ",".join(stages), "minutes": round((time.monotonic() - started) / 60, 1)}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "attributed.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    text = markdown(rows, meta)
    (out / "attributed.md").write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
