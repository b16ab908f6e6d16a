"""`autopass.flags.json`: the tuned flags of each source file, and its one loader.

    {
      "schema": 2,
      "toolchain": {"compiler": "clang 19.1.7 (x86_64-pc-linux-gnu)", "target": "x86_64-..."},
      "cpu": {"model": "AMD EPYC", "isa": ["avx", "avx2", ...]},
                                         # the tuning CPU, with --native (core/cpu.py), or null
      "profile": {"path": "autopass.profdata", "hash": "..."},   # PGO, or null
      "target": {"output": "bin/app", "stages": ["pgo", "lto", "bolt"], "opt_level": "-O3",
                 "units": ["src/a.c", ...],
                 "bolt": {"path": "autopass.fdata", "hash": "...",   # BOLT's profile, or null
                          "binary": "<code fingerprint of the binary it was trained on>"},
                 "bolt_libraries": [      # the project shared libraries BOLT rewrites too
                   {"output": "lib/libapp.so.1", "path": "autopass.libapp.so.1.fdata",
                    "hash": "...", "binary": "<code fingerprint>"}],
                 "rival": {"stages": "pgo+thinlto",   # a close call, when there was one
                           "how": "head to head: pgo+thinlto over pgo+lto 0.991x ..."}},
                                         # whole-program stages, or null
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
re-tune changes only the lines of the entries that changed.

The file is input, not trusted code, and it is read in every compile of an apply build.
So this is the only reader: `from_json` turns any JSON value into a `FlagsDb` or raises
`FlagsDbError` naming the file, the problem and the fix.  A problem with the whole file
(not JSON, duplicate keys, nesting too deep, another schema, a field of the wrong type)
refuses the file; a problem with one entry (flags of the wrong shape, too many or too
long, or outside the allowlist) refuses that entry only, with its reason in `problem`, so
`autopass db check` lists it and `db prune` drops it.  Runs inside the wrapper: no
`dataclasses`, and `json` only when a file is actually read.
"""

from __future__ import annotations

import math
import os

from autopass_build.core import flags as flagset
from autopass_build.core.cpu import Cpu
from autopass_build.core.errors import AutopassError
from autopass_build.core.flags_db_records import (  # noqa: F401 - the format's records
    BoltLibrary,
    CloseRival,
    FlagsDb,
    FlagsEntry,
    Gain,
    ProfileRef,
    TargetStages,
    applies_anything,
    empty,
)
from autopass_build.core.names import FLAGS_DB_OLDEST, FLAGS_DB_SCHEMA, SHIPPED_STAGES
from autopass_build.core.stage_flags import CSPGO, LTO_LEVELS, PGO

MAX_FLAGS = 64              # tokens in one entry: a command line stays far below ARG_MAX
# characters in one token (a decision carried in the IR names a call site by two functions)
MAX_TOKEN = 320
MAX_FILE_BYTES = 16 << 20   # a database is kilobytes; a larger file is not one
SHOWN = 80                  # characters of a rejected value quoted in a message

FIX = "fix it, or move it away and re-run `autopass tune`"


class FlagsDbError(AutopassError):
    """The whole database is refused; the message names the file, the problem and the fix."""


def shown(value: object) -> str:
    """`value` as a message may quote it: repr, clipped to SHOWN characters."""
    text = repr(value)
    return text if len(text) <= SHOWN else f"{text[:SHOWN]}... ({len(text)} characters)"


# -- reading ----------------------------------------------------------------------------
def loads(text: str, path: str) -> object:
    """JSON with duplicate keys refused (the last one would silently win) and nesting too
    deep for the parser turned into the same error as any other problem."""
    import json  # imports `re`: the applier caches what this returns

    def no_duplicates(pairs: list[tuple[str, object]]) -> dict:
        seen: dict[str, object] = {}
        for key, value in pairs:
            if key in seen:
                raise FlagsDbError(f"{path}: the key {shown(key)} appears twice; {FIX}")
            seen[key] = value
        return seen

    try:
        return json.loads(text, object_pairs_hook=no_duplicates)
    except RecursionError:
        raise FlagsDbError(f"{path}: nested too deep to be a flags database; {FIX}") from None
    except ValueError as error:
        raise FlagsDbError(f"{path}: not a readable flags database ({error}); {FIX}") from None


