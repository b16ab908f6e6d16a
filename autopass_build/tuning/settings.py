"""A tuning run's settings: one frozen record, built once when the run starts (from
[tune], the command line and what the run found: its sources, target, knob space) and
written as the run's `run.json`.  `--resume` adopts it, `report` and `publish` read it;
nothing reads the file by string key."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields

# The keys a run needs to be resumed, and their JSON types: a run.json lacking one was
# written by a test or an earlier step (reported, not resumed); one of another type is
# damaged.
REQUIRED = {"strategy": str, "seed": int, "budget": int, "options": dict, "sources": list,
            "target": str, "metric": str, "space": str}


class SettingsError(ValueError):
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
