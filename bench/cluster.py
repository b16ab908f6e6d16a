#!/usr/bin/env python3
"""Tuning on a Ray cluster, measured here on real clusters of 1-3 nodes started on this
machine (ray.cluster_utils.Cluster), and modelled past it.

    python bench/cluster.py                          # bzip2, budget 8: about 20 min
    python bench/cluster.py --program lua5.4 --budget 8 --aa 20

In one run, on one recorded program (a real Debian source, tune_classical.CASES):

1. overhead: the same search (random strategy: its candidates do not depend on the
   measured values; fixed pairs: every candidate costs the same) tuned locally and on a
   one-node cluster, interleaved, twice each, the object cache warm for both: the
   cluster path's cost in tuning time against local (target: <= 1.10x).
2. A/A: `--aa` A/A comparisons (the baseline against itself) on a two-node cluster,
   both nodes measuring at once, and as many locally: how often each calls "faster"
   (target: <= 5 %).
3. scaling: the same search on 1, 2 and 3 nodes, wall time against the model's.
4. the model: from the measured step costs (a candidate's build, one pair, the driver's
   own time per evaluation, the start of a run), the run's wall time at 1, 4, 16 and 64
   nodes and where the driver saturates.
6. stages (`--parts stages`, `--stages lto` or `pgo,lto`): the stages and the search on
   top of them, locally and on a one-node cluster, interleaved: what measuring each
   composition's look (and training the PGO profile) on a node (issue 63, item 6) costs
   in the run's time, and the verdicts each side gave.
5. shipping (`--parts shipping`): the project packed (its size, the seconds it takes),
   and one-node runs with [cluster].ship = never, always (the node unpacks it) and
   always again (its cache holds it): what shipping adds to a run's start, and its
   projection to N nodes when the driver's uplink sends every copy (`--bandwidth`).

Output: cluster-out/cluster.json and a Markdown summary on stdout.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import tune_classical as tc  # noqa: E402

from autopass_build.candidates.evaluate import Evaluator  # noqa: E402
from autopass_build.measuring.stats import FASTER  # noqa: E402
from autopass_build.tuning.journal import STAGE_PHASES, Phase  # noqa: E402
from autopass_build.tuning.measuring import TuneError  # noqa: E402
from autopass_build.tuning.tuner import Tuner, TuneRequest  # noqa: E402

SLOT = {"autopass_bench": 1}


def start_cluster(nodes: int):
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    for _ in range(nodes):
        cluster.add_node(num_cpus=1, resources=SLOT)
    cluster.wait_for_nodes()
    return cluster


def tune_once(store, config, budget: int, seed: int, work: Path, label: str,
              address: str = "", stages: tuple[str, ...] = ()) -> dict:
    """One search (with `stages` before it, none by default), locally or on the cluster
    at `address`: its wall time, the driver's own CPU time, and its evaluations."""
    import psutil

    config = replace(config, cluster=replace(config.cluster, address=address))
    request = TuneRequest(strategy="random", budget=budget, seed=seed, max_units=4,
                          stages=stages, attribute=False,
                          flags_db=str(work / f"{label}.flags.json"))
    me = psutil.Process()
    said: list[tuple[float, str]] = []

    def show(message: str) -> None:
        said.append((time.monotonic(), message))
        if not message.startswith("  "):
            tc.log(f"{label}: {message}")

    cpu_before, started = sum(me.cpu_times()[:2]), time.monotonic()
    result = Tuner(store, config, request, show).run()
    seconds = time.monotonic() - started
    # the PGO training: from its first line to the first composition's
    trained = [t for t, m in said if m.startswith("training a PGO profile")]
    looked = [t for t, m in said if m.startswith("[stage 1 of")]
    # CS-PGO's training: from its first line to its step's look
    cs_trained = [t for t, m in said if m.startswith(("cluster: training the CS-PGO",
                                                       "CS-PGO: building"))]
    cs_looked = [t for t, m in said if "CS-PGO against the build without it" in m]
    driver_cpu = sum(me.cpu_times()[:2]) - cpu_before
    journal = result.journal
    evaluations = [e for e in journal.entries if e.measured]
    return {"label": label, "seconds": round(seconds, 2), "driver_cpu": round(driver_cpu, 3),
            "training_seconds": round(looked[0] - trained[0], 2) if trained and looked
            else None,
            "cs_training_seconds": round(cs_looked[0] - cs_trained[0], 2)
            if cs_trained and cs_looked else None,
            "evaluations": len(evaluations),
            "eval_seconds": round(sum(e.timing.seconds for e in evaluations), 2),
            # the search's candidates (confirmations follow the noise, so not those)
            "configs": [e.config for e in journal.entries if e.phase == Phase.SEARCH],
            "stage_looks": [{"stages": e.stages, "node": e.node, "ratio": e.ratio,
                             "verdict": str(e.verdict), "seconds": e.timing.seconds}
                            for e in journal.entries if e.phase in STAGE_PHASES]}


