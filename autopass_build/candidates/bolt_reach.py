"""Which binaries BOLT rewrites: the program, and each project shared library it loads
whose units hold enough of the run, read from the cpu-clock profile before BOLT spends an
instrumented run, a rewrite and its pairs (tuning/steps_on_top.py asks)."""

from __future__ import annotations

from dataclasses import dataclass

from autopass_build.candidates.evaluate import Evaluator

# BOLT rewrites the program and the project's shared libraries it loads: a binary below
# this share of the profile in its own units (glpsol's, twolame's stwolame's, whose time
# is in their libraries) has little for it to lay out, and where none reaches it the
# stage's evaluation (an instrumented run, a rewrite, 10-30 pairs) is spent for nothing.
BOLT_MIN_OWN_SHARE = 5.0     # percent


@dataclass
class BoltReach:
    libraries: tuple[str, ...]     # the loaded project libraries to rewrite (as built)
    why_not: str = ""              # why BOLT cannot reach the hot code ("": it can)


def bolt_reach(evaluator: Evaluator, unit_shares: dict[str, float] | None) -> BoltReach:
    """Which binaries hold the hot code: the program is always rewritten, each project
    library it loads when its units hold BOLT_MIN_OWN_SHARE of the run (every one when
    no profile says)."""
    target = evaluator.target
    if unit_shares is None:
        return BoltReach(tuple(target.loaded_libraries))
    source = {u.id: u.source_rel for u in evaluator.units}
    shares = {binary: sum(unit_shares.get(source.get(u, ""), 0.0) for u in units)
              for binary, units in target.unit_groups()}
    libraries = tuple(b for b in target.loaded_libraries
                      if shares.get(b, 0.0) >= BOLT_MIN_OWN_SHARE)
    if libraries or shares.get(target.output, 0.0) >= BOLT_MIN_OWN_SHARE \
            or not target.loaded_libraries:
        return BoltReach(libraries)
    return BoltReach((), f"the profile puts {sum(shares.values()):.1f} % of the run in the "
                         f"code of {target.output_rel} and the project libraries it loads, "
                         "the rest in system libraries or the kernel, which BOLT does not "
                         "rewrite")
