"""On the driver: a batch of candidates measured across the cluster's nodes.

    start ─▶ one NodeBench per measuring node ─▶ each says who it is, builds its baseline
          ─▶ A/A check each ─▶ the quiet nodes of the target group give verdicts
    batch ─▶ each candidate's changed units compiled as tasks on any node (the shared
             object cache) ─▶ the candidate measured on the next free verdict node
          ─▶ a node lost mid-candidate: the candidate goes back to the queue, whole

Results come back in the batch's order: the journal, on the driver, is written by the
caller in that order, only for finished evaluations, so a lost node or a killed driver
leaves nothing half-written and nothing counted twice."""

from __future__ import annotations

import os
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from autopass_build.candidates.pgo import TrainedProfile
from autopass_build.cluster.connect import (
    SLOT,
    ClusterError,
    error_line,
    join,
    leave,
)
from autopass_build.cluster.node_bench import (
    AfterLink,
    Baseline,
    NodeBench,
    NodeResult,
    NodeTrained,
    compile_objects,
)
from autopass_build.cluster.nodes import (
    NodeInfo,
    Role,
    check_version,
    cpu_model,
    measuring_nodes,
    target_group,
)
from autopass_build.cluster.shipping import describe, ship
from autopass_build.config import MeasureConfig
from autopass_build.core.flags import UnitFlags
from autopass_build.measuring.measure import tightened
from autopass_build.measuring.stats import FASTER, SLOWER


@dataclass
class Bench:
    """A measuring node as the driver sees it."""
    handle: Any                  # the NodeBench actor (a Ray handle)
    info: NodeInfo
    role: Role = Role.VERDICTS
    why: str = ""
    last_used: int = 0           # the dispatch it last took: the least recent goes next