def read_text(path: str) -> str | None:
    """The file's text; None when it does not exist."""
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_FILE_BYTES + 1)
    except FileNotFoundError:
        return None
    except IsADirectoryError:
        raise FlagsDbError(f"{path} is a folder, not a flags database; give the file") from None
    except OSError as error:
        raise FlagsDbError(f"cannot read {path}: {error.strerror}") from None
    if len(data) > MAX_FILE_BYTES:
        raise FlagsDbError(f"{path} is larger than {MAX_FILE_BYTES >> 20} MiB: not a flags "
                           f"database; {FIX}")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise FlagsDbError(f"{path} is not UTF-8 text; {FIX}") from None


def load(path: str) -> FlagsDb:
    """The database at `path` (an empty one when the file does not exist)."""
    text = read_text(path)
    return empty() if text is None else from_json(loads(text, path), path)


def from_json(data: object, path: str) -> FlagsDb:
    if not isinstance(data, dict):
        raise FlagsDbError(f"{path}: not a flags database (a JSON object); {FIX}")
    schema = data.get("schema")
    if isinstance(schema, int) and not isinstance(schema, bool) and schema > FLAGS_DB_SCHEMA:
        from autopass_build import __version__

        raise FlagsDbError(f"{path} was written by a newer autopass (schema {schema}); this "
                           f"one, {__version__}, reads schemas {FLAGS_DB_OLDEST} to "
                           f"{FLAGS_DB_SCHEMA}: upgrade autopass, or re-run autopass tune "
                           "with this one")
    if not (isinstance(schema, int) and not isinstance(schema, bool)
            and FLAGS_DB_OLDEST <= schema <= FLAGS_DB_SCHEMA):
        raise FlagsDbError(f"{path} has schema {shown(schema)}; this autopass reads schemas "
                           f"{FLAGS_DB_OLDEST} to {FLAGS_DB_SCHEMA} (re-run autopass tune)")
    toolchain = data.get("toolchain") or {}
    if not isinstance(toolchain, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in toolchain.items()):
        raise FlagsDbError(f"{path}: \"toolchain\" must be an object of strings; {FIX}")
    cpu = _cpu(data.get("cpu"), path)
    entries = data.get("entries")
    if not isinstance(entries, dict):
        raise FlagsDbError(f"{path}: \"entries\" must be an object (source -> entry); {FIX}")
    return FlagsDb(dict(toolchain), cpu, _profile(data.get("profile"), path),
                   _entries(entries, path), _target(data.get("target"), path), schema)


def source_key(source: str) -> str:
    """How an entry names its source: relative to the project root, normalized
    (`./a.c` and `src/../a.c` are `a.c`), so that every spelling of one file is one key."""
    return os.path.normpath(source)


def _entries(raw: dict, path: str) -> dict[str, FlagsEntry]:
    """The entries by normalized source; two spellings of one source are refused (which
    would win was an accident of order), an absolute path is a problem entry."""
    entries: dict[str, FlagsEntry] = {}
    spelled: dict[str, str] = {}
    for source, value in raw.items():
        key = source_key(source)
        if key in spelled:
            raise FlagsDbError(f"{path}: the entries {shown(spelled[key])} and {shown(source)} "
                               f"name one source ({key}): keep one; {FIX}")
        spelled[key] = source
        entry = entry_from_json(value)
        if os.path.isabs(key) and not entry.problem:
            entry = FlagsEntry(entry.flags, entry.source_hash, entry.gain, entry.why, entry.run,
                          problem="an absolute path: entries name their source relative to "
                                  "the project root (re-run autopass tune)")
        entries[key] = entry
    return entries


def _cpu(raw: object, path: str) -> Cpu | None:
    """The tuning CPU; a bare string (a database from before the instruction set was
    kept) is its model, with nothing to check."""
    if raw is None or isinstance(raw, str):
        return Cpu(raw, ()) if raw else None
    if not (isinstance(raw, dict) and isinstance(raw.get("model"), str)
            and isinstance(raw.get("isa"), list) and all(isinstance(f, str) for f in raw["isa"])):
        raise FlagsDbError(f"{path}: \"cpu\" must be null or {{\"model\": string, \"isa\": "
                           f"[strings]}}; {FIX}")
    return Cpu(raw["model"], tuple(raw["isa"]))


