"""A run that names a cluster: the nodes join before the stages (before the search when
no stage is asked for), and leave after the steps on top of the search.  Each stage
composition's looks, the head-to-head of two close ones, the search, and each step on
top of the build so far (direct calls, CS-PGO, layout, the link's knobs, BOLT) are built
and measured there, on the target group's nodes: the nodes' baseline is the recorded
build while the stages are measured (the one composition while the other is measured
against it), the composition chosen once they are, and the build so far while a step
is measured.

The training runs are on a verdict node too: PGO's (the recorded build instrumented and
run there), CS-PGO's (the build so far instrumented after inlining) and BOLT's (the node
that measures the step instruments, trains and rewrites); the profiles' bytes come back
and are kept in this store, and a profile the nodes build with is sent to each of them.
On this machine: -march=native (a node's compile is native to its own CPU), the
comparisons against the recorded build (another baseline than the nodes'), and CS-PGO's
and BOLT's training when the project is shipped (a profile names code by the tree's
paths).  Nothing here runs without [cluster].address."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from autopass_build.candidates import pgo
from autopass_build.candidates.evaluate import Evaluator
from autopass_build.config import Config
from autopass_build.core.plural import counted
from autopass_build.store.index import Store
from autopass_build.tuning.measuring import Measurements, TuneError

if TYPE_CHECKING:    # Ray is imported only by a run that names a cluster
    from autopass_build.cluster.dispatch import ClusterMeasurer
    from autopass_build.cluster.node_bench import NodeTrained


def check(config: Config, store: Store, show: Callable[[str], None] = lambda line: None
          ) -> bool:
    """At the start of a run: a cluster named but not reachable, not Ray, without a node
    that can measure, or whose nodes lack what the run needs (the store, the recorded
    compiler, a tool, a free slot, a node of the target group) is said before the stages
    take their hours, not after; the cluster joined (which one `auto` found), the target
    group and its nodes are said.  Returns whether the project is to be shipped to the
    nodes ([cluster].ship, and whether a node cannot see the store)."""
    address = config.cluster.address
    if not address:
        return False
    from autopass_build.cluster.connect import ClusterError, check_reachable, join
    from autopass_build.cluster.nodes import cpu_model, measuring_nodes
    from autopass_build.cluster.preflight import check_nodes, needed_for

    try:
        check_reachable(address)
        ray = join(address)
        nodes = measuring_nodes(ray, address)
        show(f"cluster {address}: joined {_joined(ray, address)}; "
             f"{counted(len(nodes), 'measuring node')} with a benchmark slot; checking "
             "what each has")
        found = check_nodes(ray, nodes, needed_for(store, config.measure.metric,
                                                   config.tune.stages),
                            config.cluster.target, cpu_model(), show, ship=config.cluster.ship)
    except ClusterError as error:
        raise TuneError(str(error)) from None
    return config.cluster.ship == "always" or bool(found.blind and config.cluster.ship == "auto")


def _joined(ray, address: str) -> str:
    """The head's address: what `auto` found."""
    try:
        return ray.get_runtime_context().gcs_address
    except Exception:           # a Ray client connection does not say it: the address does
        return address


def join(measurements: Measurements, config: Config, store_dir: str, evaluator: Evaluator,
         show: Callable[[str], None], ship: bool = False) -> None:
    """Put the run's search on the cluster [cluster].address names, if it names one
    (`ship`: the project packed and sent to the nodes, which work in their own copy)."""
    address = config.cluster.address
    if not address or measurements.remote is not None:    # joined for the stages
        return
    from autopass_build.cluster.connect import ClusterError
    from autopass_build.cluster.dispatch import ClusterMeasurer
    from autopass_build.cluster.node_bench import Baseline

    measurer = ClusterMeasurer(address, config.cluster.target, config.cluster.aa_noise, show)
    show(f"cluster {address}: a bench on each measuring node (its baseline, then an A/A "
         "check of its noise)")
    try:
        measurer.start(Baseline(store_dir, config, evaluator.target.output_rel,
                                dict(evaluator.base_flags), evaluator.base_link_flags),
                       config.measure, ship)
    except ClusterError as error:
        measurer.close()
        raise TuneError(str(error)) from None
    show(f"cluster: {counted(measurer.width, 'node')} "
         f"{'gives' if measurer.width == 1 else 'give'} verdicts; candidates are measured "
         f"up to {measurer.width} at a time")
    measurements.remote = measurer


