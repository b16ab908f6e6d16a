"""The knob space of a run: the compiler's flags as probed here (one Space for every
unit), then one block per tuned source with the decisions on its own hot loops and
functions (decision_knobs.py) and only the values a precompiled header allows."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import replace

from elftools.common.exceptions import ELFError

from autopass_build.candidates.evaluate import Evaluator
from autopass_build.core import flags as flagset
from autopass_build.core import toolchain
from autopass_build.core.outcome import EvaluationError
from autopass_build.core.plural import listed
from autopass_build.evidence import inventory
from autopass_build.evidence.hotspots import Profile
from autopass_build.store.build_records import UnitRecord
from autopass_build.tuning.decision_knobs import inherited, knobs_for
from autopass_build.tuning.measuring import TuneError
from autopass_build.tuning.space import JointSpace, Space, default_space, probe


class KnobSpaces:
    """The spaces of one run.  `decisions`: [tune].decisions; `show`: progress lines."""

    def __init__(self, store_dir: str, decisions: bool, show: Callable[[str], None]) -> None:
        self.store_dir, self.decisions, self.show = store_dir, decisions, show
        self._decisions_left_out = False      # said once: the plugin cannot run here
        self._inheritance_said = False        # said once: no line tables to rank helpers

    def base(self, evaluator: Evaluator, native: bool, lto: bool) -> Space:
        """The flags every unit may take, as the compiler in use accepts them."""
        compiler = evaluator.replayer.compiler_override or evaluator.units[0].compiler
        space = default_space(native=native, lto=lto)
        try:
            return probe(space, compiler, os.path.join(self.store_dir, "probe"),
                         toolchain.stamp_of(compiler))
        except OSError as error:
            raise TuneError(f"cannot probe {compiler}: {error}") from None

    def joint(self, evaluator: Evaluator, sources: list[str], space: Space,
              hot: Profile | None) -> JointSpace:
        """One block per tuned source, with the decisions on its hot loops and functions
        (tuning/decision_knobs.py); a source compiled against a precompiled header does
        not get the values the header fixes (they would not compile)."""
        blocks = []
        held: dict[tuple[str, ...], list[str]] = {}    # knobs kept to the header's: sources
        for source in sources:
            block = self._with_decisions(evaluator, source, space, hot)
            with_pch = [u for u in evaluator.units
                        if u.source_rel == source and flagset.uses_precompiled_header(u.argv)]
            if with_pch:
                block = space.with_precompiled_header(with_pch[0].opt_level)
            if block.forbidden:
                held.setdefault(tuple(sorted({f.knob for f in block.forbidden})),
                                []).append(source)
            blocks.append((source, block))
        for knobs, held_sources in held.items():     # one line for the lot (glslang: 4)
            self.show(f"{listed(held_sources)} "
                      + ("is" if len(held_sources) == 1 else "are")
                      + " compiled with a precompiled header: "
                      + (f"the knob {knobs[0]} keeps" if len(knobs) == 1 else
                         f"the knobs {', '.join(knobs)} keep")
                      + " only the values the header was built with")
        return JointSpace(blocks)

    def _with_decisions(self, evaluator: Evaluator, source: str, space: Space,
                        hot: Profile | None) -> Space:
        """`space` with the decision knobs of `source`'s hot loops and functions
        ([tune].decisions); as it is when the profile names none, or the pass plugin
        that applies them cannot run here (said once)."""
        if not self.decisions or hot is None:
            return space
        functions = {f.symbol: f.share for f in hot.functions if source in f.units}
        unit = next(u for u in evaluator.units if u.source_rel == source)
        try:
            found = inventory.of_unit(evaluator.replayer, unit)
        except EvaluationError as error:
            if not self._decisions_left_out:
                self.show(f"decisions carried in the IR left out: {error}")
            self._decisions_left_out = True
            return space
        out_of_line, inlined = _out_of_line(evaluator, unit), hot.inlined()
        if not inlined and not self._inheritance_said:
            helpers = inherited(found, functions, out_of_line)
            if helpers:
                self._inheritance_said = True
                self.show(f"decisions: {listed(helpers)} inlined into hot code "
                          + ("takes" if len(helpers) == 1 else "take")
                          + " its caller's share of the run: the program has no line "
                          "tables to tell where in it the time goes (built with -g, "
                          "`autopass profile` tells them apart)")
        knobs = knobs_for(found, functions, out_of_line, inlined)
        return replace(space, knobs=space.knobs + knobs) if knobs else space


def _out_of_line(evaluator: Evaluator, unit: UnitRecord) -> set[str] | None:
    """The functions the unit's recorded object keeps; None when its object cannot be
    read (then no helper counts as inlined: the knobs are the profile's functions')."""
    try:
        return evaluator.out_of_line(unit)
    except (EvaluationError, OSError, ValueError, ELFError):
        return None