def stages_placed(store, config, budget: int, seed: int, work: Path, rounds: int,
                  stages: tuple[str, ...] = ("lto",)) -> dict:
    """The stage phase (`stages`, then the search on top) locally and on a one-node
    cluster, interleaved: what measuring each composition's look (and, with PGO, its
    training run) on a node costs in the run's time, and whether the node's verdicts are
    the local ones.  With PGO every run trains its profile anew (the store's record of
    the last one is removed before it), so both sides pay the training."""
    from autopass_build.candidates.bolt import BOLT_FILE
    from autopass_build.candidates.pgo import CS_FILE, PGO_FILE

    def fresh_profile() -> None:       # and CS-PGO's and BOLT's, when they are steps
        for record in (PGO_FILE, CS_FILE, BOLT_FILE):
            (Path(store.dir) / record).unlink(missing_ok=True)

    fresh_profile()
    tune_once(store, config, budget, seed, work, "stages-warm-up", stages=stages)
    cluster = start_cluster(1)
    try:
        runs = []
        for r in range(rounds):
            fresh_profile()
            runs.append(tune_once(store, config, budget, seed, work, f"stages-local-{r}",
                                  stages=stages))
            fresh_profile()
            runs.append(_on_cluster_again_if_noisy(
                lambda: tune_once(store, config, budget, seed, work, f"stages-cluster1-{r}",
                                  cluster.address, stages=stages)))
    finally:
        cluster.shutdown()
    local = [r for r in runs if "local" in r["label"]]
    remote = [r for r in runs if "cluster" in r["label"]]
    return {"stages": list(stages), "runs": runs,
            "ratio": round(sum(r["seconds"] for r in remote) / sum(r["seconds"] for r in local), 3),
            "looks_on_nodes": all(look["node"] for r in remote for look in r["stage_looks"]),
            "training_seconds": {r["label"]: r["training_seconds"] for r in runs},
            "cs_training_seconds": {r["label"]: r["cs_training_seconds"] for r in runs},
            "verdicts": {r["label"]: [look["verdict"] for look in r["stage_looks"]]
                         for r in runs}}


def _on_cluster_again_if_noisy(run: Callable[[], dict]) -> dict:
    """A cluster run, started once more when its one node's A/A check called a
    difference (about one start in twenty, by the check's level) and the run stopped."""
    try:
        return run()
    except TuneError as error:
        tc.log(f"the run stopped ({error}); once more")
        return run()


def overhead(store, config, budget: int, seed: int, work: Path, rounds: int) -> dict:
    tune_once(store, config, budget, seed, work, "warm-up")      # the object cache, warm
    cluster = start_cluster(1)
    try:
        runs = []
        for r in range(rounds):
            runs.append(tune_once(store, config, budget, seed, work, f"local-{r}"))
            runs.append(tune_once(store, config, budget, seed, work, f"cluster1-{r}",
                                  cluster.address))
    finally:
        cluster.shutdown()
    local = [r["seconds"] for r in runs if r["label"].startswith("local")]
    remote = [r["seconds"] for r in runs if r["label"].startswith("cluster")]
    same = len({tuple(r["configs"]) for r in runs}) == 1
    return {"runs": runs, "ratio": round(sum(remote) / sum(local), 3), "same_candidates": same}


def aa_checks(store, config, count: int) -> dict:
    """`count` A/A comparisons on two nodes at once, and `count` on this machine."""
    from autopass_build.cluster.dispatch import ClusterMeasurer
    from autopass_build.cluster.node_bench import Baseline

    evaluator = Evaluator(store, config)
    local, widths = [], {"local": [], "cluster": []}
    for i in range(count):
        e = evaluator.evaluate({}, None, config.measure, measure_identical=True)
        local.append(e.comparison.verdict if e.comparison else "failed")
        if e.comparison and e.comparison.estimate:
            widths["local"].append(round(e.comparison.estimate.half_width, 4))
        tc.log(f"A/A local {i + 1}/{count}: {local[-1]}")
    cluster = start_cluster(2)
    remote = []
    try:
        measurer = ClusterMeasurer(cluster.address, "", 0.49, tc.log)
        measurer.start(Baseline(store.dir, config, evaluator.target.output_rel, {}, ()),
                       config.measure)
        import ray

        benches = measurer.verdict_benches
        while len(remote) < count:
            refs = [b.handle.aa.remote(config.measure) for b in benches]
            for result in ray.get(refs)[:count - len(remote)]:
                c = result.evaluation.comparison
                remote.append(c.verdict if c else "failed")
                if c and c.estimate:
                    widths["cluster"].append(round(c.estimate.half_width, 4))
            tc.log(f"A/A cluster {len(remote)}/{count}: {remote[-len(refs):]}")
        measurer.close()
    finally:
        cluster.shutdown()
    return {"local": [str(v) for v in local], "cluster": [str(v) for v in remote],
            "half_widths": widths,
            "local_faster": sum(v == FASTER for v in local) / count,
            "cluster_faster": sum(v == FASTER for v in remote) / count}


