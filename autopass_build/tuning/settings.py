"""A tuning run's settings, in two records.  `TuneRequest`: what is asked, [tune] of
autopass.toml with the command line's values on top.  `RunSettings`: one frozen record,
built once when the run starts from the request and what the run found (its sources,
target, knob space), written as the run's `run.json`; `--resume` adopts it (`adopted`),
`report` and `publish` read it; nothing reads the file by string key."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields, replace

from autopass_build.config import Config, TuneConfig
from autopass_build.core.durations import parse_duration
from autopass_build.core.errors import AutopassError

# The keys a run needs to be resumed, and their JSON types: a run.json lacking one was
# written by a test or an earlier step (reported, not resumed); one of another type is
# damaged.
REQUIRED = {"strategy": str, "seed": int, "budget": int, "options": dict, "sources": list,
            "target": str, "metric": str, "space": str}


class SettingsError(AutopassError, ValueError):
    pass


@dataclass(frozen=True)
class RunSettings:
    strategy: str = "run"
    seed: int = 0
    budget: int = 0                      # evaluations (a resumed run may change it)
    options: dict[str, float] = field(default_factory=dict)   # the strategy's options
    sources: tuple[str, ...] = ()        # the hot sources tuned, relative to the root
    target: str = ""                     # the binary under test, relative to the root
    metric: str = ""                     # [measure].metric
    space: str = ""                      # fingerprint of the knob space (another compiler?)
    notes: tuple[str, ...] = ()          # knobs dropped, and why
    pgo: str | None = None               # the PGO profile's hash, on runs tuned on PGO
    native: bool = False
    screen: bool = False
    stages: tuple[str, ...] = ()
    attribute: bool = False
    time: float | None = None            # the time budget, in seconds
    journal_version: int = 0             # set by Journal.create
    lacking: tuple[str, ...] = ()        # REQUIRED keys the file did not have (not written)

    def to_json(self) -> dict:
        data = asdict(self)
        del data["lacking"]
        return {k: list(v) if isinstance(v, tuple) else v for k, v in data.items()}

    @classmethod
    def from_json(cls, data: object) -> "RunSettings":
        """SettingsError when `data` is not a run's settings (a key of the wrong type)."""
        if not isinstance(data, dict):
            raise SettingsError("not an object")
        wrong = [k for k, kind in REQUIRED.items() if k in data and not isinstance(data[k], kind)]
        if wrong:
            raise SettingsError(f"{', '.join(wrong)} of the wrong type")
        known = {f.name for f in fields(cls)} - {"lacking"}
        values = {k: v for k, v in data.items() if k in known}
        try:
            for name in ("sources", "notes", "stages"):
                values[name] = tuple(str(v) for v in values.get(name) or ())
            for name in ("native", "screen", "attribute"):
                values[name] = bool(values.get(name))
            if values.get("time") is not None:
                values["time"] = float(values["time"])
            values["journal_version"] = int(values.get("journal_version") or 0)
        except (TypeError, ValueError) as error:
            raise SettingsError(str(error)) from None
        return cls(**values, lacking=tuple(k for k in REQUIRED if k not in data))


# [tune]'s defaults, as config/model.py declares them: a request's defaults are the
# file's, written once
TUNE = TuneConfig()


@dataclass
class TuneRequest:
    """What a tuning run is asked: [tune] of autopass.toml (`from_config`) with the
    command line's values on top, and what only a command line asks (resume, the PGO
    choice, a time limit already parsed)."""
    strategy: str = TUNE.strategy
    budget: int = TUNE.budget
    seed: int = TUNE.seed
    options: dict = field(default_factory=dict)
    max_units: int = TUNE.max_units
    coverage: float = TUNE.coverage
    native: bool = TUNE.native
    flags_db: str = TUNE.flags_db
    resume: bool = False
    pgo: bool = False        # tune on top of the PGO build (`autopass pgo` trains it)
    screen: bool = TUNE.screen   # rank candidates by their compiled code before measuring
    knowledge: str = ""      # the screening knowledge file (default: the user's cache)
    screen_options: dict = field(default_factory=dict)   # screen.Options to change (bench)
    stages: tuple[str, ...] = TUNE.stages   # whole-program stages to try first (): none
    attribute: bool = TUNE.attribute  # per-unit attribution, and its winners' composite
    budget_given: bool = False   # --budget on the command line: a resumed run takes it
    time_limit: float | None = None    # --time / [tune].time, in seconds (clock.py)
    stage_budget: int = TUNE.stage_budget   # evaluations for the stages (0: half the budget)

    @classmethod
    def from_config(cls, config: Config, **given) -> "TuneRequest":
        """[tune] with the command line's values on top.  [tune].options belong to
        [tune].strategy: another strategy on the command line starts from its defaults."""
        tune = config.tune
        request = cls(strategy=tune.strategy, budget=tune.budget, seed=tune.seed,
                      options=dict(tune.options), max_units=tune.max_units,
                      coverage=tune.coverage, native=tune.native,
                      flags_db=config.resolve(tune.flags_db),
                      pgo=bool(config.run.train) and not tune.stages, screen=tune.screen,
                      stages=tune.stages, attribute=tune.attribute,
                      time_limit=parse_duration(tune.time) if tune.time else None,
                      stage_budget=tune.stage_budget)
        if given.get("strategy") not in (None, tune.strategy):
            request = replace(request, options={})
        return replace(request, **{k: v for k, v in given.items() if v is not None},
                       budget_given=given.get("budget") is not None)


def settings_for(request: TuneRequest, sources: list[str], target: str, metric: str,
                 space: str, notes: list[str], pgo: str | None) -> RunSettings:
    """The settings a new run writes: the request, and what the run found."""
    return RunSettings(strategy=request.strategy, seed=request.seed, budget=request.budget,
                       options=dict(request.options), sources=tuple(sources), target=target,
                       metric=metric, space=space, notes=tuple(notes), pgo=pgo,
                       native=request.native, screen=request.screen,
                       stages=tuple(request.stages), attribute=request.attribute,
                       time=request.time_limit)


def adopted(request: TuneRequest, settings: RunSettings) -> TuneRequest:
    """--resume: the run's own settings win; only --budget changes its budget, up or
    down ([tune] budget is what new runs get, not this one), and --time its time."""
    return replace(request, strategy=settings.strategy, seed=settings.seed,
                   options=dict(settings.options), native=settings.native,
                   pgo=bool(settings.pgo), screen=settings.screen, stages=settings.stages,
                   attribute=settings.attribute,
                   budget=request.budget if request.budget_given else settings.budget,
                   time_limit=request.time_limit or settings.time)
