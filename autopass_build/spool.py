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
from _json import encode_basestring_ascii

try:  # the C module directly: `hashlib` loads OpenSSL, milliseconds per compile
    from _blake2 import blake2b
except ImportError:  # pragma: no cover - CPython always has it
    from hashlib import blake2b

STORE_DIRNAME = ".autopass"
SPOOL = "spool"
TMP = "tmp"
BLOBS = "blobs"
COMPILERS = "compilers"
LOG = "autopass.log"
_counter = 0


def hash_bytes(data: bytes) -> str:
    return blake2b(data, digest_size=20).hexdigest()


def hash_file(path: str) -> str:
    digest = blake2b(digest_size=20)
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def to_json(value: object) -> str:
    """JSON for dicts, lists, strings, numbers, booleans and None (stdlib `json` reads it).

    Strings are ASCII-escaped, so surrogate-escaped bytes of non-UTF-8 paths
    round-trip through `json.loads`.
    """
    if isinstance(value, str):
        return encode_basestring_ascii(value)
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, dict):
        return "{" + ",".join(f"{encode_basestring_ascii(k)}:{to_json(v)}"
                              for k, v in sorted(value.items())) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(to_json(v) for v in value) + "]"
    raise TypeError(f"cannot encode {type(value).__name__} as JSON")


def hash_json(value: object) -> str:
    return hash_bytes(to_json(value).encode())


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
            data = handle.read()
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


def write_atomic(path: str, data: bytes, durable: bool = False) -> None:
    """Replace `path` with `data` all at once: a crash leaves the old file or the new
    one.  `durable` also fsyncs before the rename (journals, the flags database)."""
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        with open(tmp, "wb") as handle:
            handle.write(data)
            if durable:
                handle.flush()
                os.fsync(handle.fileno())
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def user_cache_dir(*parts: str) -> str:
    """$XDG_CACHE_HOME/autopass/... (default ~/.cache): caches that outlive a store."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "autopass", *parts)


def relative_to(path: str, root: str) -> str:
    """`path` relative to `root`, or unchanged (absolute) when it lies outside it."""
    rel = os.path.relpath(path, root)
    return path if rel.startswith("..") else rel


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
