"""What the profile-trained stages share (PGO, BOLT): the training run, the merged
profile kept in the store by content hash, and the small JSON record of the last one.

    instrumented binary ──[run].train, or the benchmark──▶ raw profiles (the stage merges)
    merged profile ──▶ .autopass/blobs/<kind>/<hash><ext>   (a new profile, a new name)
    record ──▶ .autopass/<stage>.json  (read back only if its profile is still intact)
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import TYPE_CHECKING, TypeVar

from autopass_build.core import proc
from autopass_build.core.errors import AutopassError
from autopass_build.core.files import copy_atomic, disk_full, hash_bytes, hash_file, write_atomic
from autopass_build.measuring.benchmark import Benchmark
from autopass_build.store.index import Store, StoreError

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

Trained = TypeVar("Trained", bound="DataclassInstance")


class TrainingError(AutopassError):
    """The training run failed or wrote nothing; the message says which."""


def run(bench: Benchmark, binary: str, env: dict[str, str], show) -> None:
    """Run `[run].train` (else the benchmark) on the instrumented `binary`."""
    argv = [t.replace("{exe}", binary) for t in bench.run.train] or bench.argv(binary)
    show(f"training: running {'[run].train' if bench.run.train else 'the benchmark'} "
         "on the instrumented build")
    done = proc.run_captured(argv, bench.cwd, env, timeout=bench.run.timeout * 10,
                             stdin=None if bench.run.train else bench.stdin)
    # The benchmark's own exit status is its business (minisat exits 20 for "unsatisfiable",
    # grep 1 for "no match"): the measured runs check it against the baseline's.  A
    # training command of its own must exit 0.
    if done.timed_out or done.status < 0 or (done.status != 0 and bench.run.train):
        how = ("timed out" if done.timed_out else f"killed by signal {-done.status}"
               if done.status < 0 else f"exit {done.status}")
        said = [line.strip() for line in done.stderr.decode("utf-8", "replace").splitlines()
                if line.strip()]
        raise TrainingError(f"the training run failed ({how})"
                            + (f": {said[-1][:200]}" if said else ""))


def keep(store: Store, merged: str, kind: str, ext: str) -> tuple[str, str]:
    """The merged profile copied into the store under its hash: (path, hash).  Whole or
    not at all (a copy cut short by a full disk or a signal never bears the name); a
    store that cannot take it is a StoreError that says why."""
    digest = hash_file(merged)
    path = store.blob_path(kind, digest, ext)
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        copy_atomic(merged, path)
    except OSError as error:
        raise StoreError(_cannot_keep(f"the trained {kind}", store.dir, error)) from None
    return path, digest


def keep_bytes(store: Store, data: bytes, kind: str, ext: str, digest: str) -> str:
    """A profile that arrived as bytes (from a cluster node) kept in the store under
    `digest`, its path; a StoreError when the bytes are not `digest`'s (damaged on the
    way: nothing kept) or the store cannot take them."""
    if hash_bytes(data) != digest:
        raise StoreError(f"a trained {kind} arrived damaged (its hash is not "
                         f"{digest[:12]}): tune again")
    path = store.blob_path(kind, digest, ext)
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if not os.path.isfile(path):
            write_atomic(path, data)
    except OSError as error:
        raise StoreError(_cannot_keep(f"the trained {kind}", store.dir, error)) from None
    return path


def save(store_dir: str, name: str, record: DataclassInstance) -> None:
    """The record of the last trained profile, replaced at once (core/files.py)."""
    text = json.dumps(dataclasses.asdict(record), indent=1).encode()
    try:
        write_atomic(os.path.join(store_dir, name), text)
    except OSError as error:
        raise StoreError(_cannot_keep(name, store_dir, error)) from None


def _cannot_keep(what: str, store_dir: str, error: OSError) -> str:
    why = "its disk is full" if disk_full(store_dir) else (error.strerror or str(error))
    return f"cannot keep {what} in {store_dir} ({why}): free space or fix permissions"


def load(store_dir: str, name: str, kind: type[Trained]) -> Trained | None:
    """The record `name` as a `kind` (a dataclass with `path` and `hash`), if every field
    has its declared type and the profile it names is intact; else None (damaged files
    are trained again, never trusted)."""
    try:
        with open(os.path.join(store_dir, name)) as handle:
            found = kind(**json.load(handle))
    except (OSError, ValueError, TypeError, RecursionError):
        return None
    types = {"str": str, "int": int}
    for field in dataclasses.fields(kind):
        wanted = types.get(str(field.type))
        if wanted and not isinstance(getattr(found, field.name), wanted):
            return None
    path, digest = getattr(found, "path"), getattr(found, "hash")
    if not os.path.isfile(path) or hash_file(path) != digest:
        return None
    return found