class ClusterMeasurer:
    def __init__(self, address: str, target: str, aa_noise: float,
                 show: Callable[[str], None]):
        self.address, self.target, self.aa_noise, self.show = address, target, aa_noise, show
        self.benches: list[Bench] = []
        self.baseline: Baseline | None = None
        self.requeued = 0
        self._dispatches = 0
        self._compile: Any = None        # the compile task, made remote once joined

    # -- start ---------------------------------------------------------------------------
    def start(self, baseline: Baseline, measure: MeasureConfig, ship: bool = False) -> None:
        ray = join(self.address)
        if ship:
            baseline = self._shipped(ray, baseline)
        self.baseline = baseline
        labels = measuring_nodes(ray, self.address)
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        actor = ray.remote(NodeBench)
        handles = [actor.options(resources={SLOT: 1}, num_cpus=0, max_restarts=0,
                                 scheduling_strategy=NodeAffinitySchedulingStrategy(
                                     node, soft=False)).remote(baseline, node, labels[node])
                   for node in labels]
        self.benches = [Bench(handle, info) for handle, info in self._described(ray, handles)]
        if not self.benches:
            raise ClusterError("no measuring node could start its bench (see above): check "
                               "that every node runs this autopass and sees the project")
        self._compile = ray.remote(compile_objects).options(
            num_cpus=1, max_retries=1, scheduling_strategy="SPREAD")
        self._place(cpu_model())
        self._check_noise(ray, measure)

    def _shipped(self, ray, baseline: Baseline) -> Baseline:
        """`baseline` with the project packed into the cluster's object store."""
        root = os.path.dirname(baseline.store_dir)
        shipped = ship(ray, root, baseline.store_dir)
        self.show(f"cluster: the project shipped to the nodes ({describe(shipped)}; each "
                  "keeps it in its cache by that hash)")
        return replace(baseline, shipped=shipped)

    def _described(self, ray, handles: list) -> list[tuple[Any, NodeInfo]]:
        """Each bench that started, with who it is; a node that cannot see the project
        or runs another autopass stops the run (it would fail every candidate)."""
        found = []
        for handle in handles:
            try:
                info, missing, shared = ray.get(handle.describe.remote(), timeout=600)
            except Exception as error:      # a node that cannot even start its bench
                self.show(f"cluster: a measuring node could not start ({error_line(error)}); "
                          "it is left out")
                continue
            if missing:
                raise ClusterError(f"node {info.name} cannot see the store {missing}: the "
                                   "nodes need the project at the same path (a shared "
                                   "filesystem or the same checkout)")
            check_version(info)
            if shared:
                self.show(f"cluster: {info.name}: {shared}")
            found.append((handle, info))
        return found

    def _place(self, driver_cpu: str) -> None:
        group = target_group([b.info for b in self.benches], self.target, driver_cpu)
        for bench in self.benches:
            if bench.info.cpu != group:
                bench.role, bench.why = Role.OTHER_GROUP, f"its CPU is {bench.info.cpu}"
        if group != driver_cpu:
            self.show(f"cluster: verdicts on {group}; this machine is {driver_cpu}, and the "
                      "-march=native, the final re-measurement and BOLT run here: run "
                      "the driver on a machine of the target group")

    def _check_noise(self, ray, measure: MeasureConfig) -> None:
        """Every verdict node measures the baseline against itself once, all at once,
        with the pairs and precision of a final re-measurement (twice and half)."""
        checking = [b for b in self.benches if b.role == Role.VERDICTS]
        refs = [b.handle.aa.remote(tightened(measure)) for b in checking]
        for bench, ref in zip(checking, refs):
            try:
                result: NodeResult = ray.get(ref)
            except Exception as error:
                bench.role, bench.why = Role.LOST, error_line(error)
                continue
            bench.role, bench.why = _noise_verdict(result, self.aa_noise)
        for bench in self.benches:
            self.show(f"cluster: {bench.info.name} ({bench.info.cpu}): {bench.role.value}"
                      + (f" ({bench.why})" if bench.why else ""))
        if not self.verdict_benches:
            raise ClusterError("no node of the cluster can give verdicts (see above): quiet "
                               "the nodes, raise [cluster].aa_noise, or tune locally")

    # -- batches -------------------------------------------------------------------------
    @property
    def verdict_benches(self) -> list[Bench]:
        return [b for b in self.benches if b.role == Role.VERDICTS]

    @property
    def width(self) -> int:
        """How many candidates one batch measures at once."""
        return len(self.verdict_benches)

    def rebase(self, unit_flags: UnitFlags, link_flags: tuple[str, ...]) -> None:
        """The stages chosen become every node's baseline, and the base of the objects
        fanned out: the search measures on top of them there as it does here."""
        import ray

        assert self.baseline is not None
        self.baseline = replace(self.baseline, unit_flags=unit_flags, link_flags=link_flags)
        self._on_every_verdict_node(ray, lambda b: b.handle.rebase.remote(unit_flags,
                                                                          link_flags))

    def evaluate_many(self, candidates: list[UnitFlags], measure: MeasureConfig,
                      attribute: bool = False, link_flags: tuple[str, ...] = (),
                      after_link: AfterLink | None = None,
                      until: float | None = None) -> list[NodeResult]:
        """Each candidate (per-unit flags, the stages' added by the node; `link_flags`:
        a stage composition's, added to the link; `after_link`: a step's work on the
        linked candidate, made by the node) measured on a verdict node; the results in
        the candidates' order.  `until` (time.monotonic() here): --time's end, sent to
        each node as the seconds left when its candidate is sent."""
        import ray

        compiled = [self._fan_out(c) for c in candidates]
        waiting = deque(range(len(candidates)))
        running: dict[object, tuple[int, Bench]] = {}
        results: dict[int, NodeResult] = {}
        while waiting or running:
            busy = {id(b) for _, b in running.values()}
            idle = sorted((b for b in self.verdict_benches if id(b) not in busy),
                          key=lambda b: b.last_used)     # every node takes its turn
            for bench in idle:
                if not waiting:
                    break
                i = waiting.popleft()
                self._dispatches += 1
                bench.last_used = self._dispatches
                left = None if until is None else until - time.monotonic()
                ref = bench.handle.evaluate.remote(compiled[i], candidates[i], measure,
                                                   attribute, link_flags, after_link, left)
                running[ref] = (i, bench)
            if not running:
                raise ClusterError("every verdict node of the cluster was lost; the journal "
                                   "holds every finished evaluation: `autopass tune "
                                   "--resume` (on the cluster, or locally without --cluster)")
            done, _ = ray.wait(list(running), num_returns=1)
            for ref in done:
                i, bench = running.pop(ref)
                try:
                    results[i] = ray.get(ref)
                except _lost_errors(ray) as error:
                    self._lost(bench, error)
                    waiting.appendleft(i)            # measured again, whole, elsewhere
                except ray.exceptions.RayTaskError as error:
                    raise ClusterError(f"node {bench.info.name} failed a candidate: "
                                       f"{error_line(error.cause or error)}") from None
        return [results[i] for i in range(len(candidates))]

    def train_pgo(self) -> NodeTrained:
        """The PGO profile trained on a verdict node (NodeBench.train_pgo)."""
        return self._train("the PGO profile", lambda bench: bench.handle.train_pgo.remote())

    def train_cs(self, unit_flags: UnitFlags, link_flags: tuple[str, ...],
                 base: TrainedProfile) -> NodeTrained:
        """CS-PGO's profile trained on a verdict node on the build so far
        (NodeBench.train_cs)."""
        return self._train("the CS-PGO profile", lambda bench: bench.handle.train_cs.remote(
            unit_flags, link_flags, base))

    def _train(self, what: str, call: Callable[[Bench], Any]) -> NodeTrained:
        """A training run on a verdict node, the one least recently used (a node of the
        target group: a profile whose counts depend on the machine is counted on the
        kind the build is for); a node lost on the way: the next one.  TrainingFailed
        when the training itself fails there."""
        import ray

        while True:
            self._check_some_left()
            bench = min(self.verdict_benches, key=lambda b: b.last_used)
            self._dispatches += 1
            bench.last_used = self._dispatches
            self.show(f"cluster: training {what} on {bench.info.name}")
            try:
                return ray.get(call(bench))
            except _lost_errors(ray) as error:
                self._lost(bench, error, requeue=False)
            except ray.exceptions.RayTaskError as error:
                raise TrainingFailed(f"{error_line(error.cause or error)} (on "
                                     f"{bench.info.name})") from None

    def share(self, path: str, digest: str) -> None:
        """The driver's file at `path` (its content hash `digest`) put where each verdict
        node reads that path, in its copy of a shipped tree or at the same path: a
        profile trained after the project was shipped.  A node that cannot take it
        gives no more verdicts (it would fail every build that names the file)."""
        import ray

        with open(path, "rb") as handle:
            data = ray.put(handle.read())
        answers = self._on_every_verdict_node(
            ray, lambda b: b.handle.receive.remote(path, data, digest))
        for bench, taken in answers:
            if not taken:
                self._lost(bench, ClusterError(f"{os.path.basename(path)} arrived damaged"),
                           requeue=False)
        self._check_some_left()

    def _on_every_verdict_node(self, ray, call: Callable[[Bench], Any]
                               ) -> list[tuple[Bench, Any]]:
        """`call` (a remote call to a bench) on every verdict node at once: each one's
        answer; a node that does not answer is left out, as one lost mid-candidate."""
        answers = []
        for bench, ref in [(b, call(b)) for b in self.verdict_benches]:
            try:
                answers.append((bench, ray.get(ref, timeout=600)))
            except Exception as error:
                self._lost(bench, error, requeue=False)
        self._check_some_left()
        return answers

    @property
    def shipped(self) -> bool:
        """Whether the nodes work in a shipped copy of the project (at other paths)."""
        return self.baseline is not None and self.baseline.shipped is not None

    def _check_some_left(self) -> None:
        if not self.verdict_benches:
            raise ClusterError("every verdict node of the cluster was lost; the journal "
                               "holds every finished evaluation: `autopass tune --resume`")

    def _fan_out(self, candidate: UnitFlags) -> list:
        """Compile tasks for the units a candidate changes, one per unit, on any node."""
        assert self.baseline is not None
        if self.baseline.shipped is not None:
            return []           # no shared object cache: each node compiles what it needs
        base = self.baseline.unit_flags
        wanted = [(uid, tuple(base.get(uid, ())) + tuple(flags))
                  for uid, flags in sorted(candidate.items()) if flags]
        return [self._compile.remote(self.baseline.store_dir, [item]) for item in wanted]

    def _lost(self, bench: Bench, error: Exception, requeue: bool = True) -> None:
        """`bench` gives no more verdicts; `requeue`: its candidate goes back to the
        queue (counted, and said)."""
        bench.role, bench.why = Role.LOST, error_line(error)
        self.requeued += requeue
        then = "its candidate is measured again on another node " if requeue else ""
        self.show(f"cluster: node {bench.info.name} lost ({bench.why[:120]}); "
                  f"{then}({self.width} left)")

    def close(self) -> None:
        leave()


