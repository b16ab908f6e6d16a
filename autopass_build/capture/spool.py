"""The store's write side, used by the compiler wrapper in every compile.

A compile must not pay for SQLite, `json` or `dataclasses` (on a 2-core VM those
imports cost 10-45 ms each, per compile).  So the wrapper writes:

    .autopass/blobs/ir/ab/<hash>.bc     content-addressed IR, renamed into place
    .autopass/spool/<ns>-<pid>-<n>.json one record per file, renamed into place
    .autopass/compilers/<key>           cached `clang --version` output
    .autopass/autopass.log              one line per failure of autopass itself

and `store.Store` ingests the spool into its SQLite index when anything reads it.
Every file appears by atomic rename, so a writer killed at any point leaves either
nothing or a complete file; `make -j32` needs no locking at all here.
"""

from __future__ import annotations

import os
import time

from autopass_build.core.files import hash_bytes, hash_file, to_json
from autopass_build.core.names import STORE_DIRNAME

SPOOL = "spool"
TMP = "tmp"
BLOBS = "blobs"
COMPILERS = "compilers"
LOG = "autopass.log"
_counter = 0


class Spool:
    def __init__(self, store_dir: str):
        self.dir = os.path.abspath(store_dir)

    def path(self, *parts: str) -> str:
        return os.path.join(self.dir, *parts)

    def prepare(self) -> None:
        for sub in (TMP, SPOOL, BLOBS, COMPILERS):
            os.makedirs(self.path(sub), exist_ok=True)
        gitignore = self.path(".gitignore")
        if not os.path.exists(gitignore):
            self._write_atomically(gitignore, b"*\n")

    def new_tmp_path(self, suffix: str) -> str:
        global _counter
        _counter += 1
        return self.path(TMP, f"{os.getpid()}-{time.monotonic_ns()}-{_counter}{suffix}")

    def blob_path(self, kind: str, digest: str, suffix: str) -> str:
        return self.path(BLOBS, kind, digest[:2], digest + suffix)

    def adopt_blob(self, kind: str, tmp_path: str, suffix: str) -> str:
        """Move a finished temporary file into the blob store; return its hash."""
        digest = hash_file(tmp_path)
        final = self.blob_path(kind, digest, suffix)
        if os.path.exists(final):
            os.unlink(tmp_path)
        else:
            os.makedirs(os.path.dirname(final), exist_ok=True)
            os.replace(tmp_path, final)
        return digest

    def keep_file(self, kind: str, path: str, suffix: str) -> str:
        """Store a copy of the file at `path` as a blob (deduplicated); return its hash.

        Link inputs are kept so that replay never depends on build outputs that a later
        `make clean` or rebuild removes or rewrites.
        """
        with open(path, "rb") as handle:
            return self.keep_bytes(kind, handle.read(), suffix)

    def keep_bytes(self, kind: str, data: bytes, suffix: str) -> str:
        """Store `data` as a blob (deduplicated); return its hash."""
        digest = hash_bytes(data)
        final = self.blob_path(kind, digest, suffix)
        if not os.path.exists(final):
            os.makedirs(os.path.dirname(final), exist_ok=True)
            self._write_atomically(final, data)
        return digest

    def _write_atomically(self, final: str, data: bytes) -> None:
        tmp = self.new_tmp_path(".part")
        with open(tmp, "wb") as handle:
            handle.write(data)
        os.replace(tmp, final)

    def write_record(self, record: dict) -> None:
        global _counter
        _counter += 1
        name = f"{time.time_ns():020d}-{os.getpid()}-{_counter}.json"
        self._write_atomically(self.path(SPOOL, name), to_json(record).encode())

    def compiler_text(self, stamp: str) -> str | None:
        try:
            with open(self.path(COMPILERS, hash_bytes(stamp.encode())), encoding="utf-8") as f:
                return f.read()
        except OSError:
            return None

    def remember_compiler(self, stamp: str, text: str) -> None:
        self._write_atomically(self.path(COMPILERS, hash_bytes(stamp.encode())),
                               text.encode("utf-8"))

    def log(self, line: str) -> None:
        """Append one line to the store's log; never raises."""
        try:
            with open(self.path(LOG), "a") as handle:
                handle.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} pid={os.getpid()} {line}\n")
        except OSError:
            pass

    def log_lines(self) -> list[str]:
        try:
            with open(self.path(LOG)) as handle:
                return handle.read().splitlines()
        except OSError:
            return []


def find_store_dir(start: str) -> str | None:
    """The nearest `.autopass/` holding a store, from `start` upwards."""
    current = os.path.abspath(start)
    while True:
        candidate = os.path.join(current, STORE_DIRNAME)
        if os.path.isdir(os.path.join(candidate, SPOOL)):
            return candidate
        parent = os.path.dirname(current)
        if parent == current:
            return None
        current = parent
