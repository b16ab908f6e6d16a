"""What `verify`'s clean builds must not take from the user: the files [build].clean
deletes that the build does not make again.

giflib's `make clean` deletes the man pages its tarball ships; `make` then wants xmlto
to write them again, and without it they were simply gone after `autopass verify`
(whose [build].clean `init` had written).  Before the first clean, every file of the
tree is hard-linked into a folder of the store (no data is copied); after that clean,
only the links of the files it deleted are kept (no file the builds see has a second
link), and at the end each of them that is missing from the tree is put back.  A file
the build makes again is left as the build made it.

Where hard links cannot be made (the store on another file system), nothing is kept,
and `verify` says so once.
"""

from __future__ import annotations

import functools
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from autopass_build.core.errors import AutopassError

SKIPPED = {".git", ".hg", ".svn"}
MAX_FILES = 200_000


@dataclass(frozen=True)
class Snapshot:
    tree: str
    links: str            # the hard links, by their path in the tree
    symlinks: tuple[tuple[str, str], ...]   # (path in the tree, where it points)


class SnapshotError(AutopassError):
    """The tree cannot be kept (another file system, too many files); says why."""


PREFIX = "verify-snapshot-"


def leftovers(tree: str, scratch: str) -> list[Snapshot]:
    """The snapshots a verify killed before its end left in `scratch` (their files
    missing from the tree are still the user's; their symbolic links are lost)."""
    return [Snapshot(tree, os.path.join(scratch, name), ())
            for name in sorted(os.listdir(scratch)) if name.startswith(PREFIX)]


def take(tree: str, scratch: str) -> Snapshot:
    """Hard links of every file under `tree` (but `scratch`, itself in the tree or not,
    and version-control folders) in a new folder of `scratch`."""
    links = tempfile.mkdtemp(prefix=PREFIX, dir=scratch)
    symlinks: list[tuple[str, str]] = []
    count = 0
    try:
        for folder, folders, files in os.walk(tree):
            folders[:] = [d for d in folders if d not in SKIPPED and not _same(
                os.path.join(folder, d), scratch)]
            for name in files:
                path = os.path.join(folder, name)
                rel = os.path.relpath(path, tree)
                if os.path.islink(path):
                    symlinks.append((rel, os.readlink(path)))
                    continue
                count += 1
                if count > MAX_FILES:
                    raise SnapshotError(f"the tree holds more than {MAX_FILES:,} files")
                os.makedirs(os.path.dirname(os.path.join(links, rel)), exist_ok=True)
                os.link(path, os.path.join(links, rel))
    except SnapshotError:
        shutil.rmtree(links, ignore_errors=True)
        raise
    except OSError as error:
        shutil.rmtree(links, ignore_errors=True)
        raise SnapshotError(f"cannot hard-link the tree's files into {scratch} "
                            f"({error.strerror or error})") from None
    return Snapshot(tree, links, tuple(symlinks))


def keep_deleted_only(snapshot: Snapshot) -> None:
    """Drop the links of the files still in the tree (after the first clean): while the
    builds run, no file of the tree then has a second link (gzip, for one, refuses to
    compress a file that has)."""
    for kept, rel in _kept(snapshot):
        if os.path.lexists(os.path.join(snapshot.tree, rel)):
            os.unlink(kept)


def restore(snapshot: Snapshot) -> list[str]:
    """Put back the files missing from the tree; their paths in the tree, sorted.  The
    snapshot's folder is removed."""
    put_back = []
    try:
        for kept, rel in _kept(snapshot):
            if _put_back(os.path.join(snapshot.tree, rel), functools.partial(os.link, kept)):
                put_back.append(rel)
        for rel, target in snapshot.symlinks:
            if _put_back(os.path.join(snapshot.tree, rel),
                         functools.partial(os.symlink, target)):
                put_back.append(rel)
    finally:
        shutil.rmtree(snapshot.links, ignore_errors=True)
    return sorted(put_back)


def _kept(snapshot: Snapshot) -> Iterator[tuple[str, str]]:
    """Each hard link the snapshot holds, with its path in the tree."""
    for folder, _, files in os.walk(snapshot.links):
        for name in files:
            kept = os.path.join(folder, name)
            yield kept, os.path.relpath(kept, snapshot.links)


def _put_back(path: str, make: Callable[[str], None]) -> bool:
    """Make `path` with `make` (a hard link, a symbolic link) where nothing is."""
    if os.path.lexists(path):
        return False
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        make(path)
    except OSError:
        return False      # a folder made a file, or a file a folder: the build's choice
    return True


def _same(path: str, other: str) -> bool:
    try:
        return os.path.samefile(path, other)
    except OSError:
        return False
