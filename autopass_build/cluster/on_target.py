"""One job run whole on a measuring node of the target group: `autopass verify
--cluster`, whose builds and A/B measurement must run on the CPU the user ships for.

The job holds the node's benchmark slot, so that nothing else measures there while it
runs; its progress lines come back to this machine as it goes (a Ray queue), and an
error it raises is raised here as itself, so the command says it as a local run would.
The node works in the project's own folder: it needs the project at the same path, as
a tuning run's nodes do."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

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

POLL_SECONDS = 0.5


class Relay:
    """A progress callable on the node that sends its lines to the driver."""

    def __init__(self, queue: Any):
        self.queue = queue

    def __call__(self, message: str | None, transient: bool = False) -> None:
        if message is not None:
            self.queue.put(message)


def run_on_target(address: str, target: str, root: str, show: Callable[[str], None],
                  job: Callable[..., Any]) -> Any:
    """`job(progress)` run on one measuring node of the target group
    ([cluster].target, else this machine's CPU model, else the largest group), the
    project being at `root` there too; what it returns, or what it raised."""
    ray = join(address)
    try:
        from ray.util.queue import Queue
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        info = _chosen(ray, address, target)
        show(f"cluster: on {info.name} ({info.cpu}), in {root}")
        queue = Queue()
        ref = ray.remote(_guarded).options(
            resources={SLOT: 1}, num_cpus=1, max_retries=0,
            scheduling_strategy=NodeAffinitySchedulingStrategy(info.node_id, soft=False)
        ).remote(root, info.name, job, Relay(queue))
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


def _guarded(root: str, name: str, job: Callable[..., Any], progress: Relay
             ) -> tuple[Any, BaseException | None]:
    """On the node: (the job's result, None), or (None, what it raised): the exception
    itself, not Ray's wrapping of it with the node's traceback."""
    if not os.path.isdir(root):
        return None, ClusterError(f"node {name} cannot see the project at {root}: the "
                                  "nodes need it at the same path (a shared filesystem "
                                  "or the same checkout)")
    os.chdir(root)
    try:
        return job(progress), None
    except Exception as error:
        return None, error


def _drain(queue: Any, show: Callable[[str], None]) -> None:
    while not queue.empty():
        show(queue.get())
