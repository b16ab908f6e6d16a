#!/usr/bin/env python3
"""Screening on real programs: measured evaluations needed with and without it, and with
knowledge transferred from the other programs versus learned from scratch.

For each program (tune_classical.CASES, built at -O3 by its own build system) and each
seed, the same strategy and budget three times:

    plain        every candidate measured (autopass tune --no-screen)
    scratch      --screen, knowledge from this run only
    transfer     --screen, starting from what the scratch runs of the OTHER programs
                 measured with the same seed (run after all scratch runs)

With a random strategy the three runs propose the same candidates in the same order, so
the comparison is exactly "which of them had to be measured".  Where the best candidate
falls in that order is luck, hence several seeds.

The default metric is callgrind instructions on lighter inputs (LIGHT): deterministic,
so "reached 95 % of the best" is about the search, not about noise; --metric cpu uses
the suite's ~1 s workloads instead.

Reported per run: evaluations (measured) until the best clear gain reached 95 % of the
plain run's final best, candidates screened out, the tuning best, and an independent
A/B of the tuned build against -O3.  Target (issue 9): >= 30 % fewer evaluations on the
geomean, final gain not worse beyond its interval.

Seeds can run as separate processes (one per core; callgrind counts do not mind the
load) and be printed as one table with --render a.json,b.json.

Recorded mode, the cheap way to many seeds and to comparing screening options: with
random search the candidates of a seed come in the same order whatever is screened, and
the metric is deterministic, so measuring each candidate once is enough.  --record
measures the first --pool candidates of each seed, all of them, with their code
features (one tuning run per program and seed, about 2/3 of the three live runs'
cost); --replay then runs plain, scratch and transfer over those records through
screen.Ranker, the decision `autopass tune --screen` makes (tests/test_screen.py checks
a replayed journal decides as its live run did), in seconds, with --options to try
other screen.Options.  The final gain there is the recorded measurement of the best
candidate (deterministic), not a separate A/B.

Usage: python bench/screen.py [--programs bzip2,lua5.4,libzstd] [--strategy random]
           [--budget 16] [--seeds 0,1,2] [--metric instructions] [--out FILE.json]
       python bench/screen.py --record POOLS.json [--pool 32] [--seeds ...]
       python bench/screen.py --replay POOLS.json[,...] [--budget 16] [--options JSON]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import tune_classical as tc  # noqa: E402

from autopass_build.evidence.hotspots import load as load_profile  # noqa: E402
from autopass_build.tuning import composite, screen  # noqa: E402
from autopass_build.tuning.journal import Entry, Phase  # noqa: E402
from autopass_build.tuning.knowledge import Knowledge  # noqa: E402
from autopass_build.tuning.tuner import Tuner, TuneRequest  # noqa: E402

RUNS = ("plain", "scratch", "transfer")


@dataclass(frozen=True)
class Light:
    """A benchmark that takes a few seconds under callgrind (the suite's take ~1 s
    natively, ~50 s there), and the build when the default one is not deterministic."""
    command: Callable[[Path], list[str]]
    build: tuple[str, ...] | None = None


LIGHT = {
    "bzip2": Light(lambda work: ["{exe}", "-9", "-c",
                                 str(tc.text_input(work / "bz-light.txt", 0.3))]),
    # Lua seeds its string hashes and its sort pivots from the clock and addresses, so
    # its instruction counts vary run to run; fixed seeds make them repeat exactly.
    "lua5.4": Light(lambda work: ["{exe}", str(HERE / "workloads" / "lua_mix.lua"), "1"],
                    ("make", "posix", "-j2", "MYCFLAGS=-O3 '-Dluai_makeseed(L)=0' "
                                                "'-Dl_randomizePivot()=0'")),
    "libzstd": Light(lambda work: ["{exe}", "-q", "-c", "-7",
                                   str(tc.text_input(work / "zs-light.txt", 0.5))]),
}


def one_run(store, config, name: str, label: str, seed: int, args, work: Path,
            knowledge: Path | None) -> dict:
    request = TuneRequest(strategy=args.strategy, budget=args.budget, seed=seed, stages=(),
                          max_units=4, screen=knowledge is not None,
                          knowledge=str(knowledge) if knowledge else "",
                          flags_db=str(work / f"{name}-{label}-{seed}.flags.json"))
    started = time.monotonic()
    result = Tuner(store, config, request,
                   lambda m: None if m.startswith("  ") else tc.log(f"{name}/{label}/{seed}: {m}")).run()
    row = {"program": name, "run": label, "seed": seed, "evaluations": result.measured,
           "screened": len(result.journal.of_phase(Phase.SCREENED)),
           "trace": tc.best_trace(result.journal), "seconds": round(time.monotonic() - started),
           "tuning_best": result.best.ratio if result.best else None,
           "winners": {w.source: " ".join(w.flags) for w in result.winners}}
    row.update(tc.verify(store, config, result, name, label))
    return row


def record_pool(store, config, name: str, seed: int, size: int, work: Path) -> list[dict]:
    """The first `size` candidates of the strategy for `seed`, every one measured, each
    with its code features and its units' attributed effects (exact instruction ratios
    under the instructions metric): a recorded cache that screening policies replay."""
    knowledge = work / f"pool-knowledge-{seed}.json"     # needed by the screener, unused
    request = TuneRequest(strategy="random", budget=size + composite.RESERVED, seed=seed, max_units=4, stages=(),
                          screen=True, knowledge=str(knowledge), attribute=True,
                          screen_options={"min_samples": 10 ** 9},   # never screen out
                          flags_db=str(work / f"{name}-pool-{seed}.flags.json"))
    result = Tuner(store, config, request,
                   lambda m: None if m.startswith("  ") else tc.log(f"{name}/pool/{seed}: {m}")).run()
    knowledge.unlink(missing_ok=True)
    return [e.to_json() for e in result.journal.of_phase(Phase.SEARCH)]


def replay_run(pool: list[Entry], name: str, seed, label: str, budget: int,
               ranker: screen.Ranker | None, shares: dict[str, float] | None = None) -> dict:
    """What a tuning run would have measured, screening through `ranker` (None: plain),
    with the recorded candidates in their order: the same decisions as `autopass tune`
    makes (screen.Ranker is its decision), without compiling or measuring again."""
    measured, screened, best, trace = 0, 0, 0.0, []
    for e in pool:
        if measured >= budget:
            break
        predicted = None
        if ranker and e.features:
            judgement = ranker.decide(e.features, e.unit_features, shares)
            if not judgement.measure:
                screened += 1
                continue
            predicted = judgement.predicted
        measured += 1
        if e.verdict == "faster" and e.ratio is not None:
            best = max(best, 1 - e.ratio)
        trace.append(1 - best if best > 0 else None)
        if ranker and (sample := screen.sample_of(e, name)):
            ranker.learn(sample, predicted, screen.unit_samples_of(e, name))
    final = 1 - best if best > 0 else None
    speedup = 1 / final if final else None        # deterministic: a point, no interval
    return {"program": name, "run": label, "seed": seed, "evaluations": measured,
            "screened": screened, "trace": trace, "tuning_best": final,
            "speedup": speedup, "low": speedup, "high": speedup,
            "verdict": "faster" if final else "no gain",
            "samples": (ranker.samples + ranker.unit_samples) if ranker else [],  # Sample
            "pool_short": measured < budget,
            "checked": ranker.checked if ranker else []}


def replay(files: str, args) -> list[dict]:
    """The three runs of every recorded program and seed, replayed (seconds, not hours):
    transfer starts from what the other programs' scratch replays measured, as live.
    With --orders N each seed's candidates are also replayed in N-1 shuffled orders
    ("seed:k"): random search draws independent candidates, so another order of the same
    ones is as likely a run as the recorded one, and where the best falls stops being
    one draw of luck per seed."""
    try:
        options = screen.Options(**json.loads(args.options or "{}"))
    except (ValueError, TypeError) as error:
        fields = ", ".join(screen.Options.__dataclass_fields__)
        sys.exit(f"screen.py: --options {args.options!r}: {error}; a JSON object of "
                 f"screen.Options fields ({fields})")
    pools: dict[int, dict[str, list]] = {}
    shares: dict[str, dict[str, float]] = {}
    for f in files.split(","):
        recorded, recorded_shares = _recorded(Path(f))
        shares.update(recorded_shares)
        for name, by_seed in recorded.items():
            for seed, pool in by_seed.items():
                pools.setdefault(int(seed), {})[name] = pool
    truth = None
    if args.oracle:
        every = [e for by_name in pools.values() for pool in by_name.values() for e in pool]
        truth = {json.dumps(e.features, sort_keys=True): math.log(e.ratio or 2.0)
                 for e in every}
        truth.update({json.dumps(e.unit_features[u.source], sort_keys=True): math.log(u.ratio)
                      for e in every for u in e.effects if u.source in (e.unit_features or {})})
    everything = None        # --transfer all: every recorded candidate of each program
    if args.transfer == "all":
        everything = {}
        for by_name in pools.values():
            for name, pool in by_name.items():
                everything.setdefault(name, []).extend(
                    sample for e in pool if (sample := screen.sample_of(e, name)))
                everything[name].extend(u for e in pool for u in screen.unit_samples_of(e, name))
    tasks = [({name: _reordered(pool, seed, k) for name, pool in by_name.items()},
              f"{seed}:{k}" if args.orders > 1 else seed, seed, options, args.budget,
              everything, truth, shares)
             for seed, by_name in sorted(pools.items()) for k in range(args.orders)]
    with ProcessPoolExecutor(args.jobs) as pool:    # the model fits are the cost
        return [row for rows in pool.map(replay_seed, *zip(*tasks)) for row in rows]


def _recorded(path: Path) -> tuple[dict[str, dict[str, list[Entry]]], dict[str, dict]]:
    """The pools by program and seed, and each program's unit shares (fractions)."""
    try:
        data = json.loads(path.read_text())
        return ({name: {seed: [_entry(r) for r in pool] for seed, pool in by_seed.items()}
                 for name, by_seed in data["programs"].items()}, data.get("shares", {}))
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:
        sys.exit(f"screen.py: {path} is not a --record file ({error!r}); make one with "
                 "python bench/screen.py --record FILE.json")