def _target(raw: object, path: str) -> TargetStages | None:
    if raw is None:
        return None
    strings = isinstance(raw, dict) and all(
        isinstance(raw.get(k), list) and all(isinstance(v, str) for v in raw[k])
        for k in ("stages", "units"))
    if not (strings and isinstance(raw, dict) and isinstance(raw.get("output"), str)
            and set(raw["stages"]) <= set(SHIPPED_STAGES) and raw.get("opt_level") in LTO_LEVELS):
        raise FlagsDbError(f"{path}: \"target\" must be null or {{\"output\", \"stages\" "
                           f"(of {', '.join(SHIPPED_STAGES)}), \"opt_level\" (-O2 or -O3), "
                           f"\"units\"}}; {FIX}")
    stages = tuple(raw["stages"])
    if CSPGO in stages and PGO not in stages:
        raise FlagsDbError(f"{path}: \"target\" lists the cspgo stage without pgo, whose "
                           f"profile it extends; {FIX}")
    bolt = raw.get("bolt")
    if ("bolt" in stages) != (bolt is not None) or bolt is not None and not (
            isinstance(bolt, dict) and isinstance(bolt.get("binary"), str)):
        raise FlagsDbError(f"{path}: \"target\" lists the bolt stage exactly when it has "
                           f"\"bolt\": {{\"path\", \"hash\", \"binary\"}}; {FIX}")
    return TargetStages(raw["output"], stages, raw["opt_level"], tuple(raw["units"]),
                        _profile(bolt, path), bolt["binary"] if bolt else "",
                        _bolt_libraries(raw.get("bolt_libraries", []), bolt is not None, path),
                        _profile(raw.get("bolt_stale"), path) if bolt else None,
                        _libraries(raw.get("libraries", []), path),
                        _rival(raw.get("rival"), path))


def _string_fields(raw: object, name: str, fields: tuple[str, ...],
                   path: str) -> tuple[str, ...] | None:
    """An optional object of string `fields` (`name`: its key in the database), their
    values in `fields`' order; None when it is null."""
    if raw is None:
        return None
    if not (isinstance(raw, dict) and all(isinstance(raw.get(f), str) for f in fields)):
        shape = ", ".join(f"\"{f}\"" for f in fields)
        raise FlagsDbError(f"{path}: \"{name}\" must be null or {{{shape}}} (strings); {FIX}")
    return tuple(raw[f] for f in fields)


def _rival(raw: object, path: str) -> CloseRival | None:
    found = _string_fields(raw, "rival", ("stages", "how"), path)
    return CloseRival(*found) if found else None


def _libraries(raw: object, path: str) -> tuple[str, ...]:
    if not (isinstance(raw, list) and all(isinstance(item, str) for item in raw)):
        raise FlagsDbError(f"{path}: \"libraries\" must be a list of the target's project "
                           f"libraries (paths relative to the root); {FIX}")
    return tuple(raw)


def _bolt_libraries(raw: object, bolt: bool, path: str) -> tuple[BoltLibrary, ...]:
    shape = ("\"bolt_libraries\" must be a list of {\"output\", \"path\", \"hash\", "
             "\"binary\"}, and empty unless the bolt stage is listed")
    if not isinstance(raw, list) or (raw and not bolt):
        raise FlagsDbError(f"{path}: {shape}; {FIX}")
    libraries = []
    for item in raw:
        if not (isinstance(item, dict) and all(isinstance(item.get(key), str) for key in
                                               ("output", "path", "hash", "binary"))):
            raise FlagsDbError(f"{path}: {shape}; {FIX}")
        libraries.append(BoltLibrary(item["output"], ProfileRef(item["path"], item["hash"]),
                                     item["binary"]))
    return tuple(libraries)


def _profile(raw: object, path: str) -> ProfileRef | None:
    found = _string_fields(raw, "profile", ("path", "hash"), path)
    return ProfileRef(*found) if found else None


