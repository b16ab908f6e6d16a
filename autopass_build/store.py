"""The store, `.autopass/`: a SQLite (WAL) index plus content-addressed blobs.

Layout::

    .autopass/store.db          units, skipped commands, links, archives, compilers
    .autopass/blobs/ir/ab/<hash>.bc
    .autopass/tmp/              scratch files, renamed into blobs/ when complete
    .autopass/autopass.log      one line per failure of autopass itself

Blobs are written to tmp/ and renamed into place (atomic on POSIX), and a row names a
blob only after the rename, so a writer killed at any point leaves either nothing or
a complete blob.  Every write is one short transaction; SQLite's WAL mode and a busy
timeout make `make -j32` and two builds sharing a store safe.

Paths are stored as bytes (`os.fsencode`) so that non-UTF-8 names round-trip; argv
lists are stored as JSON, whose escapes round-trip Python's surrogateescape strings.
This module is imported by the compiler wrapper: keep its imports light.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from dataclasses import dataclass, field

try:  # the C module directly: hashlib's import costs milliseconds per compile
    from _blake2 import blake2b
except ImportError:  # pragma: no cover - CPython always has it
    from hashlib import blake2b

SCHEMA_VERSION = 1
STORE_DIRNAME = ".autopass"
DB_NAME = "store.db"
BUSY_TIMEOUT_S = 120.0

SCHEMA = """
CREATE TABLE IF NOT EXISTS units(
    id TEXT PRIMARY KEY,
    source BLOB NOT NULL, source_rel BLOB NOT NULL, cwd BLOB NOT NULL,
    compiler BLOB NOT NULL, argv TEXT NOT NULL, output BLOB, language TEXT NOT NULL,
    opt_level TEXT NOT NULL, source_hash TEXT NOT NULL, object_hash TEXT,
    ir_hash TEXT NOT NULL, compiler_id TEXT NOT NULL, recorded_at REAL NOT NULL);
