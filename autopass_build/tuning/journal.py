"""A tuning run's journal: every finished evaluation, on disk before anything uses it.

`.autopass/runs/<run id>/` holds `run.json` (what was asked: strategy, seed, budget,
metric, units, knob space) and `journal.jsonl`, one JSON object per evaluation, each
line flushed and fsynced as it is written.  A `kill -9` can tear at most the line being
written: reading drops a torn last line (and cuts it from the file).  Anything else that
does not parse is an error naming the line, never a silent loss.  `--resume` replays the
journal into a fresh strategy with the same seed, so finished evaluations are never
measured again and the run continues exactly where it stopped.
"""

from __future__ import annotations

import json
import os
import time

from autopass_build.core.files import write_atomic
from autopass_build.core.names import RUNS_DIR

HEADER = "run.json"
JOURNAL = "journal.jsonl"
LATEST = "latest"
JOURNAL_VERSION = 1


class JournalError(Exception):
    pass


class Journal:
    def __init__(self, folder: str, header: dict, entries: list[dict]):
        self.folder = folder
        self.header = header
        self.entries = entries

    @property
    def path(self) -> str:
        return os.path.join(self.folder, JOURNAL)

    @property
    def run_id(self) -> str:
        return os.path.basename(self.folder)

    # -- creating and opening ----------------------------------------------------------
    @classmethod
    def create(cls, store_dir: str, header: dict) -> "Journal":
        runs = os.path.join(store_dir, RUNS_DIR)
        stamp = time.strftime("%Y%m%d-%H%M%S")
        base = f"{stamp}-{header.get('strategy', 'run')}-seed{header.get('seed', 0)}"
        folder = os.path.join(runs, base)
        suffix = 1
        while os.path.exists(folder):
            suffix += 1
            folder = os.path.join(runs, f"{base}-{suffix}")
        os.makedirs(folder)
        header = {"journal_version": JOURNAL_VERSION, **header}
        write_atomic(os.path.join(folder, HEADER),
                     json.dumps(header, indent=1, sort_keys=True).encode(), durable=True)
        open(os.path.join(folder, JOURNAL), "ab").close()
        write_atomic(os.path.join(runs, LATEST), (os.path.basename(folder) + "\n").encode(),
                     durable=True)
        return cls(folder, header, [])

    @classmethod
    def open(cls, folder: str, repair: bool = False) -> "Journal":
        """`repair` (only for the process that will append): cut a torn last line from
        the file.  Readers never modify it: the writer may be mid-line."""
        try:
            with open(os.path.join(folder, HEADER)) as handle:
                header = json.load(handle)
        except (OSError, ValueError) as error:
            raise JournalError(f"{folder} is not a readable tuning run ({error})")
        if header.get("journal_version") != JOURNAL_VERSION:
            raise JournalError(f"{folder} was written by another autopass version "
                               f"(journal version {header.get('journal_version')}); "
                               "start a new run")
        return cls(folder, header, _read_entries(os.path.join(folder, JOURNAL), repair))

    @classmethod
    def latest(cls, store_dir: str, repair: bool = False) -> "Journal":
        runs = os.path.join(store_dir, RUNS_DIR)
        try:
            with open(os.path.join(runs, LATEST)) as handle:
                name = handle.read().strip()
        except OSError:
            raise JournalError("no tuning run to resume in this store; run `autopass tune` "
                               "first") from None
        return cls.open(os.path.join(runs, name), repair)

    # -- writing -------------------------------------------------------------------------
    def take_over(self) -> None:
        """Become the run's only writer: lock it (a second `tune --resume` is refused,
        not interleaved), then re-read it, cutting a torn last line."""
        self.lock()
        self.entries = _read_entries(self.path, repair=True)

    def lock(self) -> None:
        import fcntl

        self._lock = open(os.path.join(self.folder, "lock"), "w")
        try:
            fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            self._lock.close()
            raise JournalError(f"run {self.run_id} is being tuned by another autopass "
                               "process; wait for it or stop it first") from None

    def append(self, entry: dict) -> None:
        """On disk (fsynced) before it returns; OSError (disk full, read-only) propagates."""
        line = (json.dumps(entry, sort_keys=True, separators=(",", ":")) + "\n").encode()
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            written = os.write(fd, line)
            if written != len(line):
                raise OSError(28, f"short write to {self.path}")
            os.fsync(fd)
        finally:
            os.close(fd)
        self.entries.append(entry)


def _read_entries(path: str, repair: bool) -> list[dict]:
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except FileNotFoundError:
        return []
    except OSError as error:
        raise JournalError(f"cannot read {path}: {error.strerror}") from None
    lines = data.split(b"\n")
    complete, torn = lines[:-1], lines[-1]   # text after the last newline was cut short
    entries, good_bytes = [], 0
    for number, line in enumerate(complete, 1):
        try:
            entry = json.loads(line)
            if not isinstance(entry, dict):
                raise ValueError("not an object")
        except ValueError:
            if number == len(complete) and not torn:
                torn = line   # a torn final line that happened to end in a newline
                break
            raise JournalError(f"{path}: line {number} is damaged; the run cannot be resumed "
                               "exactly (move the file away to start over)") from None
        entries.append(entry)
        good_bytes += len(line) + 1
    if torn and repair:
        with open(path, "r+b") as handle:   # drop the torn line so appends start clean
            handle.truncate(good_bytes)
    return entries
