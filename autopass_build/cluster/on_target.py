"""One job run whole on a measuring node of the target group: `autopass verify
--cluster`, whose builds and A/B measurement must run on the CPU the user ships for.

The job holds the node's benchmark slot, so that nothing else measures there while it
runs; its progress lines come back to this machine as it goes (a Ray queue), and an
error it raises is raised here as itself, so the command says it as a local run would.
The node works in the project's own folder when it sees it at the same path; else (or
always, as [cluster].ship says) the project is shipped as to a tuning run's nodes
(cluster/shipping.py), and the job runs in a private copy of the node's unpacked tree:
it builds in its tree, and the unpacked tree is shared by every run of that hash."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from typing import Any, Protocol

from autopass_build.cluster.connect import (
    SLOT,
    ClusterError,
    error_line,
    join,
    leave,
)
from autopass_build.cluster.nodes import (
    NodeInfo,
    check_version,
    cpu_model,
    measuring_nodes,
    target_group,
    this_node,
)
from autopass_build.cluster.shipping import ShippedTree, describe, ship, unpacked

POLL_SECONDS = 0.5


class Job(Protocol):
    """What runs on the node: called with the progress, movable into a copy of the tree."""
    def __call__(self, progress: Any) -> Any: ...

    def moved(self, here: str) -> Job: ...


class Relay:
    """A progress callable on the node that sends its lines to the driver."""

    def __init__(self, queue: Any):
        self.queue = queue

    def __call__(self, message: str | None, transient: bool = False) -> None:
        if message is not None:
            self.queue.put(message)


def run_on_target(address: str, target: str, store_dir: str, show: Callable[[str], None],
                  job: Job, ship_mode: str = "auto") -> Any:
    """`job(progress)` run on one measuring node of the target group
    ([cluster].target, else this machine's CPU model, else the largest group), in the
    project whose store is `store_dir` (shipped to the node as `ship_mode` says: auto,
    always, never); what it returns, or what it raised."""
    root = os.path.dirname(store_dir)
    ray = join(address)
    try:
        from ray.util.queue import Queue
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        info = _chosen(ray, address, target)
        shipped = _shipment(ray, info, root, store_dir, ship_mode)
        show(f"cluster: on {info.name} ({info.cpu}), in "
             + (f"its own copy of {root} (shipped: {describe(shipped)})" if shipped else root))
        queue = Queue()
        ref = ray.remote(_guarded).options(
            resources={SLOT: 1}, num_cpus=1, max_retries=0,
            scheduling_strategy=NodeAffinitySchedulingStrategy(info.node_id, soft=False)
        ).remote(root, info.name, job, Relay(queue), shipped)
        while not ray.wait([ref], timeout=POLL_SECONDS)[0]:
            _drain(queue, show)
        try:
            result, raised = ray.get(ref)
        except Exception as error:      # the node died, or the task could not run
            raise ClusterError(f"the job on {info.name} was lost ({error_line(error)}): run "
                               "it again, or locally") from None
        _drain(queue, show)
    finally:
        leave()
    if raised is not None:
        raise raised
    return result


def _chosen(ray, address: str, target: str) -> NodeInfo:
    """The first measuring node (by name) of the target group."""
    labels = measuring_nodes(ray, address)
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    whoami = ray.remote(this_node)
    infos = ray.get([whoami.options(num_cpus=0, scheduling_strategy=(
        NodeAffinitySchedulingStrategy(node, soft=False))).remote(node, labels[node])
        for node in labels], timeout=600)
    group = target_group(infos, target, cpu_model())
    chosen = min((i for i in infos if i.cpu == group), key=lambda i: i.name)
    check_version(chosen)
    return chosen


def _sees(path: str) -> bool:
    return os.path.isdir(path)


def _shipment(ray, info: NodeInfo, root: str, store_dir: str, ship_mode: str
              ) -> ShippedTree | None:
    """The project (the tree `root`, its store `store_dir`) packed for the node: with
    "always", or with "auto" where the node does not see the store at the driver's
    path."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    if ship_mode == "never":
        return None
    if ship_mode == "auto" and ray.get(ray.remote(_sees).options(
            num_cpus=0, scheduling_strategy=NodeAffinitySchedulingStrategy(
                info.node_id, soft=False)).remote(store_dir), timeout=600):
        return None
    return ship(ray, root, store_dir)


def _guarded(root: str, name: str, job: Job, progress: Relay,
             shipped: ShippedTree | None = None) -> tuple[Any, BaseException | None]:
    """On the node: (the job's result, None), or (None, what it raised): the exception
    itself, not Ray's wrapping of it with the node's traceback."""
    private, before = "", os.getcwd()
    try:
        if shipped is not None:
            private = tempfile.mkdtemp(prefix="autopass-job-")
            root = os.path.join(private, "tree")
            shutil.copytree(unpacked(shipped), root, symlinks=True)
            job = job.moved(root)
        if not os.path.isdir(root):
            return None, ClusterError(f"node {name} cannot see the project at {root}: give "
                                      "the nodes the project at the same path (a shared "
                                      "filesystem or the same checkout), or set "
                                      '[cluster].ship = "auto" to ship it')
        os.chdir(root)
        return job(progress), None
    except Exception as error:
        return None, error
    finally:
        os.chdir(before)             # the worker may run other tasks
        if private:
            shutil.rmtree(private, ignore_errors=True)


def _drain(queue: Any, show: Callable[[str], None]) -> None:
    while not queue.empty():
        show(queue.get())