def scaling(store, config, budget: int, seed: int, work: Path, most: int) -> list[dict]:
    rows = []
    for nodes in range(1, most + 1):
        cluster = start_cluster(nodes)
        try:
            rows.append({"nodes": nodes, **tune_once(store, config, budget, seed, work,
                                                     f"scale{nodes}", cluster.address)})
        finally:
            cluster.shutdown()
    return rows


def shipping(store, config, budget: int, seed: int, work: Path) -> dict:
    """What shipping the project costs: packing it, and a one-node run's time with the
    project shipped (the node fetching and unpacking it) and shipped again (cached)."""
    import os

    from autopass_build.cluster.shipping import NODE_CACHE_ENV, pack

    started = time.monotonic()
    archive = pack(os.path.dirname(store.dir), store.dir)
    pack_seconds = time.monotonic() - started
    os.environ[NODE_CACHE_ENV] = str(work / "node-cache")     # a fresh cache for the node
    cluster = start_cluster(1)
    runs = {}
    try:
        for label, mode in (("ship-never", "never"), ("ship-always", "always"),
                            ("ship-cached", "always")):
            shipped = replace(config, cluster=replace(config.cluster, ship=mode))
            runs[label] = tune_once(store, shipped, budget, seed, work, label, cluster.address)
    finally:
        cluster.shutdown()
    plain = runs["ship-never"]["seconds"]
    return {"bytes": len(archive), "pack_seconds": round(pack_seconds, 2),
            "runs": list(runs.values()),
            "first_cost": round(runs["ship-always"]["seconds"] - plain, 2),
            "cached_cost": round(runs["ship-cached"]["seconds"] - plain, 2)}


def shipping_model(found: dict, nodes: int, bandwidth: float) -> float:
    """Seconds shipping adds to a run on `nodes` nodes: the pack, every copy sent from
    the driver (`bandwidth` bytes/s, the worst case: Ray may fetch from a node that has
    it), and one node's unpacking (measured here beyond the pack, in parallel on all)."""
    unpack = max(0.0, found["first_cost"] - found["pack_seconds"])
    return found["pack_seconds"] + nodes * found["bytes"] / bandwidth + unpack


