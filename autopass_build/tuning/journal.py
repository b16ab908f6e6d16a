"""A tuning run's journal: every finished evaluation, on disk before anything uses it.

`.autopass/runs/<run id>/` holds `run.json` (what was asked: strategy, seed, budget,
metric, units, knob space) and `journal.jsonl`, one `Entry` per evaluation as a JSON
object, each line flushed and fsynced as it is written.  A `kill -9` can tear at most the line being
written: reading drops a torn last line (and cuts it from the file).  Anything else that
does not parse is an error naming the line, never a silent loss.  `--resume` replays the
journal into a fresh strategy with the same seed, so finished evaluations are never
measured again and the run continues exactly where it stopped.
"""

from __future__ import annotations

import json
import os
import re
import time
from dataclasses import asdict, dataclass, field, replace
from enum import Enum

from autopass_build.candidates.stages import Stage, of_name
from autopass_build.core.errors import AutopassError
from autopass_build.core.files import write_atomic
from autopass_build.core.names import RUNS_DIR
from autopass_build.core.outcome import Outcome
from autopass_build.measuring.attribution import UnitEffect
from autopass_build.measuring.stats import SAME, Verdict
from autopass_build.tuning.settings import RunSettings, SettingsError

HEADER = "run.json"
JOURNAL = "journal.jsonl"
LATEST = "latest"
BASELINE = "baseline"     # the composition the search ran on, as the stages chose it
RUN_NAME = re.compile(r"\d{8}-\d{6}-")     # a run folder's name begins with its start time
JOURNAL_VERSION = 2       # 2: an entry's phase and configuration are separate fields
READABLE_VERSIONS = (1, 2)


class JournalError(AutopassError):
    pass


class Phase(str, Enum):
    """Why an evaluation was made; each phase has its own cache of configurations."""
    SEARCH = "search"              # a strategy's candidate, measured
    SCREENED = "screened"          # a strategy's candidate, not measured (predicted no gain)
    CONFIRM = "confirm"            # a would-be incumbent measured again with fresh pairs
    COMPOSITE = "composite"        # the per-unit winners of attribution, composed
    ALONE = "alone"                # one unit of the best candidate, measured alone
    FINAL = "final"                # the winners together, tight interval
    PGO_ALONE = "pgo-alone"        # on PGO runs: PGO alone against the recorded build
    TUNED_ON_PGO = "tuned-on-pgo"  # on PGO runs: the result against the recorded build
    STAGE = "stage"                # a composition of whole-program stages vs the recording
    STAGE_AGAIN = "stage-again"    # ... when none was verified: the closest, fresh pairs
    STAGE_CONFIRM = "stage-confirm"  # ... measured again before it becomes the baseline
    STAGE_RIVAL = "stage-rival"    # two compositions whose intervals overlap, head to head
    TUNED = "tuned"                # the chosen stages with the winners vs the recording

    def __str__(self) -> str:
        return self.value


# A composition's looks, in the order they are taken (the last one counts).
STAGE_PHASES = (Phase.STAGE, Phase.STAGE_AGAIN, Phase.STAGE_CONFIRM)
# Every evaluation of the stage phase (what its budget and pace count): the looks, and
# the head-to-head of two close compositions, whose ratio is not over the recorded build.
STAGE_EVALUATIONS = (*STAGE_PHASES, Phase.STAGE_RIVAL)

# Phases by an earlier name: "attribute" was the phase of a unit measured alone, which
# the attribution of per-unit costs (measuring/attribution.py) is not.
OLD_PHASES = {"attribute": "alone"}
VERSUS_RECORDED = {Phase.PGO_ALONE: "PGO alone", Phase.TUNED_ON_PGO: "tuned on PGO",
                   Phase.TUNED: "the chosen stages with the per-file flags"}


@dataclass(frozen=True)
class Timing:
    """How long an evaluation took.  Differs between a resumed run and a straight one,
    so nothing decides by it."""
    seconds: float = 0.0
    at: float = 0.0                # when it finished (time.time())
    runs: int = 0                  # benchmark runs, both sides
    compiled: int = 0
    cached: int = 0


def speedup_text(ratio: float | None, low: float | None, high: float | None) -> str:
    """A measured candidate/baseline ratio with its interval, as a speedup (the inverse:
    above 1 is faster)."""
    if not ratio or not low or not high:
        return "no measurement"
    return f"speedup {1 / ratio:.4f}x [{1 / high:.4f}, {1 / low:.4f}]"


