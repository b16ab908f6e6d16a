"""What runs on a measuring node, for the whole run: one NodeBench per node, holding the
node's benchmark slot (Ray places it there and nowhere else).

It builds the run's baseline once, from the shared store, into a folder of its own
(two nodes on one filesystem never write one file), and measures each candidate it is
given against that baseline, interleaved, as a local run does: a verdict compares two
programs timed on the same node, never times of two nodes."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from autopass_build.candidates.bolt import BoltOnNode, BoltStage, BroughtBolt
from autopass_build.candidates.candidate import Candidate
from autopass_build.candidates.evaluate import Evaluation, Evaluator
from autopass_build.candidates.exports import ExportsKept, KeepExports
from autopass_build.candidates.pgo import TrainedProfile, train_cs, trained_here
from autopass_build.cluster.nodes import NodeInfo, this_node
from autopass_build.cluster.shipping import ShippedTree, unpacked
from autopass_build.config import Config, MeasureConfig
from autopass_build.core.files import hash_bytes, hash_file, moved, write_atomic
from autopass_build.core.flags import UnitFlags
from autopass_build.measuring.attribution import Attributor
from autopass_build.measuring.cpu_pinning import claim_cpu
from autopass_build.store.index import Store

# What Ray puts into its workers' environment, which a benchmark started from a node's
# bench would inherit: OMP_NUM_THREADS=1 among them (an OpenMP benchmark would run on one
# thread on the node and on all of them here).  The node's benchmarks get the driver's
# values of these instead (none where the driver has none).
RAY_WORKER_ENV = ("OMP_NUM_THREADS", "PYTHONBREAKPOINT", "RAY_JOB_ID", "RAY_RAYLET_PID",
                  "RAY_LD_PRELOAD_ON_WORKERS", "SPT_NOENV")


def driver_environment() -> tuple[tuple[str, str], ...]:
    """This process's values of RAY_WORKER_ENV: what the nodes' benchmarks run with."""
    return tuple((name, os.environ[name]) for name in RAY_WORKER_ENV if name in os.environ)


def adopt_environment(driver: tuple[tuple[str, str], ...]) -> None:
    """This node's environment for its benchmarks: Ray's marks replaced by `driver`'s."""
    for name in RAY_WORKER_ENV:
        os.environ.pop(name, None)
    os.environ.update(dict(driver))


@dataclass(frozen=True)
class Baseline:
    """What every node builds its baseline from: the run's store, config, target and
    chosen stages (per-unit and link flags), and the project shipped to the nodes when
    they do not share the driver's filesystem."""
    store_dir: str
    config: Config
    target: str                      # output_rel of the binary under tune
    unit_flags: UnitFlags
    link_flags: tuple[str, ...]
    shipped: ShippedTree | None = None
    environment: tuple[tuple[str, str], ...] = field(default_factory=driver_environment)

    def here(self) -> Baseline:
        """This baseline as the node reads it: in its own copy of a shipped project,
        the flags that name a file of the tree (the PGO profile in its store) naming
        the copy's."""
        if self.shipped is None:
            return self
        tree = unpacked(self.shipped)
        flags = Moved(self.shipped.root, tree)
        return replace(self, store_dir=moved(self.store_dir, self.shipped.root, tree),
                       config=self.config.moved(self.shipped.root, tree),
                       unit_flags=flags.per_unit(self.unit_flags),
                       link_flags=flags(self.link_flags))


@dataclass(frozen=True)
class Moved:
    """Flags read where the driver's tree `root` is now, at `tree` (Moved("", "") keeps
    them): a flag naming a file under `root` names the same file under `tree`."""
    root: str
    tree: str

    def __call__(self, flags: tuple[str, ...]) -> tuple[str, ...]:
        if not self.root:
            return tuple(flags)
        top, here = self.root.rstrip(os.sep) + os.sep, self.tree.rstrip(os.sep) + os.sep
        return tuple(flag.replace(top, here) for flag in flags)

    def per_unit(self, flags: UnitFlags) -> UnitFlags:
        return {unit: self(unit_flags) for unit, unit_flags in flags.items()}


