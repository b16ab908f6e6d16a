#!/usr/bin/env python3
"""Faster than the recipe: autopass's tuned build against what an expert applies by hand,
on whole C++ applications, in one run.

For each program (default: geos and cppcheck, tune_classical.CASES), recorded through its
own CMake + Ninja Release build (-O3):

    PGO+ThinLTO        the recipe: clang's instrumentation PGO trained on the benchmark,
                       ThinLTO linked by lld
    PGO+ThinLTO+BOLT   the recipe with BOLT, trained on that build
    PGO+LTO            full LTO instead, for the choice between them
    tuned              `autopass tune` with its stages and per-file flags (--time), what it
                       chose and wrote (BOLT included when it kept it)

each measured by an independent A/B against the -O3 build (fresh runs, 20-40 pairs; the
tuned build is not credited with its tuning-time numbers).  Also what a tuning run costs
at this size: a clean build of the application, a per-file candidate's build on the
ThinLTO and the full-LTO baseline (one unit recompiled, the program relinked), the
tune's wall time and evaluations.

Usage: python bench/recipe.py [--programs geos,cppcheck] [--time 60m] [--metric cpu]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import debian_sources  # noqa: E402
import suite  # noqa: E402
import tune_classical as tc  # noqa: E402

from autopass_build.candidates import pgo, stages  # noqa: E402
from autopass_build.candidates.evaluate import Evaluator  # noqa: E402
from autopass_build.candidates.stages import Stage  # noqa: E402
from autopass_build.core.durations import parse_duration  # noqa: E402
from autopass_build.core.names import STAGES  # noqa: E402
from autopass_build.evidence.hotspots import load as load_profile  # noqa: E402
from autopass_build.tuning.stage_choice import opt_level  # noqa: E402
from autopass_build.tuning.tuner import UNCOUNTED, Tuner, TuneRequest  # noqa: E402

RECIPES = {"PGO+ThinLTO": (Stage.PGO, Stage.THINLTO),
           "PGO+ThinLTO+BOLT": (Stage.PGO, Stage.THINLTO, Stage.BOLT),
           "PGO+LTO": (Stage.PGO, Stage.LTO)}


def clean_build_seconds(name: str, work: Path) -> float:
    """The application's own clean build with plain clang-19, as its users build it."""
    program = tc.CASES[name].program
    tree = debian_sources.fresh_copy(program.package, work / f"{name}-plain")
    started = time.monotonic()
    subprocess.run(list(program.plain_build), cwd=tree / program.build_dir, check=True,
                   capture_output=True)
    seconds = time.monotonic() - started
    shutil.rmtree(tree, ignore_errors=True)
    return seconds


def candidate_seconds(store, config, composition: tuple[Stage, ...], profile) -> float:
    """One per-file candidate's build on the `composition` baseline: the hottest unit
    recompiled with one more flag, the program relinked (ThinLTO takes the other
    modules from its cache)."""
    evaluator = Evaluator(store, config)
    flags = stages.flags(composition, opt_level(evaluator), profile.use_flag())
    base = {u.id: flags.unit_flags for u in evaluator.units}
    target = evaluator.target.output
    evaluator.replayer.build(target, base, flags.link_flags)      # the baseline, cached
    shares = load_profile(store.dir).unit_shares()
    hot = max(evaluator.units, key=lambda u: shares.get(u.source_rel, 0.0))
    changed = {**base, hot.id: flags.unit_flags + ("-mllvm", "-unroll-threshold=301")}
    started = time.monotonic()
    evaluator.replayer.build(target, changed, flags.link_flags)
    return time.monotonic() - started


def tuned(store, config, name: str, seconds: float, work: Path) -> tuple[dict, dict]:
    """`autopass tune` with its stages for `seconds`: (unit id -> flags of what it chose
    and wrote, facts about the run)."""
    request = TuneRequest(strategy="agent", budget=UNCOUNTED, stages=STAGES,
                          time_limit=seconds, flags_db=str(work / f"{name}.flags.json"))
    started = time.monotonic()
    tuner = Tuner(store, config, request,
                  lambda m: None if m.startswith("  ") else tc.log(f"{name}/tune: {m}"))
    result = tuner.run()
    chosen = tuner.chosen
    units = Evaluator(store, config).units
    base = {u.id: chosen.flags.unit_flags if chosen else () for u in units}
    winners = {u.id: w.flags for w in result.winners for u in units if u.source_rel == w.source}
    flags = {u: base[u] + winners.get(u, ()) for u in base}
    return flags, {"evaluations": result.measured, "chosen": chosen.name if chosen else "none",
                   "link": list(chosen.flags.link_flags) if chosen else [],
                   "winners": {w.source: " ".join(w.flags) for w in result.winners},
                   "seconds": round(time.monotonic() - started)}