@dataclass(frozen=True)
class Entry:
    """One evaluation: written in one place (the tuner), read by attribute everywhere."""
    n: int                         # 1, 2, ... in journal order
    phase: Phase
    config: str                    # hash of the per-unit flags: the cache key within a phase
    flags: dict[str, str]          # source -> its flags, space-separated
    outcome: Outcome
    verdict: Verdict | None = None   # the A/B's (stats); None: the candidate failed
    ratio: float | None = None     # candidate / baseline of the metric
    low: float | None = None
    high: float | None = None
    pairs: int = 0
    detail: str = ""
    timing: Timing = field(default_factory=Timing)
    predicted: float | None = None               # screening's predicted ratio, if judged
    features: dict[str, float] | None = None     # screening's code features, if judged
    stages: str = ""                             # whole-program stages under it: "pgo+lto"
    effects: tuple[UnitEffect, ...] = ()         # each changed unit's own cost (attribution)
    unit_features: dict[str, dict[str, float]] | None = None   # screening's, per unit
    node: str = ""                               # the cluster node that measured it ("": here)

    @property
    def composition(self) -> tuple[Stage, ...]:
        """`stages` as stages (the name is what the journal keeps)."""
        return of_name(self.stages)

    @property
    def identical(self) -> bool:
        """The candidate was the baseline's program byte for byte, so nothing ran
        (candidates.evaluate.identical): an OK, SAME entry without pairs."""
        return self.outcome == Outcome.OK and self.verdict == SAME and self.pairs == 0

    @property
    def measured(self) -> bool:
        """A ratio with an interval exists (the outcome was OK and the A/B ran)."""
        return self.ratio is not None and self.low is not None and self.high is not None

    def interval_text(self) -> str:
        """'speedup 1.0513x [1.0390, 1.0637]': baseline over candidate, above 1 is
        faster, as everything a user reads says it (the journal keeps the ratio);
        the outcome when nothing was measured."""
        if not self.measured:
            return f"{self.outcome}" + (f" ({self.detail[:160]})" if self.detail else "")
        return speedup_text(self.ratio, self.low, self.high)

    def to_json(self) -> dict:
        data = asdict(self)
        data["phase"], data["outcome"] = self.phase.value, self.outcome.value
        return data

    @classmethod
    def from_json(cls, data: dict, version: int = JOURNAL_VERSION) -> "Entry":
        """Raises ValueError (with the reason) for anything that is not an entry."""
        if not isinstance(data, dict):
            raise ValueError("not an object")
        data = dict(data)
        if version == 1:   # the phase was glued to the configuration: "search:abc..."
            phase, _, data["config"] = str(data.pop("key", "")).partition(":")
            data.setdefault("phase", phase)
        try:
            timing = Timing(**data.pop("timing", {}) or {})
            effects = tuple(UnitEffect(**e) for e in data.pop("effects", ()) or ())
            verdict = data.get("verdict")
            named = data.get("phase")
            named = OLD_PHASES.get(named, named) if isinstance(named, str) else named
            entry = cls(**{**data, "phase": Phase(named),
                           "outcome": Outcome(data.get("outcome")), "timing": timing,
                           "effects": effects,
                           "verdict": None if verdict is None else Verdict(verdict)})
        except TypeError as error:
            raise ValueError(str(error)) from None
        if not isinstance(entry.flags, dict) or not isinstance(entry.n, int):
            raise ValueError("flags must be an object and n a number")
        return entry


