"""The tuned binary's units in today's source, from what `apply --train`'s instrumented
build compiled and linked (capture/apply/tally.graph_lines).

The database lists the units tune measured; a source added since gets the fresh
profile in a --train build, but the stages' flags (LTO's) go only to the units the
database lists.  The instrumented build shows which sources today's binary is made of:
its link's objects, the archive members among them (matched by content: `ar` does not
go through the wrapper), the project libraries it links, and theirs in turn.
"""

from __future__ import annotations

import os
from collections import defaultdict

from autopass_build.capture.apply import tally
from autopass_build.capture.record import archive
from autopass_build.core.files import hash_bytes, hash_file, relative_to


def target_units(work_dir: str, binary: str, root: str) -> set[str]:
    """The sources (relative to `root`) of the units linked into `binary` (absolute),
    directly or through archives and project libraries; empty when the build's tally
    does not show its link."""
    compiled = tally.compiled(work_dir)
    linked = tally.linked(work_dir)
    by_name = defaultdict(list)         # an archive member's name -> objects so named
    hashes: dict[str, str] = {}         # an object's content hash, read once
    for obj in compiled:
        by_name[os.path.basename(obj)].append(obj)
    sources: set[str] = set()
    pending, seen = [binary], set()
    while pending:
        output = pending.pop()
        if output in seen or output not in linked:
            continue
        seen.add(output)
        inputs, own = linked[output]
        sources.update(own)
        for path in inputs:
            if path in compiled:
                sources.add(compiled[path])
            elif path in linked:        # a project library of this build
                pending.append(path)
            else:
                sources.update(_archived(path, by_name, compiled, hashes))
    inside = (relative_to(s, root) for s in sources)
    return {s for s in inside if not os.path.isabs(s)}


def _archived(path: str, by_name: dict[str, list[str]], compiled: dict[str, str],
              hashes: dict[str, str]) -> set[str]:
    """The sources of the build's objects that the archive at `path` holds: a member
    and an object of one name and the same bytes."""
    try:
        if not archive.is_archive(path):
            return set()
        members = archive.read_members(path)
    except (OSError, archive.ArchiveFormatError):
        return set()
    found: set[str] = set()
    for member in members:
        candidates = by_name.get(os.path.basename(member.name), [])
        if not candidates:
            continue
        digest = hash_bytes(member.data)
        for obj in candidates:
            if obj not in hashes:
                hashes[obj] = _hash(obj)
            if hashes[obj] == digest:
                found.add(compiled[obj])
    return found


def _hash(path: str) -> str:
    try:
        return hash_file(path)
    except OSError:
        return ""

