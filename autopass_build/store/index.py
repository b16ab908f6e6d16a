"""The store, `.autopass/`: a SQLite (WAL) index over what the wrapper spooled.

The wrapper never opens the database (see `spool.py`: blobs and one JSON file per
record, written by atomic rename).  Any reader — `autopass units`, `targets`, the
tuner — first *ingests* the spool: in one transaction the records go into the index,
then the spool files are deleted.  Ingesting is idempotent (rows are keyed), so a
reader killed between commit and delete only re-applies the same records.

Paths are stored as bytes (`os.fsencode`) so that non-UTF-8 names round-trip; argv
lists are stored as JSON, whose escapes round-trip Python's surrogateescape strings.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from dataclasses import replace
from urllib.parse import quote

from autopass_build.capture.record.spool import SPOOL, Spool
from autopass_build.core.errors import AutopassError
from autopass_build.core.files import disk_full, write_atomic
from autopass_build.store import spool_records
from autopass_build.store.blob_files import BlobFiles
from autopass_build.store.build_records import (
    ArchiveRecord,
    LinkInput,
    LinkRecord,
    RecordedBuild,
    SkipRecord,
    UnitRecord,
)
from autopass_build.store.location import Location

SCHEMA_VERSION = 1
DB_NAME = "store.db"
BUILD_NAME = "build-command.json"
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
CREATE TABLE IF NOT EXISTS fidelity(
    unit_id TEXT PRIMARY KEY, ir_hash TEXT NOT NULL, reproduced INTEGER NOT NULL,
    reason TEXT NOT NULL, checked_at REAL NOT NULL);
"""


def _b(path: str | None) -> bytes | None:
    return None if path is None else os.fsencode(path)


def _s(blob: bytes | None) -> str | None:
    return None if blob is None else os.fsdecode(blob)


def _text(blob: bytes) -> str:
    """A NOT NULL path column."""
    return os.fsdecode(blob)


class StoreError(AutopassError):
    pass


class DamagedIndex(StoreError):
    """The index file is not a readable SQLite database (overwritten, truncated)."""

    def __init__(self, path: str, reason: str):
        self.what = f"the store index {path} is damaged ({reason})"
        super().__init__(f"{self.what}: record the build again (`autopass record -- <your "
                         "build command>` sets the damaged index aside)")