class Journal:
    def __init__(self, folder: str, settings: RunSettings, entries: list[Entry]):
        self.folder = folder
        self.settings = settings
        self.entries = entries

    @property
    def path(self) -> str:
        return os.path.join(self.folder, JOURNAL)

    @property
    def run_id(self) -> str:
        return os.path.basename(self.folder)

    # -- creating and opening ----------------------------------------------------------
    @classmethod
    def create(cls, store_dir: str, settings: RunSettings) -> "Journal":
        runs = os.path.join(store_dir, RUNS_DIR)
        stamp = time.strftime("%Y%m%d-%H%M%S")
        base = f"{stamp}-{settings.strategy}-seed{settings.seed}"
        folder = os.path.join(runs, base)
        suffix = 1
        while os.path.exists(folder):
            suffix += 1
            folder = os.path.join(runs, f"{base}-{suffix}")
        os.makedirs(folder)
        settings = replace(settings, journal_version=JOURNAL_VERSION)
        _write_settings(folder, settings)
        open(os.path.join(folder, JOURNAL), "ab").close()
        write_atomic(os.path.join(runs, LATEST), (os.path.basename(folder) + "\n").encode(),
                     durable=True)
        return cls(folder, settings, [])

    @classmethod
    def open(cls, folder: str, repair: bool = False) -> "Journal":
        """`repair` (only for the process that will append): cut a torn last line from
        the file.  Readers never modify it: the writer may be mid-line."""
        try:
            with open(os.path.join(folder, HEADER)) as handle:
                header = json.load(handle)
        except (OSError, ValueError) as error:
            why = error.strerror if isinstance(error, OSError) and error.strerror else error
            raise JournalError(f"{folder} is not a readable tuning run ({why})") from None
        try:
            settings = RunSettings.from_json(header)
        except SettingsError:
            raise JournalError(f"{folder}/{HEADER} is damaged (not the settings of a run); "
                               "start a new run") from None
        if settings.journal_version not in READABLE_VERSIONS:
            raise JournalError(f"{folder} was written by another autopass version "
                               f"(journal version {header.get('journal_version')}); "
                               "start a new run")
        return cls(folder, settings, _read_entries(os.path.join(folder, JOURNAL), repair,
                                                   settings.journal_version))

    @classmethod
    def latest(cls, store_dir: str, repair: bool = False) -> "Journal":
        runs = os.path.join(store_dir, RUNS_DIR)
        return cls.open(os.path.join(runs, _latest_name(runs)), repair)

    # -- writing -------------------------------------------------------------------------
    def take_over(self) -> None:
        """Become the run's only writer: lock it (a second `tune --resume` is refused,
        not interleaved), then re-read it, cutting a torn last line."""
        self.lock()
        self.entries = _read_entries(self.path, True, self.version)
        if self.version != JOURNAL_VERSION:   # appends are written in today's version
            self.settings = replace(self.settings, journal_version=JOURNAL_VERSION)
            write_atomic(self.path, b"".join(_line(e) for e in self.entries), durable=True)
            _write_settings(self.folder, self.settings)

    @property
    def version(self) -> int:
        return self.settings.journal_version

    def find(self, phase: Phase, config: str) -> Entry | None:
        """The evaluation of `config` in `phase`, if the run has made it."""
        return next((e for e in self.entries if e.phase == phase and e.config == config), None)

    def of_phase(self, *phases: Phase) -> list[Entry]:
        return [e for e in self.entries if e.phase in phases]

    def mark_baseline(self, stages: str) -> None:
        """The composition the stages chose as the search's baseline, for the report to
        say as chosen: the composer's cost ties and close rivals choose other than the
        fastest look, and the report, deriving it from the looks, named pgo+lto as
        shipped where the run shipped pgo+thinlto (bc).  Where it cannot be written
        (disk full), the report derives it as before: the run goes on."""
        try:
            write_atomic(os.path.join(self.folder, BASELINE), (stages + "\n").encode(),
                         durable=True)
        except OSError:
            pass

    @property
    def baseline(self) -> str | None:
        """What mark_baseline wrote (None: no composition was chosen, or an older run)."""
        try:
            with open(os.path.join(self.folder, BASELINE), "rb") as handle:
                name = handle.read(4096).decode("utf-8", "replace").strip()
        except OSError:
            return None
        return name or None

    def lock(self) -> None:
        import fcntl

        self._lock = open(os.path.join(self.folder, "lock"), "w")
        try:
            fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            self._lock.close()
            raise JournalError(f"run {self.run_id} is being tuned by another autopass "
                               "process; wait for it or stop it first") from None

    def append(self, entry: Entry) -> None:
        """On disk (fsynced) before it returns; OSError (disk full, read-only) propagates."""
        line = _line(entry)
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            written = os.write(fd, line)
            if written != len(line):
                raise OSError(28, f"short write to {self.path}")
            os.fsync(fd)
        finally:
            os.close(fd)
        self.entries.append(entry)


def _write_settings(folder: str, settings: RunSettings) -> None:
    write_atomic(os.path.join(folder, HEADER),
                 json.dumps(settings.to_json(), indent=1, sort_keys=True).encode(),
                 durable=True)


def _line(entry: Entry) -> bytes:
    return (json.dumps(entry.to_json(), sort_keys=True, separators=(",", ":")) + "\n").encode()


def _read_entries(path: str, repair: bool, version: int = JOURNAL_VERSION) -> list[Entry]:
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
            entry = Entry.from_json(json.loads(line), version)
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


def _latest_name(runs: str) -> str:
    """The run folder `latest` names.  When that file is missing or damaged (not text,
    not a run folder of this store), the newest run: their names begin with the time
    they started.  JournalError when the store has no run."""
    try:
        with open(os.path.join(runs, LATEST), "rb") as handle:
            name = handle.read(4096).decode("utf-8", "replace").strip()
    except OSError:
        name = ""
    if name and name == os.path.basename(name) and os.path.isdir(os.path.join(runs, name)):
        return name
    try:
        started = sorted(f for f in os.listdir(runs) if RUN_NAME.match(f)
                         and os.path.isfile(os.path.join(runs, f, HEADER)))
    except OSError:
        started = []
    if not started:
        raise JournalError("no tuning run in this store yet; run `autopass tune` first")
    return started[-1]