@dataclass
class NodeTrained:
    """A PGO profile trained on a node: as the node kept it (its path the node's), its
    bytes, for the driver to keep in its own store."""
    profile: TrainedProfile
    data: bytes
    node: str                                    # NodeInfo.name
    seconds: float = 0.0
    lines: list[str] = field(default_factory=list)   # its progress, shown by the driver


@dataclass
class NodeResult:
    evaluation: Evaluation
    node: str                                    # NodeInfo.name
    seconds: float = 0.0                         # the evaluation's, on the node
    lines: list[str] = field(default_factory=list)   # its progress, shown by the driver
    brought: BroughtBolt | None = None           # what its post-link step trained


AfterLink = KeepExports | BoltOnNode             # a post-link step, as a node is sent it


class NodeBench:
    def __init__(self, baseline: Baseline, node_id: str, cpu_label: str):
        self.info = this_node(node_id, cpu_label)
        self.cpu, self.sharing = claim_cpu()   # its runs' CPU, not another bench's
        adopt_environment(baseline.environment)
        self.moved = Moved("", "")      # the flags the driver sends, as read here
        if baseline.shipped is not None:
            self.moved = Moved(baseline.shipped.root, unpacked(baseline.shipped))
        baseline = baseline.here()
        if not os.path.isdir(baseline.store_dir):
            self.evaluator: Evaluator | None = None
            self.missing = baseline.store_dir
            return
        self.missing = ""
        self.evaluator = Evaluator(Store(baseline.store_dir), baseline.config,
                                   baseline.target)
        own = os.path.join(baseline.store_dir, "work", "node-" + node_id[:12])
        self.evaluator.replayer.work = own
        os.makedirs(os.path.join(own, "tmp"), exist_ok=True)
        os.environ["TMPDIR"] = os.path.join(own, "tmp")   # the benchmark's scratch files
        self.evaluator.rebase(baseline.unit_flags, baseline.link_flags)
        self.attributor: Attributor | None = None

    def describe(self) -> tuple[NodeInfo, str, str]:
        """Who this node is, the store path it cannot see ("" when it sees it), and a
        note on its CPU when it shares it with another bench of its host."""
        shared = (f"its runs share CPU {self.cpu} with {self.sharing} other bench(es) of "
                  f"its host (more measuring nodes than CPUs there)" if self.sharing else "")
        return self.info, self.missing, shared

    def aa(self, measure: MeasureConfig) -> NodeResult:
        """The baseline measured against itself: how noisy this node is."""
        lines: list[str] = []
        assert self.evaluator is not None
        started = time.monotonic()
        evaluation = self.evaluator.evaluate({}, lines.append, measure, measure_identical=True)
        return NodeResult(evaluation, self.info.name, time.monotonic() - started, lines)

    def train_pgo(self) -> NodeTrained:
        """The PGO stage's profile trained here: the recorded build instrumented, built
        and run on this node of the target group (candidates/pgo.trained_here)."""
        assert self.evaluator is not None
        lines: list[str] = []
        started = time.monotonic()
        profile = trained_here(self.evaluator, lines.append)
        with open(profile.path, "rb") as handle:
            data = handle.read()
        return NodeTrained(profile, data, self.info.name, time.monotonic() - started, lines)

    def train_cs(self, unit_flags: UnitFlags, link_flags: tuple[str, ...],
                 base: TrainedProfile) -> NodeTrained:
        """CS-PGO's profile trained here on the build so far (`unit_flags`, `link_flags`:
        the stages with the per-file winners, as the driver names them; `base`: the PGO
        profile they use, sent to this node before): candidates/pgo.train_cs."""
        assert self.evaluator is not None
        lines: list[str] = []
        started = time.monotonic()
        build = self._twin(unit_flags, link_flags)
        profile = train_cs(build, replace(base, path=self.moved((base.path,))[0]),
                           lines.append)
        with open(profile.path, "rb") as handle:
            data = handle.read()
        return NodeTrained(profile, data, self.info.name, time.monotonic() - started, lines)

    def _twin(self, unit_flags: UnitFlags, link_flags: tuple[str, ...]) -> Evaluator:
        """An evaluator of this node whose baseline is another build (the driver's
        flags, read here), building in this node's own folder."""
        assert self.evaluator is not None
        twin = self.evaluator.on(self.moved.per_unit(unit_flags), self.moved(link_flags))
        twin.replayer.work = self.evaluator.replayer.work
        return twin

    def receive(self, path: str, data: bytes, digest: str) -> bool:
        """A file the driver made after the project was shipped (the PGO profile the
        stages are built with), at `path` on the driver: written where this node reads
        that path (its copy of the tree, or the same path), whole, once; False when the
        bytes are not `digest`'s (damaged on the way: nothing written)."""
        here = self.moved((path,))[0]
        if hash_bytes(data) != digest:
            return False
        if not (os.path.isfile(here) and hash_file(here) == digest):
            os.makedirs(os.path.dirname(here), exist_ok=True)
            write_atomic(here, data)
        return True

    def rebase(self, unit_flags: UnitFlags, link_flags: tuple[str, ...]) -> None:
        """The stages chosen on top of the recorded build become this node's baseline
        (built at the next candidate)."""
        assert self.evaluator is not None
        self.evaluator.rebase(self.moved.per_unit(unit_flags), self.moved(link_flags))

    def evaluate(self, compiled: list, flags_by_unit: UnitFlags, measure: MeasureConfig,
                 attribute: bool, link_flags: tuple[str, ...] = (),
                 after_link: AfterLink | None = None,
                 seconds_left: float | None = None) -> NodeResult:
        """One candidate against this node's baseline (`link_flags`: a stage
        composition's, added to its link; `after_link`: a step's work on the linked
        candidate, made here: `_post_link`).  `compiled`: the compile tasks
        fanned out for it (object references, nested so that Ray does not wait on them
        before the call); waited for, but their failures do not matter: the build
        compiles whatever is missing itself.  `seconds_left`: of the run's --time when
        the driver sent it (a time, not a clock reading: the node's clock is its own)."""
        import ray

        started = time.monotonic()
        until = None if seconds_left is None else started + seconds_left
        if compiled:
            ray.wait(compiled, num_returns=len(compiled), timeout=3600)
        lines: list[str] = []
        assert self.evaluator is not None
        if attribute and self.attributor is None:
            self.attributor = Attributor(self.evaluator.bench)
        post_link = self._post_link(after_link, lines.append)
        evaluation = self.evaluator.evaluate(
            self.moved.per_unit(flags_by_unit), lines.append, measure,
            self.moved(link_flags), post_link,
            attribute=self.attributor if attribute else None, until=until)
        brought = post_link.brought() if isinstance(post_link, BoltStage) else None
        return NodeResult(evaluation, self.info.name, time.monotonic() - started, lines,
                          brought)

    def _post_link(self, after_link: AfterLink | None, show: Callable[[str], None]
                   ) -> Callable[[Candidate], Candidate] | None:
        """The driver's post-link step made here: the exports check against this
        node's baseline, BOLT trained with this node's store and benchmark."""
        assert self.evaluator is not None
        if isinstance(after_link, KeepExports):
            return ExportsKept(self.evaluator.baseline, after_link.label)
        if isinstance(after_link, BoltOnNode):
            return BoltStage(self.evaluator.store, self.evaluator.bench, show,
                             self.moved(after_link.libraries))
        return None


def compile_objects(store_dir: str, wanted: list[tuple[str, tuple[str, ...]]]) -> int:
    """On any node with a free core: the objects of (unit id, flags) into the shared,
    content-addressed object cache, where the measuring node's build finds them.
    Returns how many were built; a unit that fails is left to that build to report."""
    from autopass_build.candidates.replay import Replayer
    from autopass_build.core.outcome import EvaluationError

    replayer = Replayer(Store(store_dir))
    replayer.jobs = 1
    built = 0
    for unit_id, flags in wanted:
        unit = replayer.units.get(unit_id)
        if unit is None or replayer.has_object(unit, flags):
            continue
        try:
            replayer.object_for(unit, flags)
            built += 1
        except (EvaluationError, OSError):
            pass
    return built