CREATE INDEX IF NOT EXISTS units_by_object ON units(object_hash);
CREATE INDEX IF NOT EXISTS units_by_output ON units(output);
CREATE TABLE IF NOT EXISTS skipped(
    key TEXT PRIMARY KEY, cwd BLOB NOT NULL, argv TEXT NOT NULL, sources TEXT NOT NULL,
    reason TEXT NOT NULL, detail TEXT NOT NULL, recorded_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS links(
    output BLOB PRIMARY KEY, cwd BLOB NOT NULL, compiler BLOB NOT NULL, argv TEXT NOT NULL,
    kind TEXT NOT NULL, inputs TEXT NOT NULL, output_hash TEXT, recorded_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS archives(
    hash TEXT PRIMARY KEY, path BLOB NOT NULL, members TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS compilers(
    path BLOB PRIMARY KEY, stamp TEXT NOT NULL, identity TEXT NOT NULL);
"""


def hash_bytes(data: bytes) -> str:
    return blake2b(data, digest_size=20).hexdigest()


def hash_file(path: str) -> str:
    digest = blake2b(digest_size=20)
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def hash_json(value: object) -> str:
    return hash_bytes(json.dumps(value, sort_keys=True).encode())


def _b(path: str | None) -> bytes | None:
    return None if path is None else os.fsencode(path)


def _s(blob: bytes | None) -> str | None:
    return None if blob is None else os.fsdecode(blob)


@dataclass
class UnitRecord:
    """One translation unit: a source compiled with one command into one object."""
    id: str
    source: str            # absolute
    source_rel: str        # relative to the project root (absolute when outside it)
    cwd: str
    compiler: str          # the real compiler that ran
    argv: list[str]        # arguments after the compiler, expanded, as classified
    output: str | None     # absolute object path; None when compiled and linked in one call
    language: str
    opt_level: str
    source_hash: str
    object_hash: str | None
    ir_hash: str
    compiler_id: str
    recorded_at: float = field(default_factory=time.time)


@dataclass
class SkipRecord:
    cwd: str
    argv: list[str]
    sources: list[str]
    reason: str
    detail: str = ""
    recorded_at: float = field(default_factory=time.time)


@dataclass
class LinkInput:
    kind: str     # "object", "archive", "shared", "unit" (compiled in the same call)
    path: str     # absolute; for "unit", the unit id
    hash: str | None = None


@dataclass
class LinkRecord:
    output: str            # absolute
    cwd: str
    compiler: str
    argv: list[str]
    kind: str              # "executable" or "shared"
    inputs: list[LinkInput]
    output_hash: str | None
    recorded_at: float = field(default_factory=time.time)


@dataclass
class ArchiveRecord:
    hash: str
    path: str
    members: list[tuple[str, str]]  # (member name, content hash), archive order


class StoreError(Exception):
    pass


class Store:
    def __init__(self, directory: str):
        self.dir = os.path.abspath(directory)
        self.db_path = os.path.join(self.dir, DB_NAME)
        self.tmp_dir = os.path.join(self.dir, "tmp")
        self._conn: sqlite3.Connection | None = None

    # -- opening ------------------------------------------------------------------------
    @classmethod
    def create(cls, directory: str) -> "Store":
        store = cls(directory)
        for sub in ("", "tmp", "blobs", "blobs/ir"):
            os.makedirs(os.path.join(store.dir, sub), exist_ok=True)
        gitignore = os.path.join(store.dir, ".gitignore")
        if not os.path.exists(gitignore):
            with open(gitignore, "w") as handle:
                handle.write("*\n")
        store.connection()
        return store

    @classmethod
    def open_existing(cls, directory: str) -> "Store":
        store = cls(directory)
        if not os.path.isfile(store.db_path):
            raise StoreError(f"no autopass store at {store.dir} (run `autopass record -- "
                             "<your build command>` first, or pass --store DIR)")
        return store

    def connection(self) -> sqlite3.Connection:
        if self._conn is None:
            conn = sqlite3.connect(self.db_path, timeout=BUSY_TIMEOUT_S,
                                   isolation_level=None)
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version == 0:
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("BEGIN IMMEDIATE")
                for statement in SCHEMA.split(";"):
                    if statement.strip():
                        conn.execute(statement)
                conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
                conn.execute("COMMIT")
            elif version != SCHEMA_VERSION:
                conn.close()
                raise StoreError(f"store {self.dir} has schema {version}, this autopass "
                                 f"expects {SCHEMA_VERSION}; remove the folder and record again")
            conn.execute("PRAGMA synchronous=NORMAL")
            self._conn = conn
        return self._conn

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    # -- blobs --------------------------------------------------------------------------
    def new_tmp_path(self, suffix: str) -> str:
        name = f"{os.getpid()}-{time.monotonic_ns()}{suffix}"
        return os.path.join(self.tmp_dir, name)

    def blob_path(self, kind: str, digest: str, suffix: str) -> str:
        return os.path.join(self.dir, "blobs", kind, digest[:2], digest + suffix)

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

    # -- writes -------------------------------------------------------------------------
    def _write(self, statements: list[tuple[str, tuple]]) -> None:
        conn = self.connection()
        conn.execute("BEGIN IMMEDIATE")
        try:
            for sql, params in statements:
                conn.execute(sql, params)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    def record_units(self, units: list[UnitRecord]) -> None:
        statements = []
        for u in units:
            if u.output is not None:
                # The object file was overwritten: whatever made it before is gone.
                statements.append(("DELETE FROM units WHERE output = ? AND id != ?",
                                   (_b(u.output), u.id)))
            statements.append((
                "INSERT OR REPLACE INTO units VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (u.id, _b(u.source), _b(u.source_rel), _b(u.cwd), _b(u.compiler),
                 json.dumps(u.argv), _b(u.output), u.language, u.opt_level, u.source_hash,
                 u.object_hash, u.ir_hash, u.compiler_id, u.recorded_at)))
        self._write(statements)

    def record_skip(self, skip: SkipRecord) -> None:
        key = hash_json([skip.cwd, skip.argv])
        self._write([("INSERT OR REPLACE INTO skipped VALUES (?,?,?,?,?,?,?)",
                      (key, _b(skip.cwd), json.dumps(skip.argv), json.dumps(skip.sources),
                       skip.reason, skip.detail, skip.recorded_at))])

    def record_link(self, link: LinkRecord, archives: list[ArchiveRecord]) -> None:
        statements = [("INSERT OR REPLACE INTO archives VALUES (?,?,?)",
                       (a.hash, _b(a.path), json.dumps(a.members))) for a in archives]
        inputs = [[i.kind, i.path, i.hash] for i in link.inputs]
        statements.append(("INSERT OR REPLACE INTO links VALUES (?,?,?,?,?,?,?,?)",
                           (_b(link.output), _b(link.cwd), _b(link.compiler),
                            json.dumps(link.argv), link.kind, json.dumps(inputs),
                            link.output_hash, link.recorded_at)))
        self._write(statements)

    def compiler_identity(self, path: str, stamp: str) -> str | None:
        row = self.connection().execute(
            "SELECT identity FROM compilers WHERE path = ? AND stamp = ?",
            (_b(path), stamp)).fetchone()
        return row[0] if row else None

    def remember_compiler(self, path: str, stamp: str, identity: str) -> None:
        self._write([("INSERT OR REPLACE INTO compilers VALUES (?,?,?)",
                      (_b(path), stamp, identity))])

    def log(self, line: str) -> None:
        """Append one line to the store's log; never raises."""
        try:
            with open(os.path.join(self.dir, "autopass.log"), "a") as handle:
                handle.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} pid={os.getpid()} {line}\n")
        except OSError:
            pass

    # -- reads --------------------------------------------------------------------------
    def units(self) -> list[UnitRecord]:
        rows = self.connection().execute(
            "SELECT * FROM units ORDER BY source_rel, output").fetchall()
        return [_unit_from_row(r) for r in rows]

    def skipped(self) -> list[SkipRecord]:
        rows = self.connection().execute(
            "SELECT cwd, argv, sources, reason, detail, recorded_at FROM skipped "
            "ORDER BY reason, recorded_at").fetchall()
        return [SkipRecord(_s(r[0]), json.loads(r[1]), json.loads(r[2]), r[3], r[4], r[5])
                for r in rows]

    def links(self) -> list[LinkRecord]:
        rows = self.connection().execute("SELECT * FROM links ORDER BY output").fetchall()
        return [LinkRecord(_s(r[0]), _s(r[1]), _s(r[2]), json.loads(r[3]), r[4],
                           [LinkInput(*i) for i in json.loads(r[5])], r[6], r[7])
                for r in rows]

    def archive(self, digest: str) -> ArchiveRecord | None:
        row = self.connection().execute(
            "SELECT hash, path, members FROM archives WHERE hash = ?", (digest,)).fetchone()
        if row is None:
            return None
        return ArchiveRecord(row[0], _s(row[1]), [tuple(m) for m in json.loads(row[2])])

    def log_lines(self) -> list[str]:
        try:
            with open(os.path.join(self.dir, "autopass.log")) as handle:
                return handle.read().splitlines()
        except OSError:
            return []


def _unit_from_row(r: tuple) -> UnitRecord:
    return UnitRecord(id=r[0], source=_s(r[1]), source_rel=_s(r[2]), cwd=_s(r[3]),
                      compiler=_s(r[4]), argv=json.loads(r[5]), output=_s(r[6]),
                      language=r[7], opt_level=r[8], source_hash=r[9], object_hash=r[10],
                      ir_hash=r[11], compiler_id=r[12], recorded_at=r[13])


def find_store_dir(start: str) -> str | None:
    """The nearest `.autopass/` holding a store, from `start` upwards."""
    current = os.path.abspath(start)
    while True:
        candidate = os.path.join(current, STORE_DIRNAME)
        if os.path.isfile(os.path.join(candidate, DB_NAME)):
            return candidate
        parent = os.path.dirname(current)
        if parent == current:
            return None
        current = parent