class TrainingFailed(ClusterError):
    """A training run that failed on the node that ran it (not a node lost)."""


def _lost_errors(ray) -> tuple[type[Exception], ...]:
    """What Ray raises for a node, its bench or their results gone."""
    return (ray.exceptions.RayActorError, ray.exceptions.ActorUnavailableError,
            ray.exceptions.WorkerCrashedError, ray.exceptions.ObjectLostError,
            ray.exceptions.NodeDiedError)


def _noise_verdict(result: NodeResult, most: float) -> tuple[Role, str]:
    """A node is quiet enough when its A/A finds no difference (not "faster" or
    "slower") and its interval's half-width is at most `most` (0.05 = ±5 %); "unclear"
    within that width is the usual answer of a node that needed all its pairs."""
    comparison = result.evaluation.comparison
    estimate = comparison.estimate if comparison else None
    if comparison is None or estimate is None:
        return Role.NOISY, f"its A/A check failed: {result.evaluation.detail[:120]}"
    half = estimate.half_width
    text = f"A/A {estimate.ratio:.4f}x [{estimate.low:.4f}, {estimate.high:.4f}]"
    if comparison.verdict in (FASTER, SLOWER):
        return Role.NOISY, f"{text} called {comparison.verdict}"
    if half > most:
        return Role.NOISY, f"{text}: ±{half:.1%} is wider than [cluster].aa_noise {most:.1%}"
    return Role.VERDICTS, text