class Store(BlobFiles):
    def __init__(self, directory: str):
        self.dir = os.path.abspath(directory)
        self.db_path = os.path.join(self.dir, DB_NAME)
        self.spool = Spool(self.dir)
        self._conn: sqlite3.Connection | None = None
        self._ingested = False
        self.frozen = False        # opened read-only: its disk is full (F66)
        self.location = Location(self.dir)   # where its tree was recorded, where it is
        self.waiting = 0           # spool records not yet in the index (F66)

    # -- opening ------------------------------------------------------------------------
    @classmethod
    def create(cls, directory: str) -> "Store":
        store = cls(directory)
        store.spool.prepare()
        store.connection()
        return store

    @classmethod
    def open_existing(cls, directory: str) -> "Store":
        store = cls(directory)
        if not os.path.isdir(store.spool.path(SPOOL)) and not os.path.isfile(store.db_path):
            raise StoreError(f"no autopass store at {store.dir} (run `autopass record -- "
                             "<your build command>` first, or pass --store DIR)")
        return store

    def connection(self) -> sqlite3.Connection:
        try:
            return self._connection()
        except sqlite3.OperationalError as error:
            raise StoreError(f"cannot open the store index {self.db_path}: {error} (is the "
                             "disk full or the folder read-only?)") from None
        except sqlite3.DatabaseError as error:   # "file is not a database", "malformed"
            self._conn = None
            raise DamagedIndex(self.db_path, str(error)) from None
        except sqlite3.Error as error:
            raise StoreError(f"cannot open the store index {self.db_path}: {error}") from None

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            try:
                self._conn = self._open()
            except sqlite3.OperationalError:
                if not (disk_full(self.dir) and os.path.isfile(self.db_path)):
                    raise
                # Nothing can be written, not even the WAL's shared-memory file: what the
                # index holds is read as it is (the spool keeps the rest, F66).
                self._conn = _frozen(self.db_path)
                self.frozen = True
        return self._conn

    def _open(self) -> sqlite3.Connection:
        """The index, made if need be.  Two processes making it at once (two records into
        one new store, F68) meet a lock that SQLite's busy timeout does not wait on (the
        switch to WAL): the loser tries again shortly, until the timeout."""
        deadline = time.monotonic() + BUSY_TIMEOUT_S
        while True:
            try:
                return self._open_once()
            except sqlite3.OperationalError as error:
                if "locked" not in str(error) or time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def _open_once(self) -> sqlite3.Connection:
        os.makedirs(self.dir, exist_ok=True)
        conn = sqlite3.connect(self.db_path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
        try:
            version = self._made(conn)
        except sqlite3.Error:
            conn.close()
            raise
        if version != SCHEMA_VERSION:
            conn.close()
            raise StoreError(f"store {self.dir} has schema {version}, this autopass "
                             f"expects {SCHEMA_VERSION}; remove the folder and record again")
        conn.execute("PRAGMA synchronous=NORMAL")
        return conn

    @staticmethod
    def _made(conn: sqlite3.Connection) -> int:
        """The index's schema brought up to date if it is ours or new; its version."""
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version in (0, SCHEMA_VERSION):
            if version == 0:
                conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("BEGIN IMMEDIATE")
            for statement in SCHEMA.split(";"):  # IF NOT EXISTS: new tables appear
                if statement.strip():
                    conn.execute(statement)
            conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
            conn.execute("COMMIT")
            return SCHEMA_VERSION
        return version

    def set_aside_index(self) -> str:
        """Rename a damaged index (and its WAL files) out of the way, keeping it for
        whoever wants to look; the next connection starts a new one.  Its new name."""
        self.close()
        aside = f"{self.db_path}.damaged-{time.strftime('%Y%m%d-%H%M%S')}"
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(self.db_path + suffix):
                os.replace(self.db_path + suffix, aside + suffix)
        return aside

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    # -- ingesting the spool ------------------------------------------------------------
    def ingest(self) -> int:
        """Move spooled records into the index; return how many were ingested."""
        folder = self.spool.path(SPOOL)
        try:
            names = sorted(n for n in os.listdir(folder) if n.endswith(".json"))
        except FileNotFoundError:
            names = []
        self._ingested = True
        self.connection()
        if not names or self.frozen:     # nothing to add, or no room to add it
            self.waiting = len(names)
            return 0
        statements: list[tuple[str, tuple]] = []
        done = []
        for name in names:
            try:
                with open(os.path.join(folder, name), encoding="ascii") as handle:
                    record = json.load(handle)
                statements += spool_records.statements(record)
            except FileNotFoundError:
                continue  # another reader ingested it
            except (OSError, ValueError, spool_records.RecordError) as error:
                # Written only by the wrapper, atomically: a record that does not parse or
                # has the wrong shape was damaged or planted; it never stops a reader.
                self.spool.log(f"unreadable spool record {name} set aside: {error!r}")
                try:
                    os.replace(os.path.join(folder, name), os.path.join(folder, name + ".bad"))
                except OSError:
                    pass
                continue
            done.append(name)
        self._write(statements)
        for name in done:
            try:
                os.unlink(os.path.join(folder, name))
            except FileNotFoundError:
                pass
        return len(done)

    def _ensure_ingested(self) -> None:
        if not self._ingested:
            self.ingest()

    def _write(self, statements: list[tuple[str, tuple]]) -> None:
        """All of `statements` in the index, or none (the spool keeps what was not
        ingested); a full disk is a StoreError that says so (issue 45: a traceback of
        "database or disk is full", then "cannot rollback")."""
        conn = self.connection()
        try:
            conn.execute("BEGIN IMMEDIATE")
            for sql, params in statements:
                conn.execute(sql, params)
            conn.execute("COMMIT")
        except BaseException as error:
            if conn.in_transaction:
                try:
                    conn.execute("ROLLBACK")
                except sqlite3.Error:
                    pass
            if isinstance(error, sqlite3.OperationalError):
                raise StoreError(f"the store index {self.db_path} cannot take what this "
                                 f"build recorded ({error}); it waits in the spool, and any "
                                 "autopass command adds it once "
                                 + ("there is space again: free space on that disk"
                                    if disk_full(self.dir) else "the index can be written")
                                 ) from None
            raise

    # -- reads --------------------------------------------------------------------------
    def units(self) -> list[UnitRecord]:
        self._ensure_ingested()
        rows = self.connection().execute(
            "SELECT * FROM units ORDER BY source_rel, output").fetchall()
        units = [_unit_from_row(r) for r in rows]
        if self.location.moved() is None:
            return units
        return [replace(u, source=self.location.here(u.source), cwd=self.location.here(u.cwd),
                        output=self.location.here(u.output) if u.output else u.output,
                        argv=self.location.here_argv(u.argv)) for u in units]

    def skipped(self) -> list[SkipRecord]:
        self._ensure_ingested()
        rows = self.connection().execute(
            "SELECT cwd, argv, sources, reason, detail, recorded_at FROM skipped "
            "ORDER BY reason, recorded_at").fetchall()
        return [SkipRecord(self.location.here(_text(r[0])), json.loads(r[1]),
                           [self.location.here(p) for p in json.loads(r[2])], r[3], r[4], r[5])
                for r in rows]

    def links(self) -> list[LinkRecord]:
        self._ensure_ingested()
        rows = self.connection().execute("SELECT * FROM links ORDER BY output").fetchall()
        return [LinkRecord(self.location.here(_text(r[0])), self.location.here(_text(r[1])), _text(r[2]),
                           self.location.here_argv(json.loads(r[3])), r[4],
                           [LinkInput(i[0], i[1] if i[0] == "unit" else self.location.here(i[1]),
                                      *i[2:]) for i in json.loads(r[5])], r[6], r[7])
                for r in rows]

    def archive(self, digest: str) -> ArchiveRecord | None:
        self._ensure_ingested()
        row = self.connection().execute(
            "SELECT hash, path, members FROM archives WHERE hash = ?", (digest,)).fetchone()
        if row is None:
            return None
        return ArchiveRecord(row[0], self.location.here(_text(row[1])),
                             [tuple(m) for m in json.loads(row[2])])

    def archives(self) -> list[ArchiveRecord]:
        self._ensure_ingested()
        rows = self.connection().execute("SELECT hash, path, members FROM archives").fetchall()
        return [ArchiveRecord(r[0], self.location.here(_text(r[1])), [tuple(m) for m in json.loads(r[2])])
                for r in rows]

    # -- replay fidelity ----------------------------------------------------------------
    def record_fidelity(self, results: list[tuple[str, str, bool, str]]) -> None:
        """(unit id, IR hash, reproduced, reason) for each checked unit."""
        now = time.time()
        self._write([("INSERT OR REPLACE INTO fidelity VALUES (?,?,?,?,?)",
                      (uid, ir, int(ok), reason, now)) for uid, ir, ok, reason in results])

    def fidelity(self) -> dict[str, tuple[bool, str]]:
        rows = self.connection().execute(
            "SELECT f.unit_id, f.reproduced, f.reason FROM fidelity f JOIN units u "
            "ON u.id = f.unit_id AND u.ir_hash = f.ir_hash").fetchall()
        return {r[0]: (bool(r[1]), r[2]) for r in rows}

    def units_replayed_from_source(self) -> set[str]:
        return {uid for uid, (ok, _) in self.fidelity().items() if not ok}

    def log_lines(self) -> list[str]:
        return self.spool.log_lines()

    # -- the recorded build command (what `autopass init` writes in) ----------------------
    def remember_build(self, argv: list[str], cwd: str) -> None:
        """The command `autopass record` ran, and where: the build this store is of."""
        write_atomic(os.path.join(self.dir, BUILD_NAME),
                     json.dumps({"argv": argv, "cwd": os.path.abspath(cwd)}).encode())

    def recorded_build(self) -> RecordedBuild | None:
        """The build `autopass record` last ran into this store; None when it was not
        recorded that way (the wrapper alone, CMake's include) or the file is unreadable."""
        try:
            with open(os.path.join(self.dir, BUILD_NAME), "rb") as handle:
                data = json.load(handle)
            argv, cwd = data["argv"], data["cwd"]
        except (OSError, ValueError, KeyError, TypeError):
            return None
        if not (isinstance(argv, list) and argv and all(isinstance(a, str) for a in argv)
                and isinstance(cwd, str)):
            return None
        return RecordedBuild(argv, cwd)


def _frozen(path: str) -> sqlite3.Connection:
    """The index at `path` read as it is on disk, without writing a byte (its WAL is not
    read); an empty index of the schema where even that cannot be read."""
    conn = sqlite3.connect(f"file:{quote(path)}?immutable=1", uri=True, isolation_level=None)
    try:
        conn.execute("SELECT count(*) FROM units, links, skipped").fetchone()
        return conn
    except sqlite3.Error:
        conn.close()
    empty = sqlite3.connect(":memory:", isolation_level=None)
    for statement in SCHEMA.split(";"):
        if statement.strip():
            empty.execute(statement)
    return empty


def _unit_from_row(r: tuple) -> UnitRecord:
    return UnitRecord(id=r[0], source=_text(r[1]), source_rel=_text(r[2]), cwd=_text(r[3]),
                      compiler=_text(r[4]), argv=json.loads(r[5]), output=_s(r[6]),
                      language=r[7], opt_level=r[8], source_hash=r[9], object_hash=r[10],
                      ir_hash=r[11], compiler_id=r[12], recorded_at=r[13])
