"""What the agents see: the hot units, the knob space, measured trials, and evidence on demand.

Cheap evidence first: the profile and, per hot unit, the optimization remarks of its hot
functions (one compile, cached).  A function's IR, the pass pipeline and the difference
between two configurations are fetched only when an agent asks for them (`tool`).
Everything an agent reads is bounded in size; every flag it names is checked against
the knob space and the allowlist before anything is compiled.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

from autopass_build.core import flags as flagset
from autopass_build.core.outcome import EvaluationError
from autopass_build.evidence.unit import Evidence, Remark, group_remarks
from autopass_build.measuring.attribution import UnitEffect
from autopass_build.measuring.stats import SLOWER
from autopass_build.store.build_records import UnitRecord
from autopass_build.store.index import Store
from autopass_build.tuning.space import Knob, Space

MAX_TOOL_CHARS = 12000


@dataclass
class HotUnit:
    source: str
    share: float                               # percent of the profile
    functions: dict[str, float]                # hot function -> percent
    recorded_level: str


@dataclass
class Trial:
    """One measured candidate, as the agents see it."""
    n: int
    changes: dict[str, dict[str, str]]         # unit -> knob -> value (short form)
    outcome: str
    ratio: float | None
    verdict: str | None
    detail: str = ""
    # each changed unit's own cost by attribution (tune --attribute), by source
    effects: dict[str, UnitEffect] = field(default_factory=dict)

    def regressed(self) -> bool:
        """Slower, or failed (wrong output, rejected flags).  A candidate screened out
        before measuring (tune --screen) was predicted no better: not a lesson."""
        if self.outcome == "SCREENED":
            return False
        return self.ratio is None or self.verdict == "slower" or bool(self.slower_units())

    def slower_units(self) -> list[str]:
        """The units attribution found slower, though the program as a whole may not be."""
        return [unit for unit, effect in self.effects.items() if effect.verdict == SLOWER]


@dataclass
class Context:
    store: Store
    units: dict[str, UnitRecord]               # source -> the unit that runs
    space: Space
    hot: list[HotUnit]
    run_folder: str
    evidence: Evidence = field(default=None)  # type: ignore[assignment]  # made from store
    _remarks: dict = field(default_factory=dict)
    # each unit's own knobs besides `space`'s: decisions on its hot loops and functions
    unit_knobs: dict[str, tuple[Knob, ...]] = field(default_factory=dict)

    def knobs_of(self, source: str) -> dict[str, Knob]:
        """Every knob `source` has: the shared ones and its own."""
        return {k.name: k for k in self.space.knobs + self.unit_knobs.get(source, ())}

    def __post_init__(self) -> None:
        self.evidence = self.evidence or Evidence(self.store)

    # -- cheap evidence ----------------------------------------------------------------
    def remarks(self, source: str, flags: tuple[str, ...] = ()) -> list[Remark]:
        """Remarks of `source` compiled with `flags` (cached); [] if it cannot compile."""
        key = (source, flags)
        if key not in self._remarks:
            try:
                self._remarks[key] = self.evidence.collect(self.units[source], flags)
            except (EvaluationError, OSError):   # no evidence is not a reason to stop
                self._remarks[key] = ([], {})
        return self._remarks[key][0]

    def weight(self, source: str) -> float:
        """The unit's share of the profile as a fraction, 0.1 for a unit outside the hot
        list: what a hypothesis on it can move the program by, at most."""
        return next((h.share / 100.0 for h in self.hot if h.source == source), 0.1)

    def sizes(self, source: str) -> dict[str, int]:
        self.remarks(source)
        return self._remarks[(source, ())][1]

    def hot_remarks(self, source: str) -> list[Remark]:
        hot = next(h for h in self.hot if h.source == source)
        wanted = set(hot.functions)
        return [r for r in self.remarks(source) if r.function in wanted and r.kind != "Analysis"]

    def brief(self) -> dict:
        """The first thing an agent reads: profile, knobs, and hot remarks, compact."""
        return {
            "hot_units": [{"unit": h.source, "share_percent": round(h.share, 1),
                           "recorded_opt_level": h.recorded_level,
                           "hot_functions": {f: round(s, 1) for f, s in h.functions.items()},
                           "remarks": group_remarks(self.hot_remarks(h.source), cap=3),
                           **({"own_knobs": self.knob_table(self.unit_knobs[h.source])}
                              if self.unit_knobs.get(h.source) else {})}
                          for h in self.hot],
            "knobs": self.knob_table(),
        }

    def knob_table(self, knobs: tuple[Knob, ...] | None = None) -> list[dict]:
        """The shared knobs (or `knobs`: a unit's own, decisions carried in the IR)."""
        table = []
        for knob in self.space.knobs if knobs is None else knobs:
            limits = [c.why for c in self.space.constraints if knob.name in c.defaults]
            table.append({"knob": knob.name, "doc": knob.doc,
                          "values": [knob.short(i) for i in range(len(knob.values))],
                          **({"limited_by": limits} if limits else {})})
        return table

    # -- evidence on demand (the LLM's tools) --------------------------------------------
    TOOLS = {
        "remarks": "optimization remarks of one unit (optionally one function), with "
                   "optional extra flags: {unit, function?, flags?}",
        "function_ir": "LLVM IR of one function before and after optimization: "
                       "{unit, function, flags?}",
        "pipeline": "the pass pipeline clang runs on one unit: {unit, flags?}",
        "diff": "remarks gained/lost and size changes between two flag sets of one unit: "
                "{unit, flags_a, flags_b}",
    }

    def tool(self, name: str, args: dict) -> str:
        """A tool's answer as JSON text (an error is an answer too, never an exception)."""
        try:
            result = self._tool(name, args)
        except (KeyError, TypeError, ValueError, flagset.FlagError, EvaluationError) as error:
            result = {"error": f"{type(error).__name__}: {error}"}
        text = json.dumps(result, default=str)
        return text if len(text) <= MAX_TOOL_CHARS else text[:MAX_TOOL_CHARS] + "...[cut]"

    def _tool(self, name: str, args: dict) -> object:
        if name not in self.TOOLS:
            raise KeyError(f"no tool {name!r}; tools: {', '.join(self.TOOLS)}")
        unit = self.units[str(args["unit"])]
        flags = flagset.parse(str(args.get("flags", "")))
        if name == "remarks":
            remarks = self.remarks(unit.source_rel, flags)
            if args.get("function"):
                remarks = [r for r in remarks if r.function == args["function"]]
            return group_remarks([r for r in remarks if r.kind != "Analysis"], cap=4)
        if name == "function_ir":
            return self.evidence.function_ir(unit, str(args["function"]), flags)
        if name == "pipeline":
            return self.evidence.pipeline(unit, flags)[:4000]
        return self.evidence.diff(unit, flagset.parse(str(args.get("flags_a", ""))),
                                  flagset.parse(str(args.get("flags_b", ""))))


def trial_json(trial: Trial) -> dict:
    return asdict(trial)
