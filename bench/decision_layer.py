#!/usr/bin/env python3
"""Decisions carried in the IR (issue 61): what the layer adds on top of the stages, side
by side in one run.

For each program (default: the dozen numeric loop kernels of bench/workloads/kernels and
the suite's Lua and SQLite), three builds through its own build system besides -O3:

    PGO+LTO           the expert's recipe by hand (bench/hand_recipe.py: -fprofile-generate,
                      the benchmark, llvm-profdata merge, -fprofile-use -flto, lld)
    tuned             `autopass record`, `autopass tune --time T`, `autopass apply`: the
                      stages, per-file flags and decisions carried in the IR tune chose
    tuned, no layer   the same database without its decisions, applied the same way: the
                      same stages and flags, so that the two differ by the layer alone
                      (two tunes would differ by their own noise too: one 4-minute tune
                      of the kernels verified PGO+LTO, the next none)

measured in interleaved rounds (CPU time of the run, every output must be -O3's), the
tuned build against the one without the layer and against the hand PGO+LTO, and each
once under cachegrind (instructions).  Also what a candidate of the layer costs to build
on the chosen stages: one decision on the hottest unit, the program built again
(ThinLTO keeps the unchanged modules' backend work in its cache; full LTO does not).

Usage: python bench/decision_layer.py [--programs kernels,lua5.4,sqlite3] [--time 10m]
           [--rounds 20] [--out decision-layer-out]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))
import hand_recipe as hr  # noqa: E402

from autopass_build import config as cfg  # noqa: E402
from autopass_build.candidates.evaluate import Evaluator  # noqa: E402
from autopass_build.core.decisions import Decision  # noqa: E402
from autopass_build.evidence.hotspots import load as load_profile  # noqa: E402
from autopass_build.evidence.inventory import of_unit  # noqa: E402
from autopass_build.store.index import Store  # noqa: E402
from autopass_build.tuning.decision_knobs import hot_loops  # noqa: E402


def candidate_seconds(build_dir: Path) -> dict:
    """One candidate of the layer built on the stages tune chose: the hottest unit with
    one decision on its hottest loop, the program linked again (its baseline built
    first, so that only the candidate's own work is timed)."""
    database = json.loads((build_dir / "autopass.flags.json").read_text())
    store = Store.open_existing(str(build_dir / ".autopass"))
    evaluator = Evaluator(store, cfg.load(str(build_dir / "autopass.toml")))
    from autopass_build.candidates import stages as st
    from autopass_build.tuning.stage_choice import opt_level

    composition = st.parse([s for s in (database.get("target") or {}).get("stages", [])
                            if s in ("lto", "thinlto")])
    flags = st.flags(composition, opt_level(evaluator))
    base = {u.id: flags.unit_flags for u in evaluator.units}
    evaluator.replayer.build(evaluator.target.output, base, flags.link_flags)
    profile = load_profile(store.dir)
    shares = profile.unit_shares()
    hot = max(evaluator.units, key=lambda u: shares.get(u.source_rel, 0.0))
    functions = {f.symbol: f.share for f in profile.functions if hot.source_rel in f.units}
    loops = hot_loops(of_unit(evaluator.replayer, hot), functions, evaluator.out_of_line(hot),
                      profile.inlined())
    if not loops:
        return {"unit": hot.source_rel, "seconds": None, "stages": st.name(composition)}
    decision = Decision("loop", loops[0].function, loops[0].path, loops[0].hash,
                        "unroll.count", 2)
    changed = {**base, hot.id: flags.unit_flags + decision.flags()}
    started = time.monotonic()
    evaluator.replayer.build(evaluator.target.output, changed, flags.link_flags)
    return {"unit": hot.source_rel, "stages": st.name(composition),
            "seconds": round(time.monotonic() - started, 1)}


def kept(built: hr.Variant, where: Path) -> hr.Variant:
    """The variant's program copied out of its tree, which the next build overwrites."""
    shutil.copy2(built.binary, where)
    return hr.Variant(built.tree, where, built.env, built.note)


def without_decisions(name: str, tree: Path, build_dir: Path, work: Path) -> hr.Variant:
    """The database tune wrote with every decision carried in the IR taken out of its
    entries, applied through the same build: the tuned program without the layer."""
    from autopass_build.core import decisions, flags_db

    case = hr.tc.CASES[name]
    path = build_dir / "autopass.flags.json"
    db = flags_db.load(str(path))
    shutil.copyfile(path, work / "with-decisions.flags.json")
    db.entries = {source: entry.replace(flags=decisions.without(entry.flags))
                  for source, entry in db.entries.items()}
    flags_db.save(str(path), db)
    hr.run(case.program.clean, build_dir, what=f"{name}: clean")
    hr.run([hr.AUTOPASS, "apply", "--", *case.build], build_dir, what=f"{name}: apply")
    shutil.copyfile(work / "with-decisions.flags.json", path)
    return kept(hr.variant(name, tree), work / "no-layer-bin")


def run_program(name: str, work: Path, limit: str, rounds: int, out: Path) -> dict:
    started = time.monotonic()
    hr.log(f"{name}: -O3, and the hand PGO+LTO")
    o3_tree, _ = hr.hand_build(name, work, "O3", "")
    profile, _ = hr.hand_profile(name, work)
    lto_tree, _ = hr.hand_build(name, work, "PGO-LTO",
                                f"-fprofile-use={profile} -flto -fuse-ld=lld")
    variants = {"-O3": hr.variant(name, o3_tree), "PGO+LTO": hr.variant(name, lto_tree)}
    hr.log(f"{name}: record, tune --time {limit}, apply")
    variants["tuned"], facts = hr.autopass(name, work, limit, "tuned")
    variants["tuned"] = kept(variants["tuned"], work / "tuned-bin")
    # tune's own account, in --out at once: kept whatever happens after it
    shutil.copyfile(work / f"{name}-tuned-tune.log", out / f"{name}-tuned-tune.log")
    if (Path(facts["build_dir"]) / "autopass.flags.json").is_file():
        hr.log(f"{name}: tune chose {facts['chose']}, {facts['entries']} entries, "
               f"{facts['decisions']} decisions; applying it without them")
        variants["tuned, no layer"] = without_decisions(name, Path(facts["tree"]),
                                                        Path(facts["build_dir"]), work)
    else:    # nothing verified: the tuned build is the recorded one, and so is this
        hr.log(f"{name}: tune wrote no database (nothing verified faster): the layer "
               "has nothing to add; its figure below is one build against itself")
        variants["tuned, no layer"] = kept(variants["tuned"], work / "no-layer-bin")
    measured = hr.measure(name, work, variants, rounds)
    times = measured["times"]
    counts = {label: hr.instructions(name, work, v) for label, v in variants.items()}
    rows = {label: {**hr.ratio(times, "-O3", label),
                    "instructions_speedup": hr._over(counts, "-O3", label),
                    "same_output": measured["same_output"][label]}
            for label in variants if label != "-O3"}
    try:
        candidate = candidate_seconds(Path(facts["build_dir"]))
    except Exception as error:          # a report of cost, never the reason to lose a run
        candidate = {"error": repr(error)[:300]}
    return {"program": name, "variants": rows,
            "layer": {**hr.ratio(times, "tuned, no layer", "tuned"),
                      "instructions": hr._over(counts, "tuned, no layer", "tuned")},
            "over_pgo_lto": {**hr.ratio(times, "PGO+LTO", "tuned"),
                             "instructions": hr._over(counts, "PGO+LTO", "tuned")},
            "tuned": facts, "candidate_build": candidate,
            "minutes": round((time.monotonic() - started) / 60)}


def report(results: list[dict]) -> str:
    out = []
    for r in results:
        out.append(f"\n{r['program']}: tuned chose {r['tuned']['chose']} with "
                   f"{r['tuned']['decisions']} decisions in {r['tuned']['entries']} entries")
        for label, row in r["variants"].items():
            out.append(f"  {label:<16} {row['speedup']:.3f}x [{row['low']:.3f}, "
                       f"{row['high']:.3f}] over -O3; instructions "
                       f"{hr._x(row['instructions_speedup'])}"
                       + ("" if row["same_output"] else "  OUTPUT DIFFERS"))
        layer, over = r["layer"], r["over_pgo_lto"]
        out.append(f"  the layer (tuned over tuned without it): {layer['speedup']:.3f}x "
                   f"[{layer['low']:.3f}, {layer['high']:.3f}]; instructions "
                   f"{hr._x(layer['instructions'])} (target 1.02x on two programs)")
        out.append(f"  tuned over the hand PGO+LTO: {over['speedup']:.3f}x [{over['low']:.3f}, "
                   f"{over['high']:.3f}]; instructions {hr._x(over['instructions'])} "
                   "(target 1.10x on the loop kernels)")
        out.append(f"  a candidate of the layer: {r['candidate_build']}")
    return "\n".join(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     epilog=__doc__.split("\n\n", 1)[1],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--programs", default="kernels,lua5.4,sqlite3")
    parser.add_argument("--time", default="10m", help="each tune's --time")
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--out", default="decision-layer-out")
    args = parser.parse_args()
    names = args.programs.split(",")
    unknown = [n for n in names if n not in hr.tc.CASES]
    if unknown:
        parser.error(f"unknown program {unknown}; known: {', '.join(hr.tc.CASES)}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    results: list[dict] = []
    started = time.monotonic()
    scratch = Path(tempfile.mkdtemp(prefix="autopass-layer-"))
    try:
        for name in names:
            work = scratch / name
            work.mkdir()
            results.append(run_program(name, work, args.time, args.rounds, out))
            (out / "decision_layer.json").write_text(json.dumps(
                {"results": results, "command": "python bench/decision_layer.py "
                 + " ".join(sys.argv[1:]), "date": time.strftime("%Y-%m-%d"),
                 "minutes": round((time.monotonic() - started) / 60)}, indent=1))
            hr.log(report(results[-1:]))
            shutil.rmtree(work, ignore_errors=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print(report(results))
    print(f"\n{round((time.monotonic() - started) / 60)} min; wrote {out}/decision_layer.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
