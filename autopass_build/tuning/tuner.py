"""The tuning run, start to end.

    whole-program stages (compose) ─▶ the chosen composition becomes the baseline
    hot units (profile) ─▶ knob space per unit ─▶ the search (searching.py: strategy,
        screening, A/B, confirmation, the composite of attributed per-unit winners)
    best confirmed candidate ─▶ conclude: per-unit attribution, final tight A/B
    ─▶ BOLT on top, A/B'd against the build without it ─▶ publish: autopass.flags.json

Every candidate is measured against the baseline (the recorded build replayed, with its
PGO profile on PGO runs, or the chosen stages), so all ratios in a run are comparable.
The incumbent is the best candidate whose interval lies clearly below 1, confirmed by a
second look on a timing metric.  `conclude` and `publish` say what happens after the
search.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import replace

from autopass_build.candidates import pgo, stages
from autopass_build.candidates.evaluate import EvaluateError, Evaluator
from autopass_build.candidates.stages import Stage
from autopass_build.config import Config
from autopass_build.core import flags_db
from autopass_build.core.files import relative_to, write_atomic
from autopass_build.core.stage_flags import lto_mode
from autopass_build.evidence.hotspots import Profile, ProfileError, failing_note, reach_of
from autopass_build.evidence.hotspots import load as load_profile
from autopass_build.evidence.hotspots import profile as run_profile
from autopass_build.measuring.attribution import Attributor
from autopass_build.measuring.benchmark import MeasureError, native_unmeasurable
from autopass_build.measuring.stats import FASTER
from autopass_build.store.build_records import CommandMates, command_mates
from autopass_build.store.index import Store
from autopass_build.tuning import composite, hot_sources, on_cluster, publish
from autopass_build.tuning import strategies as search
from autopass_build.tuning.chosen import Chosen
from autopass_build.tuning.clock import (
    UNCOUNTED,
    Deadline,
    search_budget,
    split_text,
    step_evaluations,
)
from autopass_build.tuning.clock import stage_budget as stage_budget_of
from autopass_build.tuning.conclude import Winner, conclude, versus_recorded
from autopass_build.tuning.explain import wrong_output_notes
from autopass_build.tuning.journal import Entry, Journal, Phase
from autopass_build.tuning.knob_spaces import KnobSpaces
from autopass_build.tuning.measuring import (
    Measurements,
    TuneError,
)
from autopass_build.tuning.run import RunContext, TuneResult
from autopass_build.tuning.searching import Search, measured_in_search
from autopass_build.tuning.settings import RunSettings, TuneRequest, adopted, settings_for
from autopass_build.tuning.space import (
    LEAVE_LTO_KNOB,
    Space,
    fingerprint,
)
from autopass_build.tuning.stage_choice import Composer, opt_level
from autopass_build.tuning.stage_journal import stage_evaluation_seconds, stage_phase_entries
from autopass_build.tuning.steps_on_top import StepsOnTop

NATIVE_EVALUATIONS = 2    # the native step (--native), out of the stages' half
STAGE_SHARE = 0.5         # of --time: what the stages may take at most
FINISHED = "finished"     # in a run's folder: it ended (with this budget)

__all__ = ["TuneError", "TuneRequest", "TuneResult", "Tuner", "Winner", "UNCOUNTED"]


class Tuner:
    def __init__(self, store: Store, config: Config, request: TuneRequest,
                 progress=None):
        self.store = store
        self.config = config
        self.request = request
        self.show = progress or (lambda message: None)
        self.journal: Journal | None = None
        self.profile: pgo.TrainedProfile | None = None
        self.composer: Composer | None = None
        self.on_top: StepsOnTop | None = None
        self._native_left_out: str | None = None     # why --native cannot be measured
        self.ship = False          # the project is shipped to the cluster's nodes
        self.earlier: flags_db.TargetStages | None = None   # the database's stages, if any
        self.spaces = KnobSpaces(self.store.dir, config.tune.decisions, self.show)

    # -- the run -------------------------------------------------------------------------
    def run(self) -> TuneResult:
        self.deadline = Deadline(self.request.time_limit)
        self.ship = on_cluster.check(self.config, self.store, self.show)
        if self.request.screen:
            from autopass_build.tuning import screen
            try:
                screen.require()
            except screen.ScreenUnavailable as error:
                raise TuneError(str(error)) from None
        self.earlier = publish.writable_database(self.request.flags_db).target
        journal = Journal.latest(self.store.dir, repair=False) if self.request.resume else None
        if journal:
            missing = journal.settings.lacking
            if missing:
                raise TuneError(f"run {journal.run_id} cannot be resumed: its settings lack "
                                f"{', '.join(missing)}; start a new run without --resume")
            self._not_finished(journal)
            journal.take_over()
            self._adopt(journal.settings)
        evaluator = self._evaluator()
        if journal and journal.settings.pgo and self.profile \
                and journal.settings.pgo != self.profile.hash:
            raise TuneError(f"run {journal.run_id} was tuned on another PGO profile; start a "
                            "new run without --resume")
        outsiders = hot_sources.compiled_with_outsiders(evaluator.units, self.store.units())
        sources = (list(journal.settings.sources) if journal
                   else self._hot_sources(evaluator, outsiders))
        space = self._space(evaluator)
        for note in space.notes:
            self.show(note)
        if journal is None:
            journal = Journal.create(self.store.dir, self._settings(evaluator, sources, space))
            journal.lock()
        elif journal.settings.space != fingerprint(space):
            raise TuneError(f"run {journal.run_id}: the knob space changed since it started "
                            "(another compiler?); start a new run without --resume")
        self.journal = journal
        self.evaluator = evaluator
        mates = command_mates(sources, evaluator.units)   # they take its flags
        units_of = {s: [u.id for u in evaluator.units if u.source_rel in (s, *mates.get(s, ()))]
                    for s in sources}
        self.measurements = Measurements(journal, evaluator, self.config, units_of, self.show)
        self.measurements.until = self.deadline.end   # an A/B started late stops at --time
        hot = load_profile(self.store.dir)   # the one _hot_sources made or found
        recorded = stages.recorded_lto([u.argv for u in evaluator.units])
        self.chosen = self._compose(evaluator, hot)
        links_across = self.chosen.links_across_units if self.chosen else bool(recorded)
        if LEAVE_LTO_KNOB in space.knobs and not links_across:
            space = space.without({LEAVE_LTO_KNOB.name}, "no LTO stage was chosen")
        if self.request.attribute and links_across:
            self.show(f"attribution off on {self.chosen.name if self.chosen else recorded}: "
                      "link-time optimization inlines and moves functions across units, so "
                      "a unit's own cost is not defined there; the whole-program A/B judges "
                      "alone")
        elif self.request.attribute:
            self.measurements.attributor = Attributor(evaluator.bench)
        run = RunContext(self.store, self.config, evaluator, journal,
                         self.spaces.joint(evaluator, sources, space, hot), hot,
                         self.show, self.request.seed, self.request.resume)
        best = self._search(run, outsiders)
        final, winners = conclude(best, self.measurements) if best else (None, [])
        searched_on = self.chosen.name if self.chosen else ""
        self._settle(final, winners)
        on_cluster.leave(self.measurements, self.show)
        written = self._ship(final, winners, "PGO" if self.request.pgo else searched_on,
                             mates)
        measured = measured_in_search(journal)
        try:       # a resumed run that finished has nothing left to do (_not_finished)
            write_atomic(os.path.join(journal.folder, FINISHED), b"%d\n" % self.request.budget)
        except OSError:
            pass
        return TuneResult(journal, sources, measured, best, final, winners, written,
                          self.chosen.name if self.chosen else "", searched_on,
                          wrong_output_notes(evaluator.units, sources, journal)
                          + (self.composer.unmeasured_note() if self.composer else ()), mates)

    def _not_finished(self, journal: Journal) -> None:
        """A run that ended is not resumed (its strategy, asked again, could propose one
        more candidate), unless --budget raises its budget."""
        try:
            with open(os.path.join(journal.folder, FINISHED)) as handle:
                ended_at = int(handle.read().strip() or 0)
        except (OSError, ValueError):
            return
        if self.request.budget_given and self.request.budget > ended_at:
            return
        raise TuneError(f"run {journal.run_id} finished (budget {ended_at}): nothing "
                        "to resume; `autopass report` shows it, `--resume --budget N` "
                        "(N above it) goes on, `autopass tune` starts a new run")

    def _settle(self, final: Entry | None, winners: list[Winner]) -> None:
        """The result against the recorded build (stages with the winners), then BOLT on
        top of it: it becomes part of the chosen stages when verified faster."""
        if self.chosen and winners:
            self._tuned_versus_recorded(self.chosen, winners)
        if self.on_top is not None:
            self.chosen = self.on_top.after_search(
                self.chosen, lambda chosen: self._build_of(chosen, winners, on_nodes=True),
                self.deadline)

    def _ship(self, final: Entry | None, winners: list[Winner], searched_on: str,
              mates: CommandMates) -> str | None:
        """Write what was verified: the winners, and a chosen stage whether or not a
        per-file flag won on top of it.  Returns the database written, if any."""
        profile = self.profile if self.request.pgo else (self.chosen.profile if self.chosen
                                                         else None)
        if self.request.pgo and profile:
            pgo_alone = versus_recorded(self.measurements, self._plain_evaluator(), profile,
                                        winners)
            if not winners and pgo_alone.verdict != FASTER:
                profile = None   # alone, and not verified faster than the plain build
        if not ((winners and final) or profile or self.chosen):
            return None
        assert self.journal is not None
        return publish.write(self.request.flags_db, self.journal, publish.Shipment(
            winners, self.evaluator.units, self._native(), profile, self._target_stages(),
            self.chosen.bolt if self.chosen else None,
            self.chosen.bolt_libraries if self.chosen else (), searched_on, mates))

    def _search(self, run: RunContext, outsiders: set[str]) -> Entry | None:
        request, journal = self.request, run.journal
        strategy = search.make(request.strategy, run.space, request.seed, request.options)
        try:
            strategy.start(run)
        except search.StartError as error:
            raise TuneError(str(error)) from None
        on_top = self._steps_on_top()
        budget = search_budget(
            request.budget, len(stage_phase_entries(journal)),
            on_top                                         # CS-PGO, BOLT after the search
            + (composite.RESERVED if self.measurements.attributor is not None else 0))
        sources = [source for source, _ in run.space.blocks]
        if set(sources) <= outsiders:
            target = run.evaluator.target.output_rel
            self.show(f"no per-file search: {', '.join(sources)[:300]} "
                      f"({hot_sources.WITH_OUTSIDERS.format(target=target)})"
                      + ("; the stages alone are tuned" if request.stages else ""))
            budget = 0
        screener = self._screener(run) if request.screen else None
        kept_after = 1 + on_top
        if budget > 0:
            on_cluster.join(self.measurements, self.config, self.store.dir, run.evaluator,
                            self.show, self.ship)
        return Search(self.measurements, strategy, budget, self.show, screener,
                      self.deadline, kept_after, stage_evaluation_seconds(journal)).run(run)

    def _steps_on_top(self) -> int:
        """The evaluations the steps after the search take (CS-PGO, layout, BOLT), the
        ones a resumed run measured before its stop included: the search's share is
        what it was before the stop."""
        if self.on_top is None:
            return 0
        return step_evaluations(self.on_top.applicable(self.chosen))

    # -- whole-program stages -------------------------------------------------------------
    def _compose(self, evaluator: Evaluator, hot: Profile | None) -> Chosen | None:
        """The best verified stage composition, made the baseline of the search (None:
        no stages asked for, none verified faster, or --pgo chose the baseline)."""
        allowed = self._allowed_stages()
        if not allowed:
            self.show(split_text(self.request, 0, 0, []))
            return None
        composer = Composer(evaluator, self.measurements, allowed,
                            lambda: self._profile(evaluator, self.measurements), self.show,
                            self.earlier)
        self.composer = composer
        self.on_top = StepsOnTop(composer, hot if hot and _made_for(hot, evaluator) else None,
                                 self.config.tune.layout_min_kib)
        stage_budget = stage_budget_of(self.request)
        self.show(split_text(self.request, stage_budget, len(composer.candidates()),
                             [str(s) for s in self.on_top.planned()]))
        if self._native():
            stage_budget = max(1, stage_budget - NATIVE_EVALUATIONS)
        on_cluster.join_for_stages(self.measurements, self.config, self.store.dir, evaluator,
                                   self.show, self.ship)
        chosen, _ = composer.choose(stage_budget, self.deadline.share(STAGE_SHARE))
        if self._native():
            chosen = self.on_top.native(chosen, self._build_of(chosen)) or chosen
        if chosen is None:
            self.show(("no stage composition was verified faster than the recorded build"
                       if composer.candidates() else "no link-time composition to measure")
                      + "; tuning per-file flags on the recorded build")
            return None
        evaluator.rebase({u.id: chosen.flags.unit_flags for u in evaluator.units},
                         chosen.flags.link_flags)
        self.measurements.rebase_nodes(evaluator)
        self.measurements.journal.mark_baseline(chosen.name)
        self.show(f"baseline: {chosen.name}, {chosen.entry.interval_text()} over "
                  f"{chosen.against}; per-file flags are tuned on top of it")
        return chosen

    def _native(self) -> bool:
        """Whether -march=native is tried (asked for, and measurable here; said once
        when it is not)."""
        if self.request.native and self._native_left_out is None:
            self._native_left_out = native_unmeasurable(self.config.measure.metric)
            if self._native_left_out:
                self.show(f"-march=native left out: {self._native_left_out}")
        return self.request.native and not self._native_left_out

    def _build_of(self, chosen: Chosen | None, winners: Iterable[Winner] = (),
                  on_nodes: bool = False) -> Evaluator:
        """An evaluator whose baseline is `chosen`'s stages with the per-file `winners`:
        what a step on top (native, CS-PGO, BOLT) is measured against.  `on_nodes`: a
        twin of the run's evaluator, which the cluster's nodes measure when the run has
        them; not native's: a node's compile is native to its own CPU, and what ships is
        compiled on the build machine."""
        unit_flags = chosen.flags.unit_flags if chosen else ()
        per_unit = {uid: w.flags for w in winners for uid in self.measurements.units_of[w.source]}
        flags = {u.id: unit_flags + per_unit.get(u.id, ()) for u in self.evaluator.units}
        link_flags = chosen.flags.link_flags if chosen else ()
        if on_nodes:
            return self.evaluator.on(flags, link_flags)
        build = self._plain_evaluator()
        build.rebase(flags, link_flags)
        return build

    def _tuned_versus_recorded(self, chosen: Chosen, winners: list[Winner]) -> None:
        """The stages with the winners, against the recorded build (phase TUNED)."""
        plain = self._plain_evaluator()
        self.measurements.once(Phase.TUNED, {w.source: w.flags for w in winners},
                               f"{chosen.name} with the per-file flags against the recorded "
                               "build", evaluator=plain,
                               under={u.id: chosen.flags.unit_flags for u in plain.units},
                               stages=chosen.name, link_flags=chosen.flags.link_flags)

    def _target_stages(self) -> flags_db.TargetStages | None:
        chosen = self.chosen
        if chosen is None:
            return None
        target = self.evaluator.target
        root = os.path.dirname(self.store.dir)
        libraries = tuple(relative_to(p, root) for p in target.loaded_libraries) \
            if Stage.DIRECT in chosen.stages else ()
        return flags_db.TargetStages(target.output_rel, tuple(s.value for s in chosen.stages),
                                     opt_level(self.evaluator),
                                     tuple(sorted({u.source_rel for u in self.evaluator.units})),
                                     libraries=libraries,
                                     rival=self.composer.close_rival if self.composer else None)

    def _screener(self, run: RunContext):
        from autopass_build.tuning import screen

        return screen.Screener.for_run(run, screen.Options(**self.request.screen_options),
                                       self.request.knowledge)

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

    def _plain_evaluator(self) -> Evaluator:
        """The recorded build as the baseline (the run's own has the PGO profile)."""
        try:
            return Evaluator(self.store, self.config, self.evaluator.target.output_rel)
        except EvaluateError as error:
            raise TuneError(str(error)) from None

    def _profile(self, evaluator: Evaluator,
                 measurements: Measurements | None = None) -> "pgo.TrainedProfile":
        """The last profile trained, if made for this build; else one trained now: on a
        node when `measurements` measure on the cluster, else here.  Given
        `measurements`, every measuring node gets it (a shipped copy lacks it)."""
        profile = pgo.load(self.store.dir)
        if profile is None or not _made_for(profile, evaluator):
            self.show("training a PGO profile (autopass pgo)")
            on_node = on_cluster.train_pgo(measurements, self.store,
                                           evaluator.bench.workload(), self.show) \
                if measurements is not None else None
            profile = on_node or pgo.train(evaluator, self.show)
        if measurements is not None:
            on_cluster.share_profile(measurements, profile)
        return profile

    def _hot_sources(self, evaluator: Evaluator, outsiders: set[str]) -> list[str]:
        found = load_profile(self.store.dir)
        if found is None or not _made_for(found, evaluator):
            self.show("profiling the baseline to find the hot units")
            try:
                found = run_profile(evaluator)
            except ProfileError as error:
                raise TuneError(f"cannot profile the benchmark: {error}") from None
        chosen = hot_sources.choose(found.unit_shares(), evaluator.units, outsiders,
                                    evaluator.target.output_rel, self.request.max_units,
                                    self.request.coverage, self.show)
        where, failing = reach_of(found, evaluator).note(), failing_note(found)
        if not chosen:   # a benchmark that fails at once is the likelier cause: said first
            raise TuneError("nothing to tune: " + (failing or where or "the profile puts no "
                                                   "time in a recorded unit")
                            + "; see `autopass profile`")
        for note in (where, failing):   # before the search, which they shape
            if note:
                self.show(f"note: {note}")
        return chosen

    def _space(self, evaluator: Evaluator) -> Space:
        lto = bool(lto_mode(self._allowed_stages())) or \
            stages.recorded_lto([u.argv for u in evaluator.units]) is not None
        return self.spaces.base(evaluator, native=self._native(), lto=lto)

    def _allowed_stages(self) -> tuple[stages.Stage, ...]:
        """The stages the run may compose (none with --pgo or no stages asked for)."""
        if self.request.pgo or not self.request.stages:
            return ()
        return stages.parse(self.request.stages)

    def _settings(self, evaluator: Evaluator, sources: list[str], space: Space
                  ) -> RunSettings:
        return settings_for(self.request, sources, evaluator.target.output_rel,
                            self.config.measure.metric, fingerprint(space), space.notes,
                            self.profile.hash if self.request.pgo and self.profile else None)

    def _adopt(self, settings: RunSettings) -> None:
        """--resume: the run's own settings win (settings.adopted)."""
        self.request = adopted(self.request, settings)
        self.deadline = Deadline(self.request.time_limit)
        self.config = replace(self.config, measure=replace(self.config.measure,
                                                           metric=settings.metric))


def _made_for(stored: Profile | pgo.TrainedProfile, evaluator: Evaluator) -> bool:
    """Whether a profile kept in the store (hot spots, PGO) was made for this target
    under this [run]: one made for another target or workload is made again."""
    return stored.target == evaluator.target.output_rel \
        and stored.workload == evaluator.bench.workload()