def join_for_stages(measurements: Measurements, config: Config, store_dir: str,
                    evaluator: Evaluator, show: Callable[[str], None], ship: bool) -> None:
    """The stages' looks measured on the cluster, if the run names one (`ship`: the
    project shipped to the nodes first; the profile the stages are built with, trained
    after, is sent to them: `share_profile`)."""
    if not config.cluster.address:
        return
    join(measurements, config, store_dir, evaluator, show, ship)


def share_profile(measurements: Measurements, profile: pgo.TrainedProfile) -> None:
    """The PGO profile the stages are built with, put where each verdict node reads its
    path (a shipped copy of the project lacks a profile trained after it was shipped);
    nothing without a cluster."""
    measurer = measurements.remote
    if measurer is None:
        return
    from autopass_build.cluster.connect import ClusterError

    try:
        measurer.share(profile.path, profile.hash)
    except ClusterError as error:
        raise TuneError(str(error)) from None


def train_pgo(measurements: Measurements, store: Store, workload: str,
              show: Callable[[str], None]) -> pgo.TrainedProfile | None:
    """The PGO stage's profile trained on a verdict node when the stages are measured on
    the cluster (None when they are not), kept in this store as a profile trained here
    is; a training that fails there is a PgoError, as here."""
    trained = _trained_on_a_node(measurements, show, lambda measurer: measurer.train_pgo())
    if trained is None:
        return None
    return pgo.adopt(store, trained.data, trained.profile, trained.node, workload)


def train_cs(measurements: Measurements, build: Evaluator, base: pgo.TrainedProfile,
             show: Callable[[str], None]) -> pgo.TrainedCs | None:
    """CS-PGO's profile trained on a verdict node on `build` (the build so far, with
    `base`'s profile) when the run measures on the cluster (None when it does not),
    kept in this store and recorded as one trained here is, for this machine's build."""
    trained = _trained_on_a_node(measurements, show, lambda measurer: measurer.train_cs(
        dict(build.base_flags), build.base_link_flags, base))
    if trained is None:
        return None
    assert isinstance(trained.profile, pgo.TrainedCs)
    profile = pgo.adopt(build.store, trained.data, trained.profile, trained.node,
                        build.bench.workload(), pgo.CS_FILE, base=base.hash,
                        built=pgo.build_hash(build))
    assert isinstance(profile, pgo.TrainedCs)
    return profile


def _trained_on_a_node(measurements: Measurements, show: Callable[[str], None],
                       train: Callable[[ClusterMeasurer], NodeTrained]) -> NodeTrained | None:
    """`train` on the run's cluster, its progress shown; None without a cluster."""
    measurer = measurements.remote
    if measurer is None:
        return None
    from autopass_build.cluster.connect import ClusterError
    from autopass_build.cluster.dispatch import TrainingFailed

    try:
        trained = train(measurer)
    except TrainingFailed as error:
        raise pgo.PgoError(str(error)) from None
    except ClusterError as error:
        raise TuneError(str(error)) from None
    for line in trained.lines:
        show(f"[{trained.node}] {line}")     # as a training here says it: whole lines
    what = "CS-PGO" if isinstance(trained.profile, pgo.TrainedCs) else "PGO"
    show(f"{what} profile trained on {trained.node} in {trained.seconds:.1f} s "
         f"({counted(trained.profile.runs, 'raw profile')})")
    return trained


def leave(measurements: Measurements, show: Callable[[str], None]) -> None:
    """Back to this machine alone (the cluster keeps running: it is the user's)."""
    measurer, measurements.remote = measurements.remote, None
    if measurer is None:
        return
    if measurer.requeued:
        show(f"cluster: {counted(measurer.requeued, 'candidate')} measured again after a "
             "node was lost")
    measurer.close()
