"""Writing a run's winners to the flags database, with the PGO profile shipped beside it."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field

from autopass_build.candidates.bolt import TrainedBolt
from autopass_build.candidates.pgo import TrainedProfile
from autopass_build.core import cpu, flags_db, toolchain
from autopass_build.core.names import BOLT_PROFILE_NAME, BOLT_STALE_NAME, PROFILE_NAME
from autopass_build.store.build_records import CommandMates, UnitRecord
from autopass_build.tuning.conclude import Winner
from autopass_build.tuning.journal import Entry, Journal, Phase
from autopass_build.tuning.measuring import TuneError

HOW = {Phase.SEARCH: "{strategy} search, evaluation #{n}",
       Phase.CONFIRM: "{strategy} search, confirmed (#{n})",
       Phase.ALONE: "measured alone", Phase.FINAL: "final re-measurement"}


def why(strategy: str, entry: Entry, searched_on: str = "") -> str:
    """The one line a reviewer reads next to the flags; `searched_on`: the stages the
    search measured against (the recorded build when none)."""
    how = HOW.get(entry.phase, str(entry.phase)).format(strategy=strategy, n=entry.n)
    baseline = f"the {searched_on} build" if searched_on else "the recorded build"
    return f"{how}: {entry.interval_text()} over {baseline}, {entry.pairs} pairs"


@dataclass(frozen=True)
class Shipment:
    """What a run writes besides its settings (which the journal carries): the winners,
    the recorded units they name, the stages chosen (`target`, with the BOLT profiles of
    the binary and the libraries it rewrote when BOLT is one of them), the PGO profile,
    whether -march=native is in, the stages the winners' gains are measured against
    (`searched_on`), and the sources compiled in one command with a run's source, which
    took its flags (`command_mates`)."""
    winners: list[Winner]
    units: list[UnitRecord]
    native: bool = False
    profile: TrainedProfile | None = None
    target: flags_db.TargetStages | None = None
    bolt: TrainedBolt | None = None
    bolt_libraries: tuple[TrainedBolt, ...] = ()
    searched_on: str = ""
    command_mates: CommandMates = field(default_factory=dict)


def write(path: str, journal: Journal, shipment: Shipment) -> str:
    """Replace the run's sources' entries in the database at `path` by the winners, and
    its whole-program section by the stages chosen."""
    winners, units, target = shipment.winners, shipment.units, shipment.target
    bolt, searched_on = shipment.bolt, shipment.searched_on
    metric, strategy = journal.settings.metric, journal.settings.strategy
    try:
        db = flags_db.load(path)
    except flags_db.FlagsDbError as error:
        raise TuneError(f"{error}; the tuning result is in the journal {journal.path}") from None
    identity = toolchain.identify(units[0].compiler)
    db.toolchain = {"compiler": identity.short() if identity else "unknown",
                    "target": identity.target if identity else ""}
    if shipment.native:
        db.cpu = cpu.this_cpu()
    db.profile = _ship_profile(path, shipment.profile) if shipment.profile else None
    if target is not None and bolt is not None:
        target.bolt = _ship(path, bolt.path, bolt.hash, BOLT_PROFILE_NAME)
        target.bolt_binary = bolt.binary
        target.bolt_stale = _ship(path, bolt.yaml, bolt.yaml_hash, BOLT_STALE_NAME) \
            if bolt.yaml else None
        target.bolt_libraries = tuple(
            flags_db.BoltLibrary(b.library, _ship(path, b.path, b.hash, library_profile_name(
                b.library)), b.binary) for b in shipment.bolt_libraries)
    db.target = target
    # A source compiled in one command with others was measured with its flags on all of
    # them, and apply mode gives the command one set: each of them gets the entry (F23).
    mates = shipment.command_mates
    for source in journal.settings.sources:
        for member in (source, *mates.get(source, ())):
            db.entries.pop(member, None)     # re-tuned: only what helps now stays
    by_source = {u.source_rel: u for u in units}
    for w in winners:
        e = w.entry
        assert e.ratio is not None and e.low is not None and e.high is not None
        for member in (w.source, *mates.get(w.source, ())):
            db.entries[member] = flags_db.FlagsEntry(
                tuple(w.flags), by_source[member].source_hash,
                flags_db.Gain(metric, e.ratio, e.low, e.high, e.pairs),
                why(strategy, e, searched_on), journal.run_id)
    try:
        flags_db.save(path, db)
    except OSError as error:
        raise TuneError(f"cannot write {path} ({error.strerror}); the tuning result is in "
                        f"the journal {journal.path}: fix it, then `autopass tune --resume`"
                        ) from None
    return path


def writable_database(path: str) -> flags_db.FlagsDb:
    """Before a run: the database can be read (if it exists) and written where it is
    asked for, so that an hour of tuning does not end in a path error.  Returns what it
    holds (empty when it does not exist yet): its stages are an earlier run's."""
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise TuneError(f"--flags-db {path}: {folder} is not an existing folder")
    if os.path.isdir(path):
        raise TuneError(f"--flags-db {path} is a folder; give the database file's path")
    try:
        return flags_db.load(path)
    except flags_db.FlagsDbError as error:
        raise TuneError(str(error)) from None


def library_profile_name(library: str) -> str:
    """The file a library's BOLT profile ships as: autopass.<its file name>.fdata."""
    stem = BOLT_PROFILE_NAME.rsplit(".", 1)[0]
    return f"{stem}.{os.path.basename(library)}.fdata"


def _ship_profile(db_path: str, profile: TrainedProfile) -> flags_db.ProfileRef:
    """The PGO profile beside the database (to be committed with it), by hash."""
    return _ship(db_path, profile.path, profile.hash, PROFILE_NAME)


def _ship(db_path: str, source: str, digest: str, name: str) -> flags_db.ProfileRef:
    """The profile `source` (whose hash is `digest`) copied beside the database as
    `name`, referenced by its hash."""
    target = os.path.join(os.path.dirname(os.path.abspath(db_path)), name)
    shutil.copyfile(source, target + ".tmp")
    os.replace(target + ".tmp", target)
    return flags_db.ProfileRef(name, digest)
