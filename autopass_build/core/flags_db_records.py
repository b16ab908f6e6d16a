"""The records of `autopass.flags.json` (flags_db.py reads and writes the file, and is
where the format is described): a source's entry and its gain, the target's stages
with its shipped profiles.  Records of core/records.py: the wrapper reads them in every
compile of an apply build, where dataclasses cost an import."""

from __future__ import annotations

from autopass_build.core.cpu import Cpu
from autopass_build.core.names import FLAGS_DB_SCHEMA
from autopass_build.core.records import Record


class Gain(Record):
    __slots__ = ("metric", "ratio", "low", "high", "pairs")
    metric: str
    ratio: float          # tuned / baseline of the metric: below 1 is faster
    low: float
    high: float
    pairs: int


class FlagsEntry(Record):
    """One source's flags; `problem` is why it must not be applied ("" when it may)."""
    __slots__ = ("flags", "source_hash", "gain", "why", "run", "problem")
    _defaults = {"gain": None, "why": "", "run": "", "problem": ""}
    flags: tuple[str, ...]
    source_hash: str
    gain: Gain | None
    why: str
    run: str
    problem: str


class ProfileRef(Record):
    """A profile (PGO's, BOLT's) shipped beside the database, by content hash."""
    __slots__ = ("path", "hash")
    path: str
    hash: str


class BoltLibrary(Record):
    """A project shared library the tuned binary loads, rewritten by BOLT after its own
    link with `profile` if its code fingerprint is `binary`."""
    __slots__ = ("output", "profile", "binary")
    output: str                 # the library's link output, relative to the project root
    profile: ProfileRef
    binary: str


class CloseRival(Record):
    """The composition whose measurement overlapped the chosen one's (`stages`, as
    "pgo+thinlto"), and how the two were told apart (`how`, one line): a close call that
    a re-tune measures first again (tuning/rivals.py)."""
    __slots__ = ("stages", "how")
    stages: str
    how: str


class TargetStages(Record):
    """The whole-program stages chosen for one binary: apply mode builds `units` with
    the stages' flags, links `output` with theirs (core/stage_flags.py) and, with BOLT,
    rewrites the linked `output` with the `bolt` profile if its code fingerprint is
    `bolt_binary` (core/bolt_commands.py), and each of `bolt_libraries` after its link.
    With the direct stage, the links of `libraries` take the stages' link flags too.
    `rival`: the close call the stages were chosen over, if there was one."""
    __slots__ = ("output", "stages", "opt_level", "units", "bolt", "bolt_binary",
                 "bolt_libraries", "bolt_stale", "libraries", "rival")
    _defaults = {"bolt": None, "bolt_binary": "", "bolt_libraries": (), "bolt_stale": None,
                 "libraries": (), "rival": None}
    output: str                 # relative to the project root
    stages: tuple[str, ...]     # from SHIPPED_STAGES
    opt_level: str              # the LTO link's codegen level (-O3 if a unit is -O3, else -O2)
    units: tuple[str, ...]      # sources, relative to the project root
    bolt: ProfileRef | None     # BOLT's profile beside the database
    bolt_binary: str            # the code fingerprint of the binary it was trained on
    bolt_libraries: tuple[BoltLibrary, ...]
    bolt_stale: ProfileRef | None  # the profile as YAML: a later build by stale inference
    libraries: tuple[str, ...]  # the project libraries `output` loads (direct stage), as linked
    rival: CloseRival | None

    def bolt_library(self, output: str) -> BoltLibrary | None:
        """The BOLT plan of the library linked to `output` (relative to the root)."""
        return next((b for b in self.bolt_libraries if b.output == output), None)


class FlagsDb(Record):
    __slots__ = ("toolchain", "cpu", "profile", "entries", "target", "schema")
    _defaults = {"cpu": None, "profile": None, "target": None, "schema": FLAGS_DB_SCHEMA}
    toolchain: dict[str, str]
    cpu: Cpu | None             # the tuning CPU, when tuned with --native
    profile: ProfileRef | None
    entries: dict[str, FlagsEntry]
    target: TargetStages | None
    schema: int                 # as read (an older autopass's is read as it is); written: ours


def empty() -> FlagsDb:
    return FlagsDb({}, None, None, {}, None)


def applies_anything(db: FlagsDb | None) -> bool:
    """Whether a build in apply mode has something to take from `db`: an entry, the
    target's stages or a PGO profile."""
    return db is not None and bool(db.entries or db.target or db.profile)