def entry_from_json(raw: object) -> FlagsEntry:
    """An entry, with `problem` set when it must not be applied."""
    if not isinstance(raw, dict):
        return FlagsEntry((), "", problem=f"the entry is {type(raw).__name__}, not an object")
    flags, source_hash = raw.get("flags"), raw.get("source_hash")
    why, run = raw.get("why", ""), raw.get("run", "")
    text = (why if isinstance(why, str) else "", run if isinstance(run, str) else "")
    if not isinstance(flags, list) or not all(isinstance(t, str) for t in flags):
        return FlagsEntry((), "", None, *text, problem="\"flags\" must be a list of strings")
    tokens = tuple(flags)
    if not isinstance(source_hash, str):
        return FlagsEntry(tokens, "", None, *text, problem="\"source_hash\" must be a string")
    problem = _flags_problem(tokens)
    return FlagsEntry(tokens, source_hash, _gain(raw.get("gain")), *text, problem=problem)


def _flags_problem(tokens: tuple[str, ...]) -> str:
    if len(tokens) > MAX_FLAGS:
        return f"{len(tokens)} flags, more than the {MAX_FLAGS} an entry may hold"
    long = next((t for t in tokens if len(t) > MAX_TOKEN), None)
    if long is not None:
        return f"the flag {shown(long)} is longer than {MAX_TOKEN} characters"
    try:
        flagset.validate(tokens)
    except flagset.FlagError as error:
        return str(error)
    return ""


def _gain(raw: object) -> Gain | None:
    """The measured gain, or None when it is missing or malformed (it is for review
    only: applying never depends on it)."""
    if not isinstance(raw, dict):
        return None
    numbers = [raw.get(k) for k in ("ratio", "low", "high")]
    values = [float(v) for v in numbers if isinstance(v, (int, float)) and _finite(v)]
    if len(values) != 3 or not isinstance(raw.get("pairs"), int):
        return None
    return Gain(str(raw.get("metric", "")), *values, raw["pairs"])


def _finite(value: object) -> bool:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:        # an integer too large for a float
        return False


# -- writing ----------------------------------------------------------------------------
def to_json(db: FlagsDb) -> str:
    import json

    data = {"schema": FLAGS_DB_SCHEMA, "toolchain": db.toolchain,
            "cpu": {"model": db.cpu.model, "isa": list(db.cpu.isa)} if db.cpu else None,
            "profile": {"path": db.profile.path, "hash": db.profile.hash} if db.profile
            else None,
            "entries": {source_key(source): _entry_json(e) for source, e in db.entries.items()},
            "target": _target_json(db.target) if db.target else None}
    return json.dumps(data, indent=2, sort_keys=True) + "\n"


def _target_json(target: TargetStages) -> dict:
    bolt = target.bolt
    return {"output": target.output, "stages": list(target.stages),
            "opt_level": target.opt_level, "units": list(target.units),
            "bolt": {"path": bolt.path, "hash": bolt.hash, "binary": target.bolt_binary}
            if bolt else None,
            "bolt_libraries": [{"output": b.output, "path": b.profile.path,
                                "hash": b.profile.hash, "binary": b.binary}
                               for b in target.bolt_libraries],
            "bolt_stale": {"path": target.bolt_stale.path, "hash": target.bolt_stale.hash}
            if target.bolt_stale else None} | (
            {"libraries": list(target.libraries)} if target.libraries else {}) | (
            {"rival": {"stages": target.rival.stages, "how": target.rival.how}}
            if target.rival else {})


def _entry_json(entry: FlagsEntry) -> dict:
    gain = entry.gain
    return {"flags": list(entry.flags), "source_hash": entry.source_hash,
            "gain": {"metric": gain.metric, "ratio": gain.ratio, "low": gain.low,
                     "high": gain.high, "pairs": gain.pairs} if gain else None,
            "why": entry.why, "run": entry.run}


def save(path: str, db: FlagsDb) -> None:
    """Atomically: a crash leaves the old file or the new one, never half of one."""
    from autopass_build.core.files import write_atomic

    write_atomic(path, to_json(db).encode("utf-8"), durable=True)
