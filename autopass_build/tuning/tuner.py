"""The tuning loop every strategy shares.

    hot units (profile) ─▶ knob space per unit ─▶ strategy.ask ─▶ replay + A/B ─▶ journal
                                                      ▲                              │
                                                      └──────── strategy.tell ◀──────┘
    best statistically-clear candidate ─▶ per-unit attribution ─▶ final tight A/B
                                        ─▶ autopass.flags.json (only units that help)

Every candidate is measured against the baseline (the recorded build replayed), so all
ratios in a run are comparable.  A configuration is measured once: the journal is the
cache.  The incumbent is the best candidate whose interval lies clearly below 1.  At the
end, when the best candidate changes several units, each unit's flags are measured alone
(those that do not help on their own are dropped), and the combination is re-measured
with twice the pairs and half the precision before anything is written.
"""

from __future__ import annotations

import os
import platform
import shutil
import time
from dataclasses import dataclass, field, replace

from autopass_build.config import Config
from autopass_build.core import toolchain
from autopass_build.core.files import hash_json
from autopass_build.core.names import FLAGS_DB_NAME, PROFILE_NAME
from autopass_build.core.outcome import Outcome
from autopass_build.instruments import pgo
from autopass_build.instruments.evaluate import EvaluateError, Evaluation, Evaluator
from autopass_build.instruments.hotspots import ProfileError
from autopass_build.instruments.hotspots import load as load_profile
from autopass_build.instruments.hotspots import profile as run_profile
from autopass_build.instruments.measure import DETERMINISTIC_METRICS, MeasureError
from autopass_build.instruments.stats import FASTER, SLOWER
from autopass_build.store import flagsdb
from autopass_build.store.index import Store
from autopass_build.tuning import search
from autopass_build.tuning.journal import Journal
from autopass_build.tuning.space import JointSpace, Space, default_space, probe


class TuneError(Exception):
    pass


@dataclass
class TuneRequest:
    strategy: str = "random"
    budget: int = 40
    seed: int = 0
    options: dict = field(default_factory=dict)
    max_units: int = 4
    coverage: float = 90.0
    native: bool = False
    flags_db: str = FLAGS_DB_NAME
    resume: bool = False
    pgo: bool = False        # tune on top of the PGO build (`autopass pgo` trains it)
    screen: bool = False     # rank candidates by their compiled code before measuring
    knowledge: str = ""      # the screening knowledge file (default: the user's cache)
    screen_options: dict = field(default_factory=dict)   # screen.Options to change (bench)

    @classmethod
    def from_config(cls, config: Config, **given) -> "TuneRequest":
        """[tune] with the command line's values on top.  [tune].options belong to
        [tune].strategy: another strategy on the command line starts from its defaults."""
        tune = config.tune
        request = cls(tune.strategy, tune.budget, tune.seed, dict(tune.options),
                      tune.max_units, tune.coverage, tune.native,
                      config.resolve(tune.flags_db), pgo=bool(config.run.train),
                      screen=tune.screen)
        if given.get("strategy") not in (None, tune.strategy):
            request = replace(request, options={})
        return replace(request, **{k: v for k, v in given.items() if v is not None})


@dataclass
class Winner:
    source: str
    flags: tuple[str, ...]
    entry: dict            # the journal entry that measured this unit's gain


@dataclass
class TuneResult:
    journal: Journal
    sources: list[str]
    measured: int                      # search evaluations in the journal
    best: dict | None                  # the best search entry, if any was clearly faster
    final: dict | None                 # the final re-measurement
    winners: list[Winner]
    flags_db: str | None               # where the winners were written


