"""Measuring for a tuning run: every journal entry is made here, and each is on disk
before anything uses it.  A configuration is measured once per phase: the journal is
the cache."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import TYPE_CHECKING, Callable

from autopass_build.candidates.bolt import BoltStage
from autopass_build.candidates.candidate import Candidate, PortableStep
from autopass_build.candidates.evaluate import Evaluation, Evaluator
from autopass_build.config import Config, MeasureConfig
from autopass_build.core.errors import AutopassError
from autopass_build.core.files import hash_json
from autopass_build.core.flags import UnitFlags
from autopass_build.core.outcome import Outcome
from autopass_build.measuring.attribution import Attributor
from autopass_build.measuring.benchmark import DETERMINISTIC_METRICS, MeasureError
from autopass_build.measuring.measure import tightened
from autopass_build.measuring.stats import FASTER, SLOWER
from autopass_build.tuning.journal import Entry, Journal, Phase, Timing

if TYPE_CHECKING:    # Ray is imported only by a run that names a cluster
    from autopass_build.cluster.dispatch import ClusterMeasurer

ATTRIBUTED = (Phase.SEARCH, Phase.COMPOSITE)   # phases whose entries carry unit effects
# Phases whose A/B stops taking pairs when --time is up: those where an unclear verdict
# leaves a candidate, a composition or a step out.  Not the measurements of what ships
# against the recorded build (composite, alone, final, tuned): cut short, they would
# turn a verified result into an unverified one.
CUT_AT_TIME = (Phase.SEARCH, Phase.CONFIRM, Phase.STAGE, Phase.STAGE_AGAIN,
               Phase.STAGE_CONFIRM, Phase.STAGE_RIVAL)


class TuneError(AutopassError):
    """A message for the user: the run stopped; the journal holds what was finished."""


def config_key(flags: UnitFlags, stages: str = "") -> str:
    """A configuration's identity: the same per-unit flags (on the same stages), the
    same key."""
    key = sorted((s, list(f)) for s, f in flags.items())
    return hash_json([key, stages] if stages else key)[:24]


def flags_text(flags: UnitFlags) -> str:
    return "; ".join(f"{s}: {' '.join(f)}" for s, f in sorted(flags.items())) or "(as recorded)"


def flags_of(entry: Entry) -> UnitFlags:
    return {s: tuple(f.split()) for s, f in entry.flags.items()}


STRATEGY_DIGITS = 3   # a ratio as strategies rank it: to 0.1 %


def value_for_strategy(entry: Entry) -> float | None:
    """What a strategy is told: the ratio when the A/B was decisive; 1.0 (the baseline's
    value) when the interval could not tell the candidate from the baseline, so that no
    strategy chases noise; None when the candidate failed.  Rounded to 0.1 %, below
    what any verdict resolves: callgrind's counts of one binary move by 0.01 % with the
    folder it runs from, and a GA ranked two such ratios (0.50538 on this machine,
    0.50543 on a cluster node) the other way round, so a run resumed elsewhere bred
    another generation."""
    if entry.phase == Phase.SCREENED:
        return max(1.0, entry.predicted or 1.0)   # never credited with a gain
    if entry.ratio is None:
        return None
    return round(entry.ratio, STRATEGY_DIGITS) if entry.verdict in (FASTER, SLOWER) else 1.0


class Measurements:
    """The run's journal and its baseline, measuring what is not measured yet."""

    def __init__(self, journal: Journal, evaluator: Evaluator, config: Config,
                 units_of: dict[str, list[str]], show: Callable[[str], None]):
        self.journal = journal
        self.evaluator = evaluator
        self.config = config
        self.units_of = units_of          # source -> the unit ids it stands for
        self.show = show
        self.attributor: Attributor | None = None   # tune --attribute: per-unit effects
        # tune --cluster: the search's candidates measured on the cluster's nodes
        self.remote: "ClusterMeasurer | None" = None
        self.until: float | None = None   # tune --time: its end, in time.monotonic()

    @property
    def deterministic(self) -> bool:
        return self.config.measure.metric in DETERMINISTIC_METRICS

    def on_nodes(self, evaluator: Evaluator | None = None) -> bool:
        """Whether a measurement against `evaluator`'s baseline (default: the run's) is
        made on the cluster's nodes: the run's, or a twin of it (another composition);
        another baseline (the recorded build's) only here."""
        return self.remote is not None and (evaluator is None
                                            or evaluator.twin_of is self.evaluator)

    def trains_on_nodes(self, evaluator: Evaluator | None = None) -> bool:
        """Whether a training run for a step measured against `evaluator` (CS-PGO's)
        runs on a node: where the step is measured on the nodes and they build at this
        tree's paths.  A shipped copy builds elsewhere, and a profile names a static
        function by the path its unit was compiled from (an LTO unit compiles from
        source): one trained there would not fit the build that ships."""
        return self.on_nodes(evaluator) and not (self.remote and self.remote.shipped)

    def once(self, phase: Phase, flags: UnitFlags, what: str, tight: bool = False,
             evaluator: Evaluator | None = None, under: UnitFlags | None = None,
             stages: str = "", link_flags: tuple[str, ...] = (),
             post_link: Callable[[Candidate], Candidate] | None = None,
             more_pairs: int = 1) -> Entry:
        """The journal's measurement of `flags` in `phase`, measuring it if there is none
        (`more_pairs`: times the pairs of a tight one, for a second look)."""
        entry = self.journal.find(phase, config_key(flags, stages))
        if entry is None:
            self.show(f"{what}: {flags_text(flags)}" if flags else what)
            entry = self.measure(phase, flags, tight, evaluator, under, stages=stages,
                                 link_flags=link_flags, post_link=post_link,
                                 more_pairs=more_pairs)
        return entry

    def measure(self, phase: Phase, flags: UnitFlags, tight: bool = False,
                evaluator: Evaluator | None = None, under: UnitFlags | None = None,
                judgement=None, stages: str = "", link_flags: tuple[str, ...] = (),
                post_link: Callable[[Candidate], Candidate] | None = None,
                more_pairs: int = 1) -> Entry:
        """`evaluator`: another baseline (default: the run's); `under`: per-unit flags
        that come before the candidate's (a PGO profile measured against no profile);
        `judgement`: screening's, kept with the entry; `stages`, `link_flags` and
        `post_link`: the whole-program stages the candidate is built with (on top of the
        baseline's); `more_pairs`: times the pairs."""
        measure = tightened(self.config.measure) if tight else self.config.measure
        measure = replace(measure, max_pairs=measure.max_pairs * more_pairs)
        started = time.monotonic()
        # a stage composition's look (its flags `under`, its `link_flags`) is measured
        # on a node as a candidate is, and so is one against another composition (a
        # twin of the run's evaluator), with a post-link step the node can make its own;
        # another baseline (the recorded build's, native's) only here
        portable = self._portable(post_link, evaluator)
        remotely = self.on_nodes(evaluator) and (post_link is None or portable is not None)
        try:
            if remotely:
                with self._nodes_on(evaluator):
                    return self.measure_many(phase, [flags], [judgement], measure, under,
                                             stages, link_flags, portable)[0]
            evaluation = (evaluator or self.evaluator).evaluate(
                self._by_unit(flags, under), lambda m: self.show(f"  {m}"), measure,
                link_flags, post_link,
                self.attributor if phase in ATTRIBUTED else None,
                until=self.until if phase in CUT_AT_TIME else None)
        except MeasureError as error:
            raise TuneError(f"{error}; the journal holds every finished evaluation: fix "
                            "the cause, then `autopass tune --resume`") from None
        except OSError as error:
            raise TuneError(f"cannot write to the store ({error.strerror or error}): free "
                            "space or fix permissions, then `autopass tune --resume`") from None
        return self._finished(phase, flags, evaluation, time.monotonic() - started,
                              judgement, stages)

    def _portable(self, post_link: Callable[[Candidate], Candidate] | None,
                  evaluator: Evaluator | None) -> PortableStep | None:
        """`post_link` when a node can make it its own: not BOLT where the nodes build a
        shipped copy (its profile describes one binary by its code, which a copy at
        other paths builds otherwise: `__FILE__` in its read-only data)."""
        if not isinstance(post_link, PortableStep):
            return None
        if isinstance(post_link, BoltStage) and not self.trains_on_nodes(evaluator):
            return None
        return post_link

    def measure_many(self, phase: Phase, batch: list[UnitFlags], judgements: list,
                     measure: MeasureConfig | None = None,
                     under: UnitFlags | None = None, stages: str = "",
                     link_flags: tuple[str, ...] = (),
                     post_link: PortableStep | None = None) -> list[Entry]:
        """Each candidate of `batch` measured, on the cluster's nodes at once when there
        is one, and journaled in the batch's order once all are finished (`stages`,
        `link_flags`: the stage composition each is built with; `post_link`: a step
        after its link, made by the node, what it trained adopted here)."""
        if self.remote is None:
            return [self.measure(phase, flags, judgement=judgement, under=under,
                                 stages=stages, link_flags=link_flags)
                    for flags, judgement in zip(batch, judgements)]
        from autopass_build.cluster.connect import ClusterError

        try:
            results = self.remote.evaluate_many(
                [self._by_unit(flags, under) for flags in batch],
                measure or self.config.measure,
                attribute=phase in ATTRIBUTED and self.attributor is not None,
                link_flags=link_flags,
                # portable() is data the node knows (node_bench.AfterLink); this layer
                # does not import the cluster's types
                after_link=post_link.portable() if post_link else None,  # type: ignore[arg-type]
                until=self.until if phase in CUT_AT_TIME else None)
        except ClusterError as error:
            raise TuneError(str(error)) from None
        entries = []
        for flags, judgement, result in zip(batch, judgements, results):
            if post_link is not None and result.brought is not None:
                post_link.adopt(result.brought)
            for line in result.lines:
                self.show(f"  [{result.node}] {line}")
            entries.append(self._finished(phase, flags, result.evaluation, result.seconds,
                                          judgement, stages, node=result.node))
        return entries

    def rebase_nodes(self, evaluator: Evaluator) -> None:
        """The cluster's nodes, if they measure, build `evaluator`'s baseline from now on
        (the stages chosen, or a twin's composition)."""
        if self.remote is None:
            return
        from autopass_build.cluster.connect import ClusterError

        try:
            self.remote.rebase(dict(evaluator.base_flags), evaluator.base_link_flags)
        except ClusterError as error:
            raise TuneError(str(error)) from None

    @contextmanager
    def _nodes_on(self, twin: Evaluator | None) -> Iterator[None]:
        """The nodes' baseline is `twin`'s while it measures, then the run's again."""
        if twin is None:
            yield
            return
        self.rebase_nodes(twin)
        try:
            yield
        finally:
            self.rebase_nodes(self.evaluator)

    def _by_unit(self, flags: UnitFlags, under: UnitFlags | None) -> UnitFlags:
        by_unit = {uid: f for s, f in flags.items() for uid in self.units_of[s]}
        if under:
            by_unit = {uid: under.get(uid, ()) + by_unit.get(uid, ())
                       for uid in set(under) | set(by_unit)}
        return by_unit

    def _finished(self, phase: Phase, flags: UnitFlags, evaluation: Evaluation,
                  seconds: float, judgement=None, stages: str = "", node: str = "") -> Entry:
        """The journal entry of a finished evaluation (`node`: the cluster node that
        measured it), appended."""
        entry = replace(self._entry_of(phase, flags, evaluation, seconds), node=node)
        if entry.outcome != Outcome.OK:
            # why, where the user watches: a rejected candidate used to pass in silence
            first_line = (entry.detail.strip().splitlines() or [""])[0]
            self.show(f"  {entry.outcome}: {first_line[:300]}")
        if evaluation.effects:
            entry = replace(entry, effects=tuple(evaluation.effects))
        if stages:
            entry = replace(entry, config=config_key(flags, stages), stages=stages)
        if judgement is not None:
            entry = replace(entry, predicted=judgement.predicted, features=judgement.features,
                            unit_features=judgement.unit_features or None)
        return self._append(entry)

    def screened(self, flags: UnitFlags, judgement) -> Entry:
        """A candidate not measured: journaled with its prediction."""
        return self._append(Entry(
            len(self.journal.entries) + 1, Phase.SCREENED, config_key(flags),
            _flags_json(flags), Outcome.SCREENED, detail=judgement.why,
            timing=Timing(at=time.time()), predicted=judgement.predicted,
            features=judgement.features, unit_features=judgement.unit_features or None))

    def incumbent(self) -> Entry | None:
        """The best clearly-faster candidate: confirmed by a second measurement, unless
        the metric is deterministic."""
        phases = (Phase.SEARCH, Phase.COMPOSITE) if self.deterministic else (Phase.CONFIRM,)
        clear = [e for e in self.journal.of_phase(*phases)
                 if e.verdict == FASTER and e.measured]
        # ranked as the strategies rank (value_for_strategy): two ratios within 0.1 % are
        # a tie, the earlier wins; the digits below move with where a run measured them
        return min(clear, key=lambda e: (round(e.ratio or 1.0, STRATEGY_DIGITS), e.n)) \
            if clear else None

    def _entry_of(self, phase: Phase, flags: UnitFlags, evaluation: Evaluation,
                  seconds: float) -> Entry:
        comparison = evaluation.comparison
        estimate = comparison.estimate if comparison else None
        ok = evaluation.outcome == Outcome.OK and estimate is not None
        replay = evaluation.replay
        timing = Timing(round(seconds, 3), time.time(), comparison.runs if comparison else 0,
                        replay.compiled + replay.from_source, replay.cached)
        return Entry(len(self.journal.entries) + 1, phase, config_key(flags),
                     _flags_json(flags), Outcome(evaluation.outcome),
                     verdict=comparison.verdict if ok and comparison else None,
                     ratio=estimate.ratio if ok and estimate else None,
                     low=estimate.low if ok and estimate else None,
                     high=estimate.high if ok and estimate else None,
                     pairs=estimate.pairs if ok and estimate else 0,
                     detail=evaluation.detail[:300], timing=timing)

    def _append(self, entry: Entry) -> Entry:
        try:
            self.journal.append(entry)
        except OSError as error:
            raise TuneError(f"cannot write the journal {self.journal.path} "
                            f"({error.strerror or error}); nothing finished is lost: free "
                            "space or fix permissions, then `autopass tune --resume`") from None
        return entry


def _flags_json(flags: UnitFlags) -> dict[str, str]:
    return {s: " ".join(f) for s, f in sorted(flags.items())}
