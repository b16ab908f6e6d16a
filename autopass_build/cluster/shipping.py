"""The project shipped to nodes that do not share the driver's filesystem.

A node's bench replays the recorded build: it needs the store (the units' IR, command
lines, links), the sources and headers an LTO unit compiles from, the prebuilt
libraries and the benchmark's inputs in the tree.  Where a node cannot see the store
at the driver's path, the driver packs the project tree once (the store's scratch and
runs left out), names the archive by its SHA-256, and hands it to Ray's object store;
each node that needs it fetches it once, checks the hash, unpacks it into a folder of
its own cache named by that hash, and works there.  The store knows its tree moved and
reads the recorded paths where the tree is now (store/location.py).

    driver ──pack (tar, sorted, hash-named)──▶ Ray object store ──▶ node: cached by hash?
           ──no: fetch, verify the hash, unpack beside, rename into place──▶ open the store
"""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import tarfile
from dataclasses import dataclass

from autopass_build.cluster.connect import ClusterError

# Inside the store: what the driver and the nodes write while they work, not the record.
LEFT_OUT = ("work", "runs", "tmp", "measuring.lock")
NODE_CACHE_ENV = "AUTOPASS_NODE_CACHE"       # where a node keeps shipped trees
DONE = ".complete"                          # written last: the tree is whole


@dataclass(frozen=True)
class ShippedTree:
    """A packed project tree, as the nodes get it."""
    digest: str           # SHA-256 of the archive: its name, checked on arrival
    size: int             # bytes
    archive: list         # [the archive's Ray object ref, or its bytes], nested: a ref is
                          # fetched only when the node has not the tree already
    root: str             # the tree's top on the driver
    store_rel: str        # the store inside it (".autopass")


def pack(root: str, store_dir: str) -> bytes:
    """The tree under `root` as a tar archive: files in sorted order with their modes and
    symbolic links, no owners or times (the same tree packs to the same bytes), less
    the store's scratch (LEFT_OUT)."""
    store_rel = os.path.relpath(store_dir, root)
    skipped = {os.path.normpath(os.path.join(store_rel, name)) for name in LEFT_OUT}
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as archive:
        for folder, dirs, files in os.walk(root):
            rel_folder = os.path.relpath(folder, root)
            dirs[:] = sorted(d for d in dirs if os.path.normpath(
                os.path.join(rel_folder, d)) not in skipped)
            # folders too (an empty one may be where the benchmark writes), and links to
            # folders, which os.walk lists among them and does not enter
            for name in dirs + sorted(files):
                rel = os.path.normpath(os.path.join(rel_folder, name))
                if rel not in skipped:
                    archive.add(os.path.join(folder, name), arcname=rel, recursive=False,
                                filter=_anonymous)
    return buffer.getvalue()


def _anonymous(info: tarfile.TarInfo) -> tarfile.TarInfo:
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    info.mtime = 0
    return info


def ship(ray, root: str, store_dir: str) -> ShippedTree:
    """The tree packed and put in the cluster's object store."""
    data = pack(root, store_dir)
    return ShippedTree(hashlib.sha256(data).hexdigest(), len(data), [ray.put(data)], root,
                    os.path.relpath(store_dir, root))


def node_cache() -> str:
    return os.environ.get(NODE_CACHE_ENV) or os.path.join(
        os.path.expanduser("~"), ".cache", "autopass", "node-trees")


def unpacked(shipped: ShippedTree) -> str:
    """On a node: the shipped tree's root here, fetched, verified and unpacked once per
    hash (a later run, or another bench of this host, reuses it)."""
    home = os.path.join(node_cache(), shipped.digest[:32])
    tree = os.path.join(home, "tree")
    if os.path.exists(os.path.join(home, DONE)):
        return tree
    data = shipped.archive[0]
    if not isinstance(data, bytes):
        import ray

        data = ray.get(data)
    if hashlib.sha256(data).hexdigest() != shipped.digest:
        raise ClusterError(f"the shipped project arrived damaged (its SHA-256 is not "
                           f"{shipped.digest[:16]}...): run again")
    partial = f"{home}.partial-{os.getpid()}"
    shutil.rmtree(partial, ignore_errors=True)
    os.makedirs(partial)
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r") as archive:
            _extract(archive, os.path.join(partial, "tree"))
    except (tarfile.TarError, OSError) as error:
        shutil.rmtree(partial, ignore_errors=True)
        raise ClusterError(f"the shipped project could not be unpacked in {node_cache()} "
                           f"({error}): free space there, or set ${NODE_CACHE_ENV}") from None
    open(os.path.join(partial, DONE), "w").close()
    try:
        os.rename(partial, home)
    except OSError:                  # another bench of this host unpacked it first
        shutil.rmtree(partial, ignore_errors=True)
        if not os.path.exists(os.path.join(home, DONE)):
            raise
    return tree


def _extract(archive: tarfile.TarFile, into: str) -> None:
    """Every member inside `into`, none outside it (a link or name that would leave it
    is refused: Python's "data" filter where it has one)."""
    if hasattr(tarfile, "data_filter"):
        archive.extractall(into, filter="data")
        return
    top = os.path.realpath(into) + os.sep
    for member in archive.getmembers():
        target = os.path.realpath(os.path.join(into, member.name))
        if not target.startswith(top) or member.isdev():
            raise ClusterError(f"the shipped project holds {member.name!r}, outside its tree")
    archive.extractall(into)


def describe(shipped: ShippedTree) -> str:
    return f"{shipped.size / 1e6:.1f} MB, sha256 {shipped.digest[:12]}"