class Tuner:
    def __init__(self, store: Store, config: Config, request: TuneRequest,
                 progress=None):
        self.store = store
        self.config = config
        self.request = request
        self.show = progress or (lambda message: None)
        self.journal: Journal | None = None

    # -- the run -------------------------------------------------------------------------
    def run(self) -> TuneResult:
        journal = Journal.latest(self.store.dir, repair=False) if self.request.resume else None
        if journal:
            journal.take_over()
            self._adopt(journal.header)
        evaluator = self._evaluator()
        if journal and journal.header.get("pgo") and journal.header["pgo"] != self.profile.hash:
            raise TuneError(f"run {journal.run_id} was tuned on another PGO profile; start a "
                            "new run without --resume")
        sources = journal.header["sources"] if journal else self._hot_sources(evaluator)
        space = self._space(evaluator)
        for note in space.notes:
            self.show(note)
        if journal is None:
            journal = Journal.create(self.store.dir, self._header(evaluator, sources, space))
            journal.lock()
        elif journal.header["space"] != _fingerprint(space):
            raise TuneError(f"run {journal.run_id}: the knob space changed since it started "
                            "(another compiler?); start a new run without --resume")
        self.journal = journal
        self.evaluator = evaluator
        self.units_of = {s: [u.id for u in evaluator.units if u.source_rel == s] for s in sources}
        joint = JointSpace([(s, space) for s in sources])
        best = self._search(joint)
        final, winners = self._conclude(best) if best else (None, [])
        if self.request.pgo:
            self._versus_recorded(winners)
        written = self._write_db(winners) if winners and final else None
        measured = sum(1 for e in journal.entries if e["phase"] == "search")
        return TuneResult(journal, sources, measured, best, final, winners, written)

    def _search(self, joint: JointSpace) -> dict | None:
        request = self.request
        strategy = search.make(request.strategy, joint, request.seed, request.options)
        if request.strategy == "agent":
            self._attach_agents(strategy, joint)
        known = {e["key"]: e for e in self.journal.entries}
        measured = sum(1 for e in self.journal.entries if e["phase"] == "search")
        screener = self._screener(joint) if request.screen else None
        while measured < request.budget:
            point = strategy.ask()
            if point is None:
                self.show(f"{request.strategy} has no new candidate after {measured} "
                          "evaluations: the space is exhausted for it")
                break
            flags = joint.flags_by_label(point)
            key = "search:" + _config_key(flags)
            entry = known.get(key) or known.get("screened:" + key.split(":", 1)[1])
            if entry is None:
                judgement = screener.judge(flags) if screener else None
                if judgement and not judgement.measure:
                    self.show(f"  screened out {_flags_text(flags)}: {judgement.why}")
                    entry = self._screened(key, flags, judgement)
                else:
                    measured += 1
                    self.show(f"[{measured}/{request.budget}] {self._incumbent_text()}"
                              f"measuring {_flags_text(flags)}"
                              + (f" ({judgement.why})" if judgement else ""))
                    entry = self._measure("search", key, flags, judgement=judgement)
                    if screener:
                        screener.learn(entry)
                known[entry["key"]] = entry
            entry = self._confirmed(entry, flags)
            strategy.tell(point, _value(entry), entry)
        if screener:
            screener.persist()
        return self._incumbent()

    def _screener(self, joint: JointSpace):
        from autopass_build.tuning import screen

        found = load_profile(self.store.dir)
        functions: dict[str, set[str]] = {}
        for f in (found.functions if found else []):
            for unit in f.units:
                functions.setdefault(unit, set()).add(f.name)
        knowledge = screen.Knowledge.load(
            self.request.knowledge or screen.knowledge_path(self.evaluator.units[0].compiler_id))
        if knowledge.note:
            self.show(knowledge.note)
        self.show(f"screening candidates: {len(knowledge.samples)} evaluations known from "
                  f"{len(knowledge.programs())} earlier program(s)")
        program = hash_json([os.path.abspath(self.store.dir),
                             self.evaluator.target.output_rel])[:16]
        return screen.Screener(self.evaluator, joint.blocks,
                               found.unit_shares() if found else {}, functions, knowledge,
                               program, screen.Options(**self.request.screen_options),
                               self.journal.entries,
                               self.request.seed)

    def _screened(self, key: str, flags: dict, judgement) -> dict:
        """A candidate not measured: journaled with its prediction, told as no gain."""
        entry = {"n": len(self.journal.entries) + 1, "phase": "screened",
                 "key": "screened:" + key.split(":", 1)[1],
                 "flags": {s: " ".join(f) for s, f in sorted(flags.items())},
                 "outcome": "SCREENED", "verdict": None, "ratio": None, "low": None,
                 "high": None, "pairs": 0, "detail": judgement.why,
                 "predicted": judgement.predicted, "features": judgement.features,
                 "timing": {"seconds": 0.0, "at": time.time(), "runs": 0}}
        self._append(entry)
        return entry

    def _confirmed(self, entry: dict, flags: dict[str, tuple[str, ...]]) -> dict:
        """A FASTER candidate that would become the incumbent is measured again, with
        fresh pairs, before anything builds on it.  Among many candidates one false
        "faster" is likely (20 identical candidates at 2.5 % each: 40 %); two in a row
        for the same candidate are not.  Deterministic metrics need no second look.
        Returns the entry that counts: the confirmation when there is one."""
        if entry["verdict"] != FASTER or self.config.measure.metric in DETERMINISTIC_METRICS:
            return entry
        key = "confirm:" + entry["key"].split(":", 1)[1]
        check = self._find(key)
        if check is None:
            best = self._incumbent()
            if best is not None and best["ratio"] <= entry["ratio"]:
                return entry             # not a new incumbent: nothing builds on it
            self.show(f"  confirming #{entry['n']} ({entry['ratio']:.4f}x) with fresh pairs")
            check = self._measure("confirm", key, flags)
        return check

    def _attach_agents(self, strategy, joint: JointSpace) -> None:
        from autopass_build.tuning import agents

        found = load_profile(self.store.dir)
        functions: dict[str, dict[str, float]] = {}
        for f in (found.functions if found else []):
            for unit in f.units:
                functions.setdefault(unit, {})[f.name] = f.share / len(f.units)
        shares = found.unit_shares() if found else {}
        units = {s: next(u for u in self.evaluator.units if u.source_rel == s)
                 for s in self.units_of}
        hot = [agents.HotUnit(s, shares.get(s, 0.0), functions.get(s, {}), units[s].opt_level)
               for s in self.units_of]
        strategy.context = agents.Context(self.store, units, joint.blocks[0][1], hot,
                                          self.journal.folder)
        try:
            strategy.backend = agents.make_backend(self.config.agent, self.journal.folder,
                                                   self.show, resume=self.request.resume)
        except agents.AgentUnavailable as error:
            raise TuneError(str(error)) from None

    def _conclude(self, best: dict) -> tuple[dict | None, list[Winner]]:
        flags = {s: tuple(f.split()) for s, f in best["flags"].items()}
        gains = {}
        if len(flags) > 1:
            for source, unit_flags in flags.items():
                alone = {source: unit_flags}
                entry = (self._find("search:" + _config_key(alone))
                         or self._measured_once("attribute", alone,
                                                f"{source} alone (attribution)"))
                if entry["verdict"] == FASTER:
                    gains[source] = entry
            kept = {s: flags[s] for s in gains} or flags   # no single unit helps: keep all
        else:
            kept = flags
        final = self._measured_once("final", kept, "final re-measurement, tight interval",
                                    tight=True)
        if final["verdict"] != FASTER:
            return final, []
        return final, [Winner(s, f, gains.get(s, final)) for s, f in sorted(kept.items())]

    def _versus_recorded(self, winners: list[Winner]) -> None:
        """On PGO, gains are against PGO alone; users compare with their plain build
        too.  So PGO alone, and PGO with the winners, are each measured against the
        recorded build (journal phases "pgo-alone" and "tuned-on-pgo")."""
        try:
            plain = Evaluator(self.store, self.config, self.evaluator.target.output_rel)
        except EvaluateError as error:
            raise TuneError(str(error)) from None
        with_profile = pgo.flags_for(plain, self.profile)
        self._measured_once("pgo-alone", {}, "PGO alone against the recorded build",
                            evaluator=plain, under=with_profile)
        if winners:
            self._measured_once("tuned-on-pgo", {w.source: w.flags for w in winners},
                                "tuned on PGO against the recorded build",
                                evaluator=plain, under=with_profile)

    # -- measuring -------------------------------------------------------------------------
    def _measured_once(self, phase: str, flags: dict, what: str, tight: bool = False,
                       **against) -> dict:
        key = f"{phase}:" + _config_key(flags)
        entry = self._find(key)
        if entry is None:
            self.show(f"{what}: {_flags_text(flags)}" if flags else what)
            entry = self._measure(phase, key, flags, tight, **against)
        return entry

    def _find(self, key: str) -> dict | None:
        return next((e for e in self.journal.entries if e["key"] == key), None)

    def _measure(self, phase: str, key: str, flags: dict[str, tuple[str, ...]],
                 tight: bool = False, evaluator: Evaluator | None = None,
                 under: dict[str, tuple[str, ...]] | None = None, judgement=None) -> dict:
        """`evaluator`: another baseline (default: the run's); `under`: per-unit flags
        that come before the candidate's (a PGO profile measured against no profile)."""
        by_unit = {uid: f for s, f in flags.items() for uid in self.units_of[s]}
        if under:
            by_unit = {uid: under.get(uid, ()) + by_unit.get(uid, ())
                       for uid in set(under) | set(by_unit)}
        measure = self.config.measure
        if tight:
            measure = replace(measure, max_pairs=2 * measure.max_pairs,
                              precision=measure.precision / 2)
        started = time.monotonic()
        try:
            evaluation = (evaluator or self.evaluator).evaluate(
                by_unit, lambda m: self.show(f"  {m}"), measure)
        except MeasureError as error:
            raise TuneError(f"{error}; the journal holds every finished evaluation: fix "
                            "the cause, then `autopass tune --resume`") from None
        except OSError as error:
            raise TuneError(f"cannot write to the store ({error.strerror or error}): free "
                            "space or fix permissions, then `autopass tune --resume`") from None
        entry = _entry(len(self.journal.entries) + 1, phase, key, flags, evaluation,
                       time.monotonic() - started)
        if judgement is not None:
            entry.update(predicted=judgement.predicted, features=judgement.features)
        self._append(entry)
        return entry

    def _append(self, entry: dict) -> None:
        try:
            self.journal.append(entry)
        except OSError as error:
            raise TuneError(f"cannot write the journal {self.journal.path} "
                            f"({error.strerror or error}); nothing finished is lost: free "
                            "space or fix permissions, then `autopass tune --resume`") from None

    def _incumbent(self) -> dict | None:
        """The best clearly-faster candidate: confirmed by a second measurement, unless
        the metric is deterministic."""
        phase = "search" if self.config.measure.metric in DETERMINISTIC_METRICS else "confirm"
        clear = [e for e in self.journal.entries
                 if e["phase"] == phase and e["verdict"] == FASTER]
        return min(clear, key=lambda e: (e["ratio"], e["n"])) if clear else None

    def _incumbent_text(self) -> str:
        best = self._incumbent()
        if best is None:
            return "no clear gain yet · "
        return (f"best {best['ratio']:.4f}x [{best['low']:.4f}, {best['high']:.4f}] "
                f"(#{best['n']}) · ")

    # -- setting up --------------------------------------------------------------------------
    def _evaluator(self) -> Evaluator:
        try:
            evaluator = Evaluator(self.store, self.config)
            if self.request.pgo:
                self.profile = self._profile(evaluator)
                evaluator.base_flags = pgo.flags_for(evaluator, self.profile)
            self.show(f"replaying the baseline of {evaluator.target.output_rel}"
                      + (" with its PGO profile" if self.request.pgo else ""))
            evaluator.baseline()
            return evaluator
        except (EvaluateError, MeasureError, pgo.PgoError) as error:
            raise TuneError(str(error)) from None

    def _profile(self, evaluator: Evaluator) -> "pgo.TrainedProfile":
        found = pgo.load(self.store.dir)
        if found is not None and found.target == evaluator.target.output_rel:
            return found
        self.show("training a PGO profile (autopass pgo)")
        return pgo.train(evaluator, self.show)

    def _hot_sources(self, evaluator: Evaluator) -> list[str]:
        found = load_profile(self.store.dir)
        if found is None or found.target != evaluator.target.output_rel:
            self.show("profiling the baseline to find the hot units")
            try:
                found = run_profile(evaluator)
            except ProfileError as error:
                raise TuneError(f"cannot profile the benchmark: {error}") from None
        mine = {u.source_rel for u in evaluator.units}
        chosen, covered = [], 0.0
        for source, share in found.unit_shares().items():
            if source not in mine:
                continue
            if len(chosen) >= self.request.max_units or covered >= self.request.coverage:
                break
            chosen.append(source)
            covered += share
        if not chosen:
            raise TuneError("the profile puts no time in a recorded unit (is the time spent "
                            "in a system library?); see `autopass profile`")
        return chosen

    def _space(self, evaluator: Evaluator) -> Space:
        compiler = evaluator.replayer.compiler_override or evaluator.units[0].compiler
        space = default_space(native=self.request.native)
        try:
            return probe(space, compiler, os.path.join(self.store.dir, "probe"),
                         toolchain.stamp_of(compiler))
        except OSError as error:
            raise TuneError(f"cannot probe {compiler}: {error}") from None

    def _header(self, evaluator: Evaluator, sources: list[str], space: Space) -> dict:
        r = self.request
        return {"strategy": r.strategy, "seed": r.seed, "budget": r.budget,
                "options": r.options, "native": r.native, "sources": sources,
                "target": evaluator.target.output_rel, "metric": self.config.measure.metric,
                "space": _fingerprint(space), "notes": space.notes,
                "pgo": self.profile.hash if r.pgo else None, "screen": r.screen}

    def _adopt(self, header: dict) -> None:
        """--resume: the run's own settings win (the budget may be raised)."""
        self.request = replace(self.request, strategy=header["strategy"], seed=header["seed"],
                               options=header["options"], native=header["native"],
                               pgo=bool(header.get("pgo")), screen=bool(header.get("screen")),
                               budget=max(self.request.budget, header["budget"]))
        self.config = replace(self.config, measure=replace(self.config.measure,
                                                           metric=header["metric"]))

    # -- the result ----------------------------------------------------------------------------
    def _ship_profile(self, db_path: str) -> dict:
        """The PGO profile beside the database (to be committed with it), by hash."""
        target = os.path.join(os.path.dirname(os.path.abspath(db_path)), PROFILE_NAME)
        shutil.copyfile(self.profile.path, target + ".tmp")
        os.replace(target + ".tmp", target)
        return {"path": PROFILE_NAME, "hash": self.profile.hash}
    def _write_db(self, winners: list[Winner]) -> str:
        path = self.request.flags_db
        try:
            db = flagsdb.load(path)
        except flagsdb.FlagsDbError as error:
            raise TuneError(f"{error}; the tuning result is in the journal "
                            f"{self.journal.path}") from None
        identity = toolchain.identify(self.evaluator.units[0].compiler)
        db.toolchain = {"compiler": identity.short() if identity else "unknown",
                        "target": identity.target if identity else ""}
        if self.request.native:
            db.cpu = platform.processor() or platform.machine()
        db.profile = self._ship_profile(path) if self.request.pgo else None
        for source in self.journal.header["sources"]:
            db.entries.pop(source, None)     # re-tuned: only what helps now stays
        units = {u.source_rel: u for u in self.evaluator.units}
        for w in winners:
            e = w.entry
            db.entries[w.source] = flagsdb.Entry(
                list(w.flags), units[w.source].source_hash,
                flagsdb.Gain(self.config.measure.metric, e["ratio"], e["low"], e["high"],
                             e["pairs"]),
                _why(self.request, e), self.journal.run_id)
        flagsdb.save(path, db)
        return path


