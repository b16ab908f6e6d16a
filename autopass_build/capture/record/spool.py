"""The store's write side, used by the compiler wrapper in every compile.

A compile must not pay for SQLite, `json` or `dataclasses` (on a 2-core VM those
imports cost 10-45 ms each, per compile).  So the wrapper writes:

    .autopass/blobs/ir/ab/<hash>.bc.z   content-addressed IR, zlib-compressed, renamed
                                        into place (the hash is of the IR itself)
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
import zlib
from _thread import get_ident

from autopass_build.core.files import hash_bytes, to_json
from autopass_build.core.names import STORE_DIRNAME
from autopass_build.core.proc import alive

SPOOL = "spool"
TMP = "tmp"
BLOBS = "blobs"
COMPILERS = "compilers"
LOG = "autopass.log"
# Blobs are kept compressed (zlib, in the standard library: the wrapper runs without
# site-packages).  LLVM bitcode takes a third of a store's room then: 32 MB of GEOS's IR
# became 12 MB at level 6, for about 2 ms a unit.  Stores written before hold plain
# files, which are read as they are.
PACKED = ".z"
PACK_LEVEL = 6
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
            self.write_file(gitignore, b"*\n")

    def new_tmp_path(self, suffix: str) -> str:
        """A name no other process or thread takes (the wrapper's server and replay's
        compiles run several threads); remembered, so that an interrupted wrapper can
        remove what it left (remove_tmp_files)."""
        global _counter
        _counter += 1
        path = self.path(TMP, f"{os.getpid()}-{get_ident()}-{time.monotonic_ns()}-"
                              f"{_counter}{suffix}")
        _issued.append(path)
        return path

    def sweep_tmp(self) -> int:
        """Remove what wrappers killed by SIGKILL left in tmp/ (their process is gone);
        how many files.  `autopass record` sweeps before a build."""
        removed = 0
        try:
            names = os.listdir(self.path(TMP))
        except OSError:
            return 0
        for name in names:
            pid = name.split("-", 1)[0]
            if pid.isdigit() and not alive(int(pid)):
                try:
                    os.unlink(self.path(TMP, name))
                    removed += 1
                except OSError:
                    pass
        return removed

    def blob_path(self, kind: str, digest: str, suffix: str) -> str:
        return self.path(BLOBS, kind, digest[:2], digest + suffix)

    def adopt_blob(self, kind: str, tmp_path: str, suffix: str) -> str:
        """Take a finished temporary file into the blob store (and remove it); return its
        hash."""
        with open(tmp_path, "rb") as handle:
            data = handle.read()
        digest = self.keep_bytes(kind, data, suffix)
        os.unlink(tmp_path)
        return digest

    def stored_blob(self, kind: str, digest: str, suffix: str) -> str | None:
        """The blob's file as it is stored (compressed, or plain in an older store), or
        None when the store does not hold it."""
        plain = self.blob_path(kind, digest, suffix)
        for path in (plain + PACKED, plain):
            if os.path.exists(path):
                return path
        return None

    def read_blob(self, kind: str, digest: str, suffix: str) -> bytes:
        """The blob's content (FileNotFoundError when the store does not hold it)."""
        path = self.stored_blob(kind, digest, suffix)
        if path is None:
            raise FileNotFoundError(self.blob_path(kind, digest, suffix))
        with open(path, "rb") as handle:
            data = handle.read()
        return zlib.decompress(data) if path.endswith(PACKED) else data

    def keep_file(self, kind: str, path: str, suffix: str) -> str:
        """Store a copy of the file at `path` as a blob (deduplicated); return its hash.

        Link inputs are kept so that replay never depends on build outputs that a later
        `make clean` or rebuild removes or rewrites.
        """
        with open(path, "rb") as handle:
            return self.keep_bytes(kind, handle.read(), suffix)

    def keep_bytes(self, kind: str, data: bytes, suffix: str) -> str:
        """Store `data` as a blob, compressed (deduplicated); return its hash."""
        digest = hash_bytes(data)
        if self.stored_blob(kind, digest, suffix) is None:
            final = self.blob_path(kind, digest, suffix) + PACKED
            os.makedirs(os.path.dirname(final), exist_ok=True)
            self.write_file(final, zlib.compress(data, PACK_LEVEL))
        return digest

    def write_file(self, final: str, data: bytes) -> None:
        """`final` holds `data`, or is as it was: written beside, then renamed."""
        tmp = self.new_tmp_path(".part")
        with open(tmp, "wb") as handle:
            handle.write(data)
        os.replace(tmp, final)

    def write_record(self, record: dict) -> None:
        global _counter
        _counter += 1
        name = f"{time.time_ns():020d}-{os.getpid()}-{_counter}.json"
        self.write_file(self.path(SPOOL, name), to_json(record).encode())

    def compiler_text(self, stamp: str) -> str | None:
        try:
            with open(self.path(COMPILERS, hash_bytes(stamp.encode())), encoding="utf-8") as f:
                return f.read()
        except OSError:
            return None

    def remember_compiler(self, stamp: str, text: str) -> None:
        self.write_file(self.path(COMPILERS, hash_bytes(stamp.encode())),
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


_issued: list[str] = []      # the temporary files this process named (new_tmp_path)


def remove_tmp_files() -> None:
    """Remove the temporary files this process named and left (an interrupted wrapper:
    its half-written IR and its .part files, which no later record would remove)."""
    for path in _issued:
        for leftover in (path, path + ".part"):
            try:
                os.unlink(leftover)
            except OSError:
                pass


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
