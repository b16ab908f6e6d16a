"""Which nodes measure, and which of them give verdicts.

A node measures when its operator gave it a benchmark slot (`ray start --resources
'{"autopass_bench": 1}'`): one measurement at a time there, nothing else beside it.
Nodes are grouped by CPU model (the `autopass-cpu` label when the operator set one, else
the model the node reports), because a candidate faster on one CPU need not be faster on
another; only nodes of the target group give verdicts, and each of them only after its
A/A check (the baseline against itself) showed it quiet enough."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from autopass_build.cluster.connect import CPU_LABEL, SLOT, ClusterError


@dataclass(frozen=True)
class NodeInfo:
    """What a measuring node says about itself (node_bench.NodeBench.describe)."""
    node_id: str
    host: str
    cpu: str                # its group: the operator's label, else the CPU model
    version: str            # autopass's, which must be the driver's

    @property
    def name(self) -> str:
        return f"{self.host}/{self.node_id[:6]}"


class Role(Enum):
    VERDICTS = "verdicts"            # measures the search's candidates
    OTHER_GROUP = "other CPU group"  # builds only: its CPU is not the target's
    NOISY = "noisy"                  # its A/A check was too wide, or not "same"
    LOST = "lost"                    # died during the run


def cpu_model() -> str:
    """This machine's CPU model, as /proc/cpuinfo names it."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.partition(":")[2].strip()
    except OSError:
        pass
    return "unknown CPU"


def target_group(infos: list[NodeInfo], wanted: str, driver_cpu: str) -> str:
    """The group whose nodes give verdicts: `wanted` ([cluster].target) when set, else
    the driver's own CPU model if a node has it (the stages and the final re-measurement
    run on the driver), else the largest group."""
    groups = sorted({i.cpu for i in infos})
    if wanted:
        if wanted not in groups:
            raise ClusterError(f"[cluster].target = {wanted!r}: no measuring node is in "
                               f"that group; groups: {', '.join(groups) or '(none)'}")
        return wanted
    if driver_cpu in groups:
        return driver_cpu
    return max(groups, key=lambda g: (sum(i.cpu == g for i in infos), g))


def measuring_nodes(ray, address: str) -> dict[str, str]:
    """The live nodes that hold a benchmark slot: node id -> its `autopass-cpu` label
    ("" when it has none), sorted by id; ClusterError, with the fix, when there is none."""
    found = {n["NodeID"]: (n.get("Labels") or {}).get(CPU_LABEL, "")
             for n in sorted(ray.nodes(), key=lambda n: n["NodeID"])
             if n.get("Alive") and n.get("Resources", {}).get(SLOT, 0) >= 1}
    if not found:
        raise ClusterError(f"the cluster at {address} has no measuring node: give one a "
                           f"benchmark slot (`ray start ... --resources "
                           f"'{{\"{SLOT}\": 1}}'`)")
    return found


def this_node(node_id: str, cpu_label: str) -> NodeInfo:
    """What the node this runs on says about itself."""
    import socket

    from autopass_build import __version__

    return NodeInfo(node_id, socket.gethostname(), cpu_label or cpu_model(), __version__)


def check_version(info: NodeInfo) -> None:
    """A node running another autopass would build and measure differently."""
    from autopass_build import __version__

    if info.version != __version__:
        raise ClusterError(f"node {info.name} runs autopass {info.version}, this machine "
                           f"{__version__}: install one version everywhere")