def _entry(record: dict) -> Entry:
    """A recorded candidate: a journal entry, or the shorter record of files made before
    entries were typed (key "search:<config>", no n, no phase)."""
    if "config" not in record:
        record = {"n": 0, "phase": "search", "config": str(record["key"]).split(":", 1)[1],
                  **{k: record.get(k) for k in ("flags", "outcome", "verdict", "ratio",
                                                  "features")}}
    return Entry.from_json(record)


class Oracle(screen.Ranker):
    """A perfect model: predicts each candidate's measured log ratio (a failed one's as
    twice as slow).  What screening could save under these options at best, apart
    from what the model gets wrong."""
    truth: dict[str, float]         # json of the features -> measured log ratio

    def _fitted(self, level, training):
        return self

    def predict(self, features: list[dict]) -> list[float]:
        return [self.truth[json.dumps(f, sort_keys=True)] for f in features]


def _reordered(pool: list[Entry], seed: int, k: int) -> list[Entry]:
    if k == 0:
        return pool
    order = list(pool)
    random.Random(f"{seed}:{k}").shuffle(order)
    return order


def replay_seed(pools: dict[str, list], label, seed: int, options: screen.Options,
                budget: int, everything: dict[str, list] | None,
                truth: dict[str, float] | None, shares: dict[str, dict]) -> list[dict]:
    def ranker(known: list[dict], name: str) -> screen.Ranker:
        if truth is None:
            return screen.Ranker(known, name, options, seed)
        oracle = Oracle(known, name, options, seed)
        oracle.truth = truth
        return oracle

    rows, scratch = [], {}
    for name, pool in pools.items():
        rows.append(replay_run(pool, name, label, "plain", budget, None))
        scratch[name] = replay_run(pool, name, label, "scratch", budget,
                                   ranker([], name), shares.get(name))
        rows.append(scratch[name])
    for name, pool in pools.items():
        source = everything or {other: scratch[other]["samples"] for other in pools}
        known = [s for other in source if other != name for s in source[other]]
        rows.append(replay_run(pool, name, label, "transfer", budget,
                               ranker(known, name), shares.get(name)))
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--programs", default="bzip2,lua5.4,libzstd")
    parser.add_argument("--strategy", default="random")
    parser.add_argument("--budget", type=int, default=16)
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--metric", default="instructions", choices=tc.cfg.METRICS)
    parser.add_argument("--out")
    parser.add_argument("--render", metavar="ROWS_JSON[,ROWS_JSON...]",
                        help="only print the table again from earlier --out files")
    parser.add_argument("--record", metavar="POOLS_JSON",
                        help="measure the first --pool candidates of each seed, every one, "
                             "into this file (for --replay) instead of running the three runs")
    parser.add_argument("--pool", type=int, default=32)
    parser.add_argument("--replay", metavar="POOLS_JSON[,POOLS_JSON...]",
                        help="replay the three runs over --record files (no measuring)")
    parser.add_argument("--options", help="screen.Options fields as JSON, for --replay")
    parser.add_argument("--transfer", choices=("scratch", "all"), default="scratch",
                        help="--replay's transfer knowledge: the other programs' scratch "
                             "runs of the same seed (as live), or every recorded candidate "
                             "of the other programs (a cache that many runs filled)")
    parser.add_argument("--oracle", action="store_true",
                        help="--replay with a perfect model (the measured ratios as "
                             "predictions): the most these options could save")
    parser.add_argument("--jobs", type=int, default=os.cpu_count(),
                        help="processes for --replay")
    parser.add_argument("--orders", type=int, default=1,
                        help="--replay each seed's candidates in this many orders (the "
                             "recorded one and shuffles of it)")
    args = parser.parse_args()
    for name in ("orders", "jobs", "pool", "budget"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be 1 or more (got {getattr(args, name)})")
    if (args.record or args.replay) and args.strategy != "random":
        parser.error("--record and --replay need --strategy random: another strategy's "
                     "candidates depend on what was screened, so a record cannot stand in")
    names = args.programs.split(",")
    if args.replay:
        rows = replay(args.replay, args)
        if args.out:
            Path(args.out).write_text(json.dumps([dict(r, samples=[], checked=[])
                                                  for r in rows]))
        report(rows, args, 0)
        return 0
    if args.render:
        rows = [r for f in args.render.split(",") for r in json.loads(Path(f).read_text())]
        report(rows, args, 0)
        return 0
    seeds = [int(s) for s in args.seeds.split(",")]
    if args.record:
        return record(names, seeds, args)
    rows, started = [], time.monotonic()

    def save(row: dict) -> None:
        rows.append(row)
        if args.out:
            Path(args.out).write_text(json.dumps(rows, indent=1))

    with tempfile.TemporaryDirectory(prefix="autopass-screen-") as scratch:
        prepared = {name: prepare(name, Path(scratch) / name, args.metric) for name in names}
        for seed in seeds:
            for name, (store, config, work) in prepared.items():
                save(one_run(store, config, name, "plain", seed, args, work, None))
                save(one_run(store, config, name, "scratch", seed, args, work,
                             work / f"knowledge-{seed}.json"))
            for name, (store, config, work) in prepared.items():
                shared = Knowledge(str(work / f"transfer-{seed}.json"))
                for other in names:
                    if other != name:
                        shared.add(Knowledge.load(
                            str(prepared[other][2] / f"knowledge-{seed}.json")).samples)
                shared.save()
                tc.log(f"{name}/transfer/{seed}: {len(shared.samples)} evaluations from "
                       f"{len(shared.programs())} other program(s)")
                save(one_run(store, config, name, "transfer", seed, args, work,
                             work / f"transfer-{seed}.json"))
    report(rows, args, time.monotonic() - started)
    return 0


def record(names: list[str], seeds: list[int], args) -> int:
    pools: dict = {"metric": args.metric, "pool": args.pool, "programs": {}, "shares": {}}
    with tempfile.TemporaryDirectory(prefix="autopass-screen-") as scratch:
        prepared = {name: prepare(name, Path(scratch) / name, args.metric) for name in names}
        for name, (store, _, _) in prepared.items():     # what Screener.judge composes by
            hot = load_profile(store.dir)
            pools["shares"][name] = {u: s / 100 for u, s in hot.unit_shares().items()} \
                if hot else {}
        for seed in seeds:
            for name, (store, config, work) in prepared.items():
                pool = record_pool(store, config, name, seed, args.pool, work)
                pools["programs"].setdefault(name, {})[str(seed)] = pool
                Path(args.record).write_text(json.dumps(pools))
    return 0


def prepare(name: str, work: Path, metric: str) -> tuple:
    work.mkdir()
    light = LIGHT.get(name) if metric == "instructions" else None
    store, config = tc.prepare(name, work, metric, light and light.command,
                               light and light.build)
    return store, config, work


TABLE_PAIRS = 60     # more program-seed pairs than this (--orders): the summary only


def report(rows: list[dict], args, seconds: float) -> None:
    by = {(r["program"], r.get("seed", 0), r["run"]): r for r in rows}
    pairs = sorted({(r["program"], r.get("seed", 0)) for r in rows}, key=str)
    table = len(pairs) <= TABLE_PAIRS
    # a replay's final gain is the best candidate's recorded measurement, not an A/B
    verified = "recorded" if any("pool_short" in r for r in rows) else "verified"
    print(f"\nscreen: {args.strategy}, budget {args.budget}, metric {args.metric}, "
          f"{time.strftime('%Y-%m-%d')}, {round(seconds / 60)} min")
    if table:
        print(f"{'program':<9} {'seed':>4} {'run':<9} {'to 95% of plain':>15} "
              f"{'screened':>8} {'tuning best':>11} {verified + ' vs -O3 [95% CI]':<28} verdict")
    ratios: dict[tuple[str, str], list[float]] = {}     # (run, program) -> steps / plain's
    for name, seed in pairs:
        plain = by.get((name, seed, "plain"))
        target = plain["tuning_best"] if plain else None
        plain_steps = tc.reached(plain["trace"], target) if plain else None
        for run in RUNS:
            r = by.get((name, seed, run))
            if r is None:
                print(f"{name:<9} {seed:>4} {run:<9} (not run)")
                continue
            steps = tc.reached(r["trace"], target)
            if run != "plain" and plain_steps:
                # not reached within the budget counts as the whole budget
                ratios.setdefault((run, name), []).append((steps or args.budget) / plain_steps)
            if table:
                speed = (f"{r['speedup']:.4f}x [{r['low']:.4f}, {r['high']:.4f}]"
                         if r["speedup"] else "-")
                best = f"{r['tuning_best']:.4f}" if r["tuning_best"] else "none"
                print(f"{name:<9} {seed:>4} {run:<9} {steps or '-':>15} {r['screened']:>8} "
                      f"{best:>11} {speed:<28} {r['verdict']}")
    complete = [k for k in pairs if all((*k, run) in by for run in RUNS)]
    if complete:
        speedups = {run: [by[(*k, run)]["speedup"] or 1.0 for k in complete] for run in RUNS}
        gains = "; ".join(f"{run} {tc.geomean(v):.4f}x" for run, v in speedups.items())
        print(f"geomean {verified} speedup over -O3, {len(complete)} program-seed pair(s) with "
              f"all three runs: {gains}")
    short = [r for r in rows if r.get("pool_short")]
    if short:
        print(f"{len(short)} replayed run(s) ran out of recorded candidates before the budget "
              "(counted as they stand; a larger --pool would let them go on)")
    for run in RUNS[1:]:
        ranked = _ranking(r["checked"] for r in rows if r["run"] == run and r.get("checked"))
        if ranked:
            print(f"{run}: Kendall tau of the model's predictions against the measurements "
                  f"in each run (4 or more), mean {ranked}")
    for run in RUNS[1:]:
        values = [v for (r, _), vs in ratios.items() if r == run for v in vs]
        if not values:
            print(f"{run}: no program where the plain run found a clear gain; nothing to "
                  "compare")
            continue
        each = ", ".join(f"{name} {tc.geomean(vs):.3f}" for (r, name), vs in
                         sorted(ratios.items()) if r == run)
        print(f"geomean evaluations to 95 % of plain's best, {run} / plain: "
              f"{tc.geomean(values):.3f} over {len(values)} program-seed pair(s) "
              f"(target <= 0.75 with per-unit labels; {each})")


def _ranking(checked_runs) -> str:
    from scipy.stats import kendalltau

    taus = [kendalltau(*zip(*c)).statistic for c in checked_runs if len(c) >= 4]
    taus = [t for t in taus if not math.isnan(t)]
    return f"{sum(taus) / len(taus):.2f} over {len(taus)} runs" if taus else ""


if __name__ == "__main__":
    sys.exit(main())
