"""The spool's records, checked before they reach the index.

The wrapper writes each record atomically (capture/record/recorder.py says their shapes), so a
record that does not have its shape was damaged or planted: `statements` raises
RecordError naming what is wrong, and the store sets the file aside instead of letting
one bad file stop every reader (or reach SQLite with a value it cannot bind).
"""

from __future__ import annotations

import json
import os

from autopass_build.core.errors import AutopassError
from autopass_build.core.files import hash_json


class RecordError(AutopassError, ValueError):
    pass


STR, OPTIONAL_STR, STRS, NUMBER = "a string", "a string or null", "a list of strings", \
    "a number"
SHAPES: dict[str, dict[str, str]] = {
    "unit": {"id": STR, "source": STR, "source_rel": STR, "cwd": STR, "compiler": STR,
             "argv": STRS, "output": OPTIONAL_STR, "language": STR, "opt_level": STR,
             "source_hash": STR, "object_hash": OPTIONAL_STR, "ir_hash": STR,
             "compiler_id": STR, "recorded_at": NUMBER},
    "skip": {"cwd": STR, "argv": STRS, "sources": STRS, "reason": STR, "detail": STR,
             "recorded_at": NUMBER},
    "link": {"output": STR, "cwd": STR, "compiler": STR, "argv": STRS, "kind": STR,
             "output_hash": OPTIONAL_STR, "recorded_at": NUMBER},
}


def _is(value: object, kind: str) -> bool:
    if kind == STR:
        return isinstance(value, str)
    if kind == OPTIONAL_STR:
        return value is None or isinstance(value, str)
    if kind == STRS:
        return isinstance(value, list) and all(isinstance(v, str) for v in value)
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def check(record: object) -> dict:
    """`record` if it has the shape of its type; RecordError otherwise."""
    if not isinstance(record, dict) or record.get("type") not in SHAPES:
        raise RecordError("not a unit, skip or link record")
    for name, kind in SHAPES[record["type"]].items():
        if not _is(record.get(name), kind):
            raise RecordError(f"{record['type']} record: {name!r} must be {kind}")
    if record["type"] == "link":
        inputs, archives = record.get("inputs"), record.get("archives")
        if not isinstance(inputs, list) or not all(
                isinstance(i, list) and len(i) == 3 and isinstance(i[0], str)
                and isinstance(i[1], str) and _is(i[2], OPTIONAL_STR) for i in inputs):
            raise RecordError("link record: 'inputs' must be [kind, path, hash] lists")
        if not isinstance(archives, list) or not all(
                isinstance(a, dict) and isinstance(a.get("hash"), str)
                and isinstance(a.get("path"), str) and isinstance(a.get("members"), list)
                and all(isinstance(m, list) and len(m) == 2
                        and all(isinstance(x, str) for x in m) for m in a["members"])
                for a in archives):
            raise RecordError("link record: 'archives' must be {hash, path, members} objects")
    return record


def _b(path: str | None) -> bytes | None:
    return None if path is None else os.fsencode(path)


def statements(record: object) -> list[tuple[str, tuple]]:
    """SQL for one spooled record; RecordError when it is not one."""
    r = check(record)
    statements: list[tuple[str, tuple]] = []
    if r["type"] == "unit":
        if r["output"] is not None:
            # The object file was overwritten: whatever made it before is gone.
            statements.append(("DELETE FROM units WHERE output = ? AND id != ?",
                               (_b(r["output"]), r["id"])))
        # The source's IR step failed before, in this folder: recorded now, that skip
        # is stale (a successful re-record listed it still).
        statements.append(("DELETE FROM skipped WHERE cwd = ? AND sources = ? AND reason "
                           "IN ('ir_failed', 'ir_timeout') AND recorded_at <= ?",
                           (_b(r["cwd"]), json.dumps([r["source"]]), r["recorded_at"])))
        statements.append((
            "INSERT OR REPLACE INTO units VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (r["id"], _b(r["source"]), _b(r["source_rel"]), _b(r["cwd"]), _b(r["compiler"]),
             json.dumps(r["argv"]), _b(r["output"]), r["language"], r["opt_level"],
             r["source_hash"], r["object_hash"], r["ir_hash"], r["compiler_id"],
             r["recorded_at"])))
        return statements
    if r["type"] == "skip":
        key = hash_json([r["cwd"], r["argv"], r["sources"]])
        return [("INSERT OR REPLACE INTO skipped VALUES (?,?,?,?,?,?,?)",
                 (key, _b(r["cwd"]), json.dumps(r["argv"]), json.dumps(r["sources"]),
                  r["reason"], r["detail"], r["recorded_at"]))]
    statements += [("INSERT OR REPLACE INTO archives VALUES (?,?,?)",
                    (a["hash"], _b(a["path"]), json.dumps(a["members"])))
                   for a in r["archives"]]
    statements.append(("INSERT OR REPLACE INTO links VALUES (?,?,?,?,?,?,?,?)",
                       (_b(r["output"]), _b(r["cwd"]), _b(r["compiler"]),
                        json.dumps(r["argv"]), r["kind"], json.dumps(r["inputs"]),
                        r["output_hash"], r["recorded_at"])))
    return statements
