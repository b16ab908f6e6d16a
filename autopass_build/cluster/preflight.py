"""Before the stages: can the cluster serve this run?

The stages take the driver minutes to hours; a cluster that cannot measure (a node that
does not see the store, runs another autopass, lacks the recorded compiler or a tool the
run needs, a benchmark slot held by another run, no node in the target group) is found
here, at connect, by one short task per measuring node, not when the search starts.

    driver ──▶ one probe per measuring node (in its benchmark slot: a busy slot does not
               answer) ──▶ NodeCheck records ──▶ problems stop the run, in one line each;
               the target group and its nodes are said."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

from autopass_build.cluster.connect import SLOT, ClusterError, error_line
from autopass_build.cluster.nodes import NodeInfo, check_version, target_group, this_node


@dataclass(frozen=True)
class Needed:
    """What a node must have to build and measure this run's candidates."""
    store_dir: str
    compilers: tuple[tuple[str, str], ...]   # (recorded path, its identity: "clang 19.1.7 (...)")
    tools: tuple[str, ...]                   # programs: "valgrind", or an LLVM tool ("ld.lld")


@dataclass(frozen=True)
class NodeCheck:
    """What a node found when it looked for what the run needs."""
    info: NodeInfo
    sees_store: bool
    problems: tuple[str, ...]                # one line each; empty: the node can serve

    def line(self) -> str:
        return f"node {self.info.name} ({self.info.cpu})"


def probe(node_id: str, cpu_label: str, needed: Needed) -> NodeCheck:
    """On the node: who it is and what of `needed` it lacks."""
    from autopass_build.core import toolchain

    problems: list[str] = []
    sees_store = os.path.isdir(needed.store_dir)
    for path, wanted in needed.compilers:
        found = toolchain.identify(path) if toolchain.is_executable_file(path) else None
        if found is None:
            problems.append(f"has no compiler at {path} (recorded: {wanted}): install it there")
        elif found.short() != wanted:
            problems.append(f"{path} is {found.short()}, recorded with {wanted}: install "
                            "the recorded compiler")
    for tool in needed.tools:
        program = toolchain.find_tool(tool) if tool in toolchain.TOOLS else toolchain.which(tool)
        if program is None:
            problems.append(f"has no {tool}: install it there, as on this machine")
    return NodeCheck(this_node(node_id, cpu_label), sees_store, tuple(problems))


def needed_for(store, metric: str, stages: tuple[str, ...]) -> Needed:
    """What this run's benches will use: the store's recorded compilers, valgrind for
    callgrind counts, lld when an LTO stage may be chosen."""
    compilers = tuple(sorted({(u.compiler, u.compiler_id) for u in store.units()}))
    tools = (["valgrind"] if metric == "instructions" else []) + (
        ["ld.lld"] if any("lto" in stage for stage in stages) else [])
    return Needed(store.dir, compilers, tuple(tools))


@dataclass(frozen=True)
class Preflight:
    group: str                   # the target group: its nodes give verdicts
    blind: tuple[str, ...]       # nodes that cannot see the store at the driver's path


def check_nodes(ray, nodes: dict[str, str], needed: Needed, wanted_group: str,
                driver_cpu: str, show: Callable[[str], None], seconds: float = 60.0,
                ship: str = "auto") -> Preflight:
    """Each measuring node probed in its slot, at once.  ClusterError when a node that
    answered cannot serve (with `ship` "never", one that cannot see the store), or no
    node of the target group answered; a node whose slot stays busy for `seconds` is
    said and left out."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    task = ray.remote(probe)
    refs = {task.options(resources={SLOT: 1}, num_cpus=0, max_retries=0,
                         scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False)
                         ).remote(node, label, needed): node
            for node, label in nodes.items()}
    ready, busy = ray.wait(list(refs), num_returns=len(refs), timeout=seconds)
    checks: list[NodeCheck] = []
    for ref in ready:
        try:
            checks.append(ray.get(ref))
        except Exception as error:        # the node could not run a Python task at all
            raise ClusterError(f"node {refs[ref][:6]} cannot run autopass "
                               f"({error_line(error)[:160]}): install autopass[cluster] "
                               "on it, as on this machine") from None
    for ref in busy:
        ray.cancel(ref, force=True)
        show(f"cluster: node {refs[ref][:6]}: its benchmark slot stayed busy for "
             f"{seconds:g} s (another run measures there?); it is left out")
    for check in checks:
        check_version(check.info)
        problems = check.problems + (() if check.sees_store or ship != "never" else (
            f"cannot see the store {needed.store_dir}, and [cluster].ship = \"never\": give "
            "the nodes the project at this path (a shared filesystem), or let autopass "
            "ship it (\"auto\")",))
        if problems:
            raise ClusterError(f"{check.line()} {problems[0]}"
                               + (f" (and {len(problems) - 1} more)" if len(problems) > 1
                                  else ""))
    if not checks:
        raise ClusterError("no measuring node answered: every benchmark slot is busy "
                           "(another autopass run on the cluster?); wait for it, or tune locally")
    group = target_group([c.info for c in checks], wanted_group, driver_cpu)
    members = [c for c in checks if c.info.cpu == group]
    others = sorted({c.info.cpu for c in checks} - {group})
    show(f"cluster: target group {group!r}"
         + (" (this machine's CPU)" if group == driver_cpu else
            " (the [cluster].target)" if wanted_group else " (the largest group)")
         + f": {', '.join(c.info.name for c in members)}"
         + (f"; other groups, builds only: {', '.join(others)}" if others else ""))
    blind = tuple(c.info.name for c in checks if not c.sees_store)
    if blind:
        show(f"cluster: {', '.join(blind)} cannot see the store at {needed.store_dir}: the "
             "project is shipped to them")
    return Preflight(group, blind)