def model(eval_seconds: float, driver_seconds: float, start_seconds: float, budget: int,
          batch_limit: int, nodes: int) -> dict:
    """A search of `budget` candidates on `nodes` measuring nodes: batches of
    min(nodes, batch_limit) run side by side, each as long as one evaluation, and the
    driver handles every result in turn.  The driver saturates when the results of a
    batch take it longer than the batch itself."""
    width = max(1, min(nodes, batch_limit))
    batches = math.ceil(budget / width)
    per_batch = max(eval_seconds, width * driver_seconds)
    return {"nodes": nodes, "width": width,
            "seconds": round(start_seconds + batches * per_batch, 1),
            "driver_bound": width * driver_seconds > eval_seconds}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--program", default="bzip2", choices=sorted(tc.CASES))
    parser.add_argument("--budget", type=int, default=8)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=2, help="overhead rounds (each: both)")
    parser.add_argument("--aa", type=int, default=20, help="A/A comparisons each way")
    parser.add_argument("--pairs", type=int, default=6, help="pairs per comparison (fixed)")
    parser.add_argument("--most-nodes", type=int, default=3)
    parser.add_argument("--out", default="cluster-out")
    parser.add_argument("--parts", default="overhead,aa,scaling,shipping,stages",
                        help="which parts to run (the model needs overhead and scaling)")
    parser.add_argument("--stages", default="lto",
                        help="the stages of --parts stages, comma-separated (pgo,lto: the "
                             "PGO training on the node too; pgo,lto,cspgo,bolt: CS-PGO's "
                             "and BOLT's training runs and steps too)")
    parser.add_argument("--bandwidth", type=float, default=117e6,
                        help="the driver's uplink in bytes/s for the shipping projection "
                             "(default 117e6: 1 Gbit/s)")
    args = parser.parse_args()
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    store, config = tc.prepare(args.program, out / "work", "cpu")
    # fixed pairs: every candidate costs the same, locally and on the cluster; the A/A
    # gate wide open: this bench reports the A/A figures rather than acting on them
    config = replace(config, measure=replace(config.measure, min_pairs=args.pairs,
                                             max_pairs=args.pairs),
                     cluster=replace(config.cluster, aa_noise=0.49))
    found = {"program": args.program, "budget": args.budget, "pairs": args.pairs}
    parts = args.parts.split(",")
    if "aa" in parts:
        found["aa"] = aa_checks(store, config, args.aa)
    if "overhead" in parts:
        found["overhead"] = overhead(store, config, args.budget, args.seed, out, args.rounds)
    if "scaling" in parts:
        found["scaling"] = scaling(store, config, args.budget, args.seed, out, args.most_nodes)
    if "stages" in parts:
        found["stages"] = stages_placed(store, config, args.budget, args.seed, out,
                                        args.rounds, tuple(args.stages.split(",")))
    if "shipping" in parts:
        found["shipping"] = shipping(store, config, args.budget, args.seed, out)
        found["shipping"]["model"] = {n: round(shipping_model(found["shipping"], n,
                                                              args.bandwidth), 1)
                                      for n in (1, 4, 16, 64)}
    if "overhead" not in parts or "scaling" not in parts:
        (out / "cluster.json").write_text(json.dumps(found, indent=1))
        print(json.dumps({k: v for k, v in found.items() if k != "overhead"}, indent=1))
        return 0
    local = [r for r in found["overhead"]["runs"] if r["label"].startswith("local")]
    remote = [r for r in found["overhead"]["runs"] if r["label"].startswith("cluster")]
    per_eval = sum(r["eval_seconds"] for r in local) / sum(r["evaluations"] for r in local)
    # the driver's own CPU per evaluation on the cluster path (Ray's calls included)
    driver = sum(r["driver_cpu"] for r in remote) / sum(r["evaluations"] for r in remote)
    one = found["scaling"][0]
    start = max(0.0, one["seconds"] - one["eval_seconds"])   # join, benches, A/A, the rest
    found["costs"] = {"evaluation": round(per_eval, 2), "driver_per_evaluation": round(driver, 3),
                      "start": round(start, 1)}
    found["model_here"] = [model(per_eval, driver, start, args.budget, 7, r["nodes"])
                           for r in found["scaling"]]
    # budget 40 with a population sized to the cluster (a batch is a generation)
    found["model"] = [model(per_eval, driver, start, 40, n, n) for n in (1, 4, 16, 64)]
    found["driver_saturates_at"] = round(per_eval / driver) if driver else None
    (out / "cluster.json").write_text(json.dumps(found, indent=1))
    print(summary(found))
    return 0


def summary(found: dict) -> str:
    o, a = found["overhead"], found["aa"]
    lines = [f"## Cluster: {found['program']}, random search, budget {found['budget']}, "
             f"{found['pairs']} pairs per comparison", "",
             f"- one-node cluster against local: **{o['ratio']:.3f}x** the tuning time "
             f"(same candidates: {o['same_candidates']}); runs: "
             + ", ".join(f"{r['label']} {r['seconds']:.1f} s" for r in o["runs"]),
             f"- A/A false \"faster\": cluster (2 nodes at once) **{a['cluster_faster']:.0%}**"
             f" of {len(a['cluster'])}, local {a['local_faster']:.0%} of {len(a['local'])}",
             "", "| nodes | measured (s) | model (s) |", "|---|---|---|"]
    for run, predicted in zip(found["scaling"], found["model_here"]):
        lines.append(f"| {run['nodes']} | {run['seconds']:.1f} | {predicted['seconds']:.1f} |")
    c = found["costs"]
    lines += ["", f"costs: an evaluation {c['evaluation']} s, the driver "
              f"{c['driver_per_evaluation']} s of CPU per evaluation (it saturates at about "
              f"{found['driver_saturates_at']} nodes), a run's start {c['start']} s", "",
              "| nodes (budget 40, population = nodes) | model (s) | driver-bound |",
              "|---|---|---|"]
    for row in found["model"]:
        lines.append(f"| {row['nodes']} | {row['seconds']:.1f} | {row['driver_bound']} |")
    if "shipping" in found:
        s = found["shipping"]
        lines += ["", f"shipping: the project packs to {s['bytes'] / 1e6:.1f} MB in "
                  f"{s['pack_seconds']} s; a one-node run takes {s['first_cost']} s longer "
                  f"shipped, {s['cached_cost']} s once the node holds it; projected: "
                  + ", ".join(f"{n} nodes {v} s" for n, v in s["model"].items())]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
