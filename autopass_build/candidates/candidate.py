"""A built candidate (its binary, the folder it lives in, the environment it runs in),
what building it took, and whether two candidates are the same program."""

from __future__ import annotations

import filecmp
import os
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable


@dataclass
class ReplayStats:
    compiled: int = 0       # objects compiled from IR
    from_source: int = 0    # objects compiled from source (IR replay does not reproduce)
    cached: int = 0         # objects found in the cache
    links: int = 0


@dataclass
class Candidate:
    binary: str
    folder: str
    env: dict[str, str] = field(default_factory=dict)  # LD_LIBRARY_PATH for rebuilt .so


@runtime_checkable
class PortableStep(Protocol):
    """A post-link step (Evaluator.evaluate's `post_link`) a cluster node can make its
    own: `portable()` is it as data the node is sent (the node builds the step against
    its own baseline and store); `adopt` takes back what the node's made (a profile it
    trained), or nothing."""

    def __call__(self, built: Candidate) -> Candidate: ...

    def portable(self) -> object: ...

    def adopt(self, brought: object) -> None: ...


def same_program(a: Candidate, b: Candidate) -> bool:
    """Byte for byte the same files (the binary, and any shared library rebuilt beside
    it) in the same environment: measuring one against the other would be an A/A.
    Anything else in a folder (say, a rewriter's leftovers) makes them differ."""
    if a.folder == b.folder:
        return a.binary == b.binary and a.env == b.env
    if os.path.relpath(a.binary, a.folder) != os.path.relpath(b.binary, b.folder):
        return False
    if {k: v.replace(a.folder, "") for k, v in a.env.items()} != \
            {k: v.replace(b.folder, "") for k, v in b.env.items()}:
        return False
    names_a, names_b = _files_under(a.folder), _files_under(b.folder)
    return names_a == names_b and all(
        filecmp.cmp(os.path.join(a.folder, n), os.path.join(b.folder, n), shallow=False)
        for n in names_a)


def _files_under(folder: str) -> list[str]:
    return sorted(os.path.relpath(os.path.join(root, name), folder)
                  for root, _, names in os.walk(folder) for name in names)
