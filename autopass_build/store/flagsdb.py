"""`autopass.flags.json`: the tuned flags of each source file, reviewable and stable.

    {
      "schema": 1,
      "toolchain": {"compiler": "clang 19.1.7", "target": "x86_64-pc-linux-gnu"},
      "cpu": null,                       # the CPU model when an entry is CPU-specific
      "entries": {
        "src/lvm.c": {
          "flags": ["-mllvm", "-inline-threshold=900"],
          "source_hash": "<blake2b of the source the flags were measured on>",
          "gain": {"metric": "cpu", "ratio": 0.962, "low": 0.951, "high": 0.973, "pairs": 20},
          "why": "random search, evaluation 17 of 40: ...",
          "run": "20261130-120000-random-seed0"
        }
      }
    }

Paths are relative to the project root; keys are sorted and the indentation fixed, so a
re-tune changes only the lines of the entries that changed.  This module reads and
writes the file; apply mode (the wrapper) and `autopass db` build on it.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

from autopass_build.core import flags as flagset
from autopass_build.core.files import write_atomic
from autopass_build.core.names import FLAGS_DB_SCHEMA


class FlagsDbError(Exception):
    pass


@dataclass
class Gain:
    metric: str
    ratio: float          # tuned / baseline of the metric: below 1 is faster
    low: float
    high: float
    pairs: int


@dataclass
class Entry:
    flags: list[str]
    source_hash: str
    gain: Gain
    why: str
    run: str = ""


@dataclass
class FlagsDb:
    toolchain: dict[str, str] = field(default_factory=dict)
    cpu: str | None = None
    entries: dict[str, Entry] = field(default_factory=dict)
    profile: dict | None = None      # {"path": relative to the database, "hash": ...}: PGO

    def to_json(self) -> str:
        data = {"schema": FLAGS_DB_SCHEMA, "toolchain": self.toolchain, "cpu": self.cpu,
                "profile": self.profile,
                "entries": {path: asdict(e) for path, e in self.entries.items()}}
        return json.dumps(data, indent=2, sort_keys=True) + "\n"


def load(path: str) -> FlagsDb:
    """The database at `path` (an empty one when the file does not exist)."""
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except FileNotFoundError:
        return FlagsDb()
    except (OSError, ValueError) as error:
        raise FlagsDbError(f"{path}: not a readable flags database ({error}); fix it or "
                           "move it away") from None
    if not isinstance(data, dict) or data.get("schema") != FLAGS_DB_SCHEMA:
        raise FlagsDbError(f"{path}: schema {data.get('schema') if isinstance(data, dict) else '?'}"
                           f", this autopass reads schema {FLAGS_DB_SCHEMA}")
    try:
        entries = {}
        for source, raw in data.get("entries", {}).items():
            entry = Entry(list(raw["flags"]), str(raw["source_hash"]), Gain(**raw["gain"]),
                          str(raw.get("why", "")), str(raw.get("run", "")))
            flagset.validate(entry.flags)
            entries[source] = entry
        return FlagsDb(dict(data.get("toolchain", {})), data.get("cpu"), entries,
                       data.get("profile"))
    except (KeyError, TypeError, AttributeError, flagset.FlagError) as error:
        raise FlagsDbError(f"{path}: malformed entry ({error}); fix it or move it away") from None


def save(path: str, db: FlagsDb) -> None:
    """Atomically: a crash leaves the old file or the new one, never half of one."""
    write_atomic(path, db.to_json().encode("utf-8"), durable=True)