def run_program(name: str, work: Path, seconds: float, metric: str) -> list[dict]:
    started = time.monotonic()
    tc.log(f"{name}: a clean build with plain clang")
    clean = clean_build_seconds(name, work)
    store, config = tc.prepare(name, work, metric)
    evaluator = Evaluator(store, config)
    units = evaluator.units
    tc.log(f"{name}: training PGO")
    profile = pgo.train(evaluator)
    costs = {"clean build": round(clean, 1)}
    for label, composition in (("candidate on PGO+ThinLTO", RECIPES["PGO+ThinLTO"]),
                               ("candidate on PGO+LTO", RECIPES["PGO+LTO"])):
        tc.log(f"{name}: timing a {label}")
        costs[label] = round(candidate_seconds(store, config, composition, profile), 1)
        # the largest single process so far (the LTO links are the likely one): KiB
        costs[f"peak process after the {label}, GiB"] = round(
            resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 2**20, 2)
    rows = []
    level = opt_level(evaluator)
    for label, composition in RECIPES.items():
        found = stages.flags(composition, level, profile.use_flag())
        tc.log(f"{name}: A/B {label} against -O3")
        rows.append({"program": name, "variant": label, **suite.ab(
            store, config, {u.id: found.unit_flags for u in units},
            link_flags=found.link_flags, bolt=Stage.BOLT in composition)})
    flags, facts = tuned(store, config, name, seconds, work)
    tc.log(f"{name}: A/B tuned ({facts['chosen']}) against -O3")
    rows.append({"program": name, "variant": "tuned", **facts, **suite.ab(
        store, config, flags, link_flags=tuple(facts["link"]),
        bolt="bolt" in facts["chosen"].split("+"))})
    for row in rows:
        row["costs"] = costs
        row["units"] = len(units)
        row["program_minutes"] = round((time.monotonic() - started) / 60, 1)
    return rows


def report(rows: list[dict]) -> str:
    out = []
    for program in dict.fromkeys(r["program"] for r in rows):
        mine = [r for r in rows if r["program"] == program]
        costs = mine[0]["costs"]
        out.append(f"\n{program} ({mine[0]['units']} units; clean build "
                   f"{costs['clean build']} s; one per-file candidate's build: "
                   f"{costs['candidate on PGO+ThinLTO']} s on PGO+ThinLTO, "
                   f"{costs['candidate on PGO+LTO']} s on PGO+LTO; the largest process "
                   f"(a link) {costs['peak process after the candidate on PGO+LTO, GiB']} "
                   "GiB)")
        for r in mine:
            cell = (f"{r['speedup']:.3f}x [{r['low']:.3f}, {r['high']:.3f}] {r['verdict']}"
                    if r["speedup"] else r["verdict"])
            extra = (f"  (chose {r['chosen']}, {r['evaluations']} evaluations in "
                     f"{r['seconds'] // 60} min; wrote {len(r['winners'])} per-file entries)"
                     if r["variant"] == "tuned" else "")
            out.append(f"  {r['variant']:<18} {cell}{extra}")
    return "\n".join(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     epilog=__doc__.split("\n\n", 1)[1],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--programs", default="geos,cppcheck")
    parser.add_argument("--time", default="60m", help="each tune's time budget")
    parser.add_argument("--metric", default="cpu", choices=tc.cfg.METRICS)
    parser.add_argument("--out", default="recipe-out", help="folder for recipe.json")
    args = parser.parse_args()
    unknown = [p for p in args.programs.split(",") if p not in tc.CASES]
    if unknown:
        parser.error(f"unknown program {unknown}; known: {', '.join(tc.CASES)}")
    seconds = parse_duration(args.time)
    started, rows = time.monotonic(), []
    with tempfile.TemporaryDirectory(prefix="autopass-recipe-") as scratch:
        for name in args.programs.split(","):
            work = Path(scratch) / name
            work.mkdir()
            rows += run_program(name, work, seconds, args.metric)
            Path(args.out).mkdir(parents=True, exist_ok=True)
            (Path(args.out) / "recipe.json").write_text(json.dumps(
                {"rows": rows, "minutes": round((time.monotonic() - started) / 60),
                 "command": "python bench/recipe.py " + " ".join(sys.argv[1:]),
                 "date": time.strftime("%Y-%m-%d"), "cores": os.cpu_count()}, indent=1))
    print(report(rows))
    print(f"\n{round((time.monotonic() - started) / 60)} min; wrote {args.out}/recipe.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