def _value(entry: dict) -> float | None:
    """What a strategy is told: the ratio when the A/B was decisive; 1.0 (the baseline's
    value) when the interval could not tell the candidate from the baseline, so that no
    strategy chases noise; None when the candidate failed."""
    if entry["phase"] == "screened":
        return max(1.0, entry["predicted"] or 1.0)   # never credited with a gain
    if entry["ratio"] is None:
        return None
    return entry["ratio"] if entry["verdict"] in (FASTER, SLOWER) else 1.0


def _why(request: TuneRequest, entry: dict) -> str:
    how = {"search": f"{request.strategy} search, evaluation #{entry['n']}",
           "confirm": f"{request.strategy} search, confirmed (#{entry['n']})",
           "attribute": "measured alone", "final": "final re-measurement"}[entry["phase"]]
    return (f"{how}: {entry['ratio']:.4f}x of the recorded build "
            f"[{entry['low']:.4f}, {entry['high']:.4f}], {entry['pairs']} pairs")


def _entry(n: int, phase: str, key: str, flags: dict, evaluation: Evaluation,
           seconds: float) -> dict:
    comparison = evaluation.comparison
    estimate = comparison.estimate if comparison else None
    ok = evaluation.outcome == Outcome.OK and estimate is not None
    replay = evaluation.replay
    return {
        "n": n, "phase": phase, "key": key,
        "flags": {s: " ".join(f) for s, f in sorted(flags.items())},
        "outcome": str(evaluation.outcome),
        "verdict": comparison.verdict if ok else None,
        "ratio": estimate.ratio if ok else None,
        "low": estimate.low if ok else None,
        "high": estimate.high if ok else None,
        "pairs": estimate.pairs if ok else 0,
        "detail": evaluation.detail[:300],
        # Differs between an interrupted-and-resumed run and a straight one:
        "timing": {"seconds": round(seconds, 3), "at": time.time(),
                   "runs": comparison.runs if comparison else 0,
                   "compiled": replay.compiled + replay.from_source, "cached": replay.cached},
    }


def _config_key(flags: dict[str, tuple[str, ...]]) -> str:
    return hash_json(sorted((s, list(f)) for s, f in flags.items()))[:24]


def _fingerprint(space: Space) -> str:
    return hash_json([[k.name, [list(v) for v in k.values]] for k in space.knobs]
                     + [[c.knob, sorted(c.values), list(c.defaults)]
                        for c in space.constraints])[:24]


def _flags_text(flags: dict[str, tuple[str, ...]]) -> str:
    return "; ".join(f"{s}: {' '.join(f)}" for s, f in sorted(flags.items())) or "(as recorded)"
