"""The steps on top of the chosen composition, each A/B'd against the build without it
and kept only when verified faster:

    native   -march=native on every unit (tune --native), before the per-file search
    ── the per-file search ──
    direct   calls inside the project's shared libraries bound to their own functions
             (no PLT), where the program loads such a library
    cspgo    context-sensitive PGO: the build that ships instrumented after inlining,
             trained, its profile merged with PGO's (candidates/pgo.train_cs)
    layout   machine-function splitting and hot/cold text grouping from the profile
    exttsp, inline, bandwidth
             the link-level knobs: one option each of the link's own optimization and
             code generation, where the composition links across units (LTO, ThinLTO)
    bolt     BOLT from an instrumented run of the binary that ships, the program's and
             each hot project library's (candidates/bolt.py)

The ones after the search describe one exact build (a CS profile is counted after
inlining, a BOLT profile names branches by offset), so they are trained on the build
that ships, with the per-file winners.  A direct A/B, not two measurements against the
recorded build compared: those differ by more than such a step's effect between runs
(the suite's Lua kept a BOLT that an independent A/B found 6 % slower).  Whether layout
can pay at all is judged from the profile first (evidence/layout_reach.py): a step
that cannot is skipped with the line that says why, before it spends its pairs.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable

from autopass_build.candidates import pgo, stages
from autopass_build.candidates.bolt import BoltStage
from autopass_build.candidates.bolt_reach import bolt_reach
from autopass_build.candidates.evaluate import Evaluator
from autopass_build.candidates.exports import ExportsKept
from autopass_build.candidates.stages import AFTER_SEARCH, LINK_KNOBS, ON_TOP, Stage
from autopass_build.core.durations import duration_text
from autopass_build.core.stage_flags import (
    BOLT_LINK_FLAGS,
    DIRECT_LINK_FLAGS,
    DIRECT_UNIT_FLAGS,
    SPLIT,
)
from autopass_build.evidence.hotspots import Profile
from autopass_build.evidence.layout_reach import LayoutReach, layout_reach
from autopass_build.measuring import stats
from autopass_build.measuring.stats import FASTER
from autopass_build.tuning import on_cluster
from autopass_build.tuning.chosen import Chosen
from autopass_build.tuning.clock import Deadline, step_evaluations
from autopass_build.tuning.journal import Entry, Phase
from autopass_build.tuning.stage_choice import Composer, opt_level, say_match
from autopass_build.tuning.stage_journal import (
    Earlier,
    earlier,
    kept_entry,
    stage_evaluation_seconds,
)

# They read the PGO profile (ext-TSP orders blocks by its counts; without them by guesses).
NEEDS_PGO = (Stage.CSPGO, Stage.LAYOUT, Stage.EXTTSP)
# What a step's training adds to its cost, in evaluations.  CS-PGO's is a build of its
# own (instrumented after inlining) and a run: one evaluation.  BOLT trains inside its
# first evaluation, on the binary that evaluation linked: llvm-bolt -instrument, one run,
# llvm-bolt; on cppcheck 20 s against 3.6 min for the relink and its pairs.  Half an
# evaluation leaves room for a program whose run is long against its link.
TRAINING_EVALUATIONS = {Stage.CSPGO: 1.0, Stage.BOLT: 0.5}


class StepsOnTop:
    """The steps the run may take on top of its composition (`composer.usable`, less
    what the profile `hot` says cannot pay: each said once, here)."""

    def __init__(self, composer: Composer, hot: Profile | None, layout_min_kib: int):
        self.composer = composer
        self.evaluator = composer.evaluator
        self.measurements = composer.measurements
        self.show = composer.show
        self.bolt_reach = bolt_reach(self.evaluator, hot.unit_shares() if hot else None)
        target = self.evaluator.target
        self.layout: LayoutReach | None = layout_reach(
            hot, [target.output, *target.loaded_libraries], layout_min_kib * 1024) \
            if hot else None
        self.usable = {s for s in AFTER_SEARCH if s in composer.usable and not self._cannot(s)}

    def _cannot(self, step: Stage) -> str:
        """Why `step` cannot pay here, said once ("" when it may)."""
        why = ""
        if step == Stage.DIRECT and not self.evaluator.target.loaded_libraries:
            why = (f"{self.evaluator.target.output_rel} loads no shared library of the "
                   "project: its calls are direct already")
        if step == Stage.BOLT:
            why = self.bolt_reach.why_not
        if step in (Stage.LAYOUT, Stage.BOLT) and self.layout is not None:
            why = why or self.layout.why_not
        if why:
            self.show(f"stage {step} skipped: {why}")
        elif step == Stage.LAYOUT and self.layout is not None:
            self.show(f"layout: the hot code is {self.layout.text()}")
        return why

    def applicable(self, chosen: Chosen | None) -> list[Stage]:
        """The steps after the search that may go on top of `chosen` (those that read
        the PGO profile only on a composition with PGO, the link-level knobs only on
        one that links across units)."""
        has_pgo = chosen is not None and Stage.PGO in chosen.stages
        has_lto = chosen is not None and chosen.links_across_units
        return [s for s in AFTER_SEARCH if s in self.usable
                and (has_pgo or s not in NEEDS_PGO) and (has_lto or s not in LINK_KNOBS)]

    def pending(self, chosen: Chosen | None) -> list[Stage]:
        """The applicable steps not measured yet in this run (what the budget keeps
        evaluations for)."""
        done = {stage for entry in self.measurements.journal.of_phase(Phase.STAGE)
                for stage in entry.composition}
        return [s for s in self.applicable(chosen) if s not in done]

    def planned(self) -> list[Stage]:
        """The steps after the search the run may take, said before anything is
        measured (those that need PGO, when PGO can be among the stages)."""
        lto = {Stage.LTO, Stage.THINLTO} & self.composer.usable
        return [s for s in AFTER_SEARCH if s in self.usable
                and (s not in NEEDS_PGO or Stage.PGO in self.composer.usable)
                and (s not in LINK_KNOBS or lto)]

    def after_search(self, chosen: Chosen | None, without: Callable[[Chosen | None], Evaluator],
                     deadline: Deadline | None = None) -> Chosen | None:
        """Each applicable step on the build so far (`without(chosen)`: an evaluator
        whose baseline is `chosen` with the per-file winners), kept when verified faster
        (a resumed run takes the ones its journal holds as they were decided); a step
        that would not end before `deadline` (--time) is left out, in one line."""
        steps = self.applicable(chosen)
        if self._knobs_left_out(chosen):
            self.show("the link-level knobs are not measured: the build links no units "
                      "across (no LTO or ThinLTO); the per-file search holds their options")
        if deadline is not None:
            steps = self._bolt_first(steps, deadline, self.pending(chosen))
        bolt_tried = False
        for step in steps:
            held = self._journaled(chosen, step)
            if held == Earlier.NONE and not self._time_for(step, deadline):
                continue
            bolt_tried = bolt_tried or step == Stage.BOLT
            if held == Earlier.NOT_KEPT:
                self.show(f"{ON_TOP[step]}: measured earlier in this run, not kept")
                continue
            taken = self._step(step)(chosen, without(chosen))
            if taken is not None:
                self.show(f"{step} kept: {taken.name}, {taken.entry.interval_text()} over the "
                          "build without it")
                chosen = taken
        if bolt_tried and chosen is not None and Stage.LAYOUT in chosen.stages \
                and Stage.BOLT not in chosen.stages:
            chosen = self._bolt_instead_of_layout(chosen, without, deadline)
        return chosen

    def _time_for(self, step: Stage, deadline: Deadline | None, label: str = "") -> bool:
        """Whether `step` (`label`, its name by default) ends before `deadline`
        (--time); said when it would not."""
        if deadline is None:
            return True
        cost = self._cost(step)
        if deadline.holds(cost):
            return True
        self.show(f"--time: no time left for {label or ON_TOP[step]} (about "
                  f"{duration_text(cost or 0)} with its confirmation; "
                  f"{duration_text(max(0.0, deadline.left() or 0.0))} left)")
        return False

    def _bolt_instead_of_layout(self, chosen: Chosen,
                                without: Callable[[Chosen | None], Evaluator],
                                deadline: Deadline | None) -> Chosen:
        """BOLT, not kept on top of layout, measured in its place: both lay out the hot
        code, and on Lua BOLT on top of layout ran 3 % slower than layout alone (it
        undid what layout did), where on the build without layout the hand recipe's
        BOLT gains.  Taken instead of layout only when its gain over the build without
        layout is clearly larger than layout's (stats.gains_more); else layout stays:
        it needs no training run of its own when the build is applied or retrained."""
        rest = tuple(s for s in chosen.stages if s != Stage.LAYOUT)
        instead_of = dataclasses.replace(chosen, stages=rest,
                                         flags=self._flags(rest, chosen.profile))
        layout = self._kept_by(chosen.stages[:chosen.stages.index(Stage.LAYOUT) + 1])
        if layout is None or self._journaled(instead_of, Stage.BOLT) == Earlier.NONE \
                and not self._time_for(Stage.BOLT, deadline, "BOLT in place of layout"):
            return chosen
        self.show(f"BOLT was not kept on top of layout: measured in its place, on "
                  f"{instead_of.name}")
        taken = self.bolt(instead_of, without(instead_of))
        if taken is None:
            return chosen
        if stats.gains_more(_interval(taken.entry), _interval(layout)):
            self.show(f"bolt kept in place of layout: {taken.name}, "
                      f"{taken.entry.interval_text()} over {instead_of.name}, clearly more than "
                      f"layout's {layout.interval_text()}")
            return taken
        self.show(f"layout stays: BOLT in its place ({taken.entry.interval_text()} over "
                  f"{instead_of.name}) did not gain clearly more than layout "
                  f"({layout.interval_text()})")
        return chosen

    def _bolt_first(self, steps: list[Stage], deadline: Deadline, pending: list[Stage]
                    ) -> list[Stage]:
        """`steps` less the `pending` ones (not measured yet) before BOLT that would
        leave it no time: BOLT runs last
        (it rewrites the final binary), yet it is the step the hand recipe gains by
        (SQLite 2.2 % over PGO + LTO; CS-PGO and layout unclear on zstd and the loop
        kernels), and with --time 10m the two before it took all of it."""
        if Stage.BOLT not in pending:
            return steps
        costs = {step: self._cost(step) for step in pending}
        bolt_cost = costs[Stage.BOLT]
        left = deadline.left()
        if left is None or bolt_cost is None or bolt_cost > left:
            return steps
        kept = list(steps)
        for step in (*reversed(LINK_KNOBS), Stage.LAYOUT, Stage.CSPGO):   # the later first
            if sum(c or 0.0 for s, c in costs.items() if s in kept) <= left:
                break
            if step in kept and step in pending:
                kept.remove(step)
                self.show(f"--time: {ON_TOP[step]} left out so that BOLT has its time (about "
                          f"{duration_text(bolt_cost)}; {duration_text(left)} left)")
        return kept

    def _cost(self, step: Stage) -> float | None:
        """Seconds `step` will take: its evaluations at the pace of the run's stage
        evaluations (which build and link the program as it does), one more for the
        instrumented build and training run CS-PGO and BOLT start with.  BOLT and the
        link's knobs compile nothing (the units come from the cache; the program is
        linked again): their pace is that of the stage evaluations that compiled
        nothing.  At the average of all, on cppcheck (71 large units: a look that
        compiles them 7 min, a confirmation from the cache 2.5) BOLT was put at 14 min
        where 12 were left, and layout, which compiles every unit, took them instead.
        Its training was then still counted as a whole evaluation (a relink of 3.6 min
        on cppcheck, where it takes 20 s): with 10.5 min left BOLT did not fit, and the
        ext-TSP knob took them (TRAINING_EVALUATIONS)."""
        relinks = step == Stage.BOLT or step in LINK_KNOBS
        each = stage_evaluation_seconds(self.measurements.journal, relinked=relinks)
        if each is None:
            return None
        return each * (step_evaluations([step]) + TRAINING_EVALUATIONS.get(step, 0.0))

    def _journaled(self, chosen: Chosen | None, step: Stage) -> Earlier:
        """What the journal holds of `step` on top of `chosen` (a resumed run)."""
        return earlier(self.measurements.journal, self.measurements.deterministic,
                       (chosen.stages if chosen else ()) + (step,))

    def _kept_by(self, composition: tuple[Stage, ...]) -> Entry | None:
        return kept_entry(self.measurements.journal, composition)

    # -- the steps ---------------------------------------------------------------------
    def native(self, chosen: Chosen | None, without: Evaluator) -> Chosen | None:
        """-march=native on every unit of the build the stages settled on (`without`: an
        evaluator whose baseline is `chosen`).  A whole-program choice: the binary runs
        on this CPU family only whether one unit has it or all do."""
        native = stages.flags((Stage.NATIVE,), opt_level(self.evaluator)).unit_flags
        return self._taken(chosen, Stage.NATIVE, ON_TOP[Stage.NATIVE], without,
                           under={u.id: native for u in without.units})

    def direct(self, chosen: Chosen | None, without: Evaluator) -> Chosen | None:
        """No interposition inside the project's libraries (core/stage_flags.py): every
        unit compiled with -fno-semantic-interposition, every link with
        -Bsymbolic-functions.  First after the search: CS-PGO and BOLT count the build
        they ship, whose calls this changes."""
        return self._taken(chosen, Stage.DIRECT, ON_TOP[Stage.DIRECT], without,
                           under={u.id: DIRECT_UNIT_FLAGS for u in without.units},
                           link_flags=DIRECT_LINK_FLAGS,
                           post_link=self._kept(Stage.DIRECT, without))

    def cspgo(self, chosen: Chosen | None, without: Evaluator) -> Chosen | None:
        """Context-sensitive PGO: the build so far instrumented after inlining, trained,
        its profile merged with PGO's, and the build with the merged profile A/B'd
        against it."""
        assert chosen is not None and chosen.profile is not None
        self._said_trained_here("CS-PGO is trained", without)
        try:    # on a node when the step is measured there
            profile = None
            if self.measurements.trains_on_nodes(without):
                profile = on_cluster.train_cs(self.measurements, without, chosen.profile,
                                              self.show)
            profile = profile or pgo.train_cs(without, chosen.profile, self.show)
            if self.measurements.on_nodes(without):   # measured there: each node reads it
                on_cluster.share_profile(self.measurements, profile)
        except pgo.PgoError as error:
            self.show(f"stage cspgo skipped: {error}")
            return None
        composition = chosen.stages + (Stage.CSPGO,)
        lto_use = tuple(f for f in self._flags(composition, profile).link_flags
                        if f == profile.use_flag())
        return self._taken(chosen, Stage.CSPGO, ON_TOP[Stage.CSPGO], without, profile,
                           under={u.id: (profile.use_flag(),) for u in without.units},
                           link_flags=lto_use,
                           built=lambda: say_match(without, profile, composition, self.show))

    def layout_step(self, chosen: Chosen | None, without: Evaluator) -> Chosen | None:
        """Machine-function splitting on every unit (at the link under LTO) and the
        hot/cold text sections kept grouped by the linker."""
        assert chosen is not None
        return self._taken(chosen, Stage.LAYOUT, ON_TOP[Stage.LAYOUT], without,
                           under={u.id: (SPLIT,) for u in without.units},
                           link_flags=self._link_added(chosen, Stage.LAYOUT),
                           post_link=self._kept(Stage.LAYOUT, without))

    def link_knob(self, step: Stage, chosen: Chosen | None, without: Evaluator
                  ) -> Chosen | None:
        """One option of the link's own optimization or code generation (a link-level
        knob, core/stage_flags.LINK_KNOBS) on the build so far: only the links change."""
        assert chosen is not None
        return self._taken(chosen, step, ON_TOP[step], without,
                           link_flags=self._link_added(chosen, step),
                           post_link=self._kept(step, without))

    def bolt(self, chosen: Chosen | None, without: Evaluator) -> Chosen | None:
        """BOLT trained on the build so far, the program and each hot project library."""
        step = BoltStage(self.evaluator.store, self.evaluator.bench, self.show,
                         self.bolt_reach.libraries)
        self._said_trained_here("BOLT is trained and measured", without)
        if self._journaled(chosen, Stage.BOLT) == Earlier.KEPT and not step.found_again(without):
            return None
        taken = self._taken(chosen, Stage.BOLT, ON_TOP[Stage.BOLT], without, link_flags=BOLT_LINK_FLAGS,
                            post_link=step)
        if taken is not None:
            taken.bolt, taken.bolt_libraries = step.trained, tuple(step.rewritten)
        return taken

    # -- shared ------------------------------------------------------------------------
    def _said_trained_here(self, what: str, without: Evaluator) -> None:
        """One line when the cluster measures but a step trains here (`what`: the step
        and what it does here)."""
        if self.measurements.on_nodes(without) and not self.measurements.trains_on_nodes(
                without):
            self.show(f"{what} on this machine, not on a node: the "
                      "nodes build a shipped copy of the project at other paths, and its "
                      "profile names code by this tree's paths")

    def _step(self, step: Stage) -> Callable[[Chosen | None, Evaluator], Chosen | None]:
        """What measures `step` on top of a build."""
        if step in LINK_KNOBS:
            return functools.partial(self.link_knob, step)
        return {Stage.DIRECT: self.direct, Stage.CSPGO: self.cspgo,
                Stage.LAYOUT: self.layout_step, Stage.BOLT: self.bolt}[step]

    def _knobs_left_out(self, chosen: Chosen | None) -> bool:
        """Whether the link-level knobs could run here but the build has no LTO."""
        return bool(set(LINK_KNOBS) & self.usable) and not (
            chosen is not None and chosen.links_across_units)

    @staticmethod
    def _kept(step: Stage, without: Evaluator) -> ExportsKept:
        """The check that `step` leaves every binary's exports as `without` has them."""
        return ExportsKept(without.baseline, f"the {step} step")

    def _link_added(self, chosen: Chosen, step: Stage) -> tuple[str, ...]:
        """The link flags `step` adds to `chosen`'s."""
        after = self._flags(chosen.stages + (step,), chosen.profile)
        return tuple(f for f in after.link_flags if f not in chosen.flags.link_flags)

    def _flags(self, composition: tuple[Stage, ...], profile: pgo.TrainedProfile | None
               ) -> stages.StageFlags:
        return stages.flags(composition, opt_level(self.evaluator),
                            profile.use_flag() if profile else "")

    def _taken(self, chosen: Chosen | None, step: Stage, label: str, without: Evaluator,
               profile: pgo.TrainedProfile | None = None,
               built: Callable[[], None] = lambda: None, **build) -> Chosen | None:
        """`step` (`label`) on top of `chosen`, measured against the build without it:
        the new Chosen when verified faster (with `profile` when the step brings one),
        else None."""
        composition = (chosen.stages if chosen else ()) + (step,)
        entry = self._on_top(composition, label, without, built, **build)
        if entry is None:
            return None
        profile = profile or (chosen.profile if chosen else None)
        return Chosen(composition, self._flags(composition, profile), entry, profile,
                      chosen.bolt if chosen else None,
                      chosen.bolt_libraries if chosen else (),
                      against=chosen.name if chosen else "the recorded build")

    def _on_top(self, composition: tuple[Stage, ...], label: str, without: Evaluator,
                built: Callable[[], None], **build) -> Entry | None:
        """The last stage of `composition` (`label`) measured against the build without
        it, confirmed with fresh pairs when it looks faster: the entry when verified
        faster, else None (said, with the build it was not faster than).  Tight, as the
        final re-measurement is (twice the pairs): one decision for the whole program,
        whose effect on top of the stages is a few percent (LAME's native: 0.920x
        confirmed in one run, 0.982x unclear after 20 pairs in the next)."""
        name = stages.name(composition)

        def once(phase: Phase, what: str) -> Entry:
            return self.measurements.once(phase, {}, what, tight=True, evaluator=without,
                                          stages=name, **build)

        entry = once(Phase.STAGE, f"stage {name}: {label} against the build without it")
        built()
        if entry.verdict == FASTER and entry.measured and not self.measurements.deterministic:
            entry = once(Phase.STAGE_CONFIRM, f"  confirming {label} with fresh pairs")
        self.show(f"stage {name}: {entry.interval_text()} over the build without {label}"
                  + (f" -> {entry.verdict}" if entry.measured else ""))
        if entry.verdict != FASTER or not entry.measured:
            before = stages.name(composition[:-1]) if len(composition) > 1 else ""
            self.show(f"{label} not kept: it was not verified faster than "
                      f"{before or 'the recorded build'}")
            return None
        return entry


def _interval(entry: Entry) -> tuple[float, float, float]:
    """(ratio, low, high) of a measured entry."""
    assert entry.ratio is not None and entry.low is not None and entry.high is not None
    return entry.ratio, entry.low, entry.high
