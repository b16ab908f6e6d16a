"""Knobs for decisions carried in the IR: one unit's hot loops and hot functions, each a
knob of the search like any flag, whose values are decisions (core/decisions.py).

Under LTO and ThinLTO the link re-optimizes every unit with its own pipeline, and a
unit's flags mostly stop reaching its code; loop metadata and function attributes do
not (what `#pragma clang loop` and `__attribute__` write).  So for each tuned unit:

    its innermost loops in the functions the profile finds hot, and in the functions
    inlined into them (by the binary's debug info where it has some, else the ones
    they call that the recorded build keeps nowhere), the hottest and largest first,
    at most MAX_LOOPS, each with three knobs:
        <function>@<loop>/vectorize    width 1 (none), 2, 4, 8, 16
        <function>@<loop>/interleave   1, 2, 4, 8
        <function>@<loop>/unroll       disable, 2, 4, 8
    its hot functions that another function of the unit calls (at most MAX_FUNCTIONS):
        <function>/inline              noinline, alwaysinline

The inventory (evidence/inventory.py) names the loops and gives the hash of the code
each decision is tuned on: a decision is applied only where that code still is.
"""

from __future__ import annotations

from collections.abc import Collection

from autopass_build.core.decisions import Decision
from autopass_build.evidence.inlined import Inlined
from autopass_build.evidence.inventory import Inventory, LoopFacts
from autopass_build.tuning.space import Knob

MAX_LOOPS = 6          # per unit: three knobs each
MAX_FUNCTIONS = 3
INHERITED_DEPTH = 2    # calls down from a hot function to a helper inlined into it
MIN_OWN_SHARE = 0.05   # percent of the run: a function's code that ran less has no knob
# Tuples, not generators: a generator here was used up by the first loop of the process,
# and every later loop (of any unit) had its vectorize and interleave knobs without a
# value to try (bc's multiplication loop, 82 % of the run, had its unroll knob only).
LOOP_KNOBS: tuple[tuple[str, str, tuple[tuple[str, int], ...]], ...] = (
    ("vectorize", "loop vectorizer's width for this loop (1: not vectorized)",
     tuple(("vectorize.width", v) for v in (1, 2, 4, 8, 16))),
    ("interleave", "loop vectorizer's interleave count for this loop",
     tuple(("interleave.count", v) for v in (1, 2, 4, 8))),
    ("unroll", "unrolling of this loop: off, or by a count",
     (("unroll.disable", 1),) + tuple(("unroll.count", v) for v in (2, 4, 8))),
)


def hot_loops(inventory: Inventory, hot: dict[str, float],
              out_of_line: Collection[str] | None = None,
              inlined: Inlined | None = None) -> list[LoopFacts]:
    """The innermost loops of the hot functions (`hot`: mangled name -> share of the
    profile) and of the helpers inlined into them (see hot_shares), hottest function
    first, then the largest loop."""
    return _hottest_loops(inventory, hot_shares(inventory, hot, out_of_line, inlined))


def _hottest_loops(inventory: Inventory, shares: dict[str, float]) -> list[LoopFacts]:
    """hot_loops, from the functions' shares (hot_shares)."""
    loops = [loop for loop in inventory.loops if loop.function in shares and loop.innermost]
    loops.sort(key=lambda loop: (-shares[loop.function], -loop.instructions, loop.path))
    return loops[:MAX_LOOPS]


def hot_shares(inventory: Inventory, hot: dict[str, float],
               out_of_line: Collection[str] | None = None,
               inlined: Inlined | None = None) -> dict[str, float]:
    """Function key -> the share of the run in its code.  Where the binary's debug info
    said which code inlined into the hot functions came from (`inlined`, the profile's
    HotFunction.inlined by symbol, evidence/inlined.py), each function's own: bc's
    `_bc_simp_mul` 82 % inside `_bc_rec_mul`, its four other helpers 1 % or less.
    Otherwise the hot functions', and, at their caller's share, the unit's functions
    they call (to INHERITED_DEPTH calls down) that the recorded build inlined
    everywhere: not among `out_of_line`, the functions its object keeps (None: not
    known, none inherits); a function kept out of line is the profile's to name: under
    its cut (0.5 %), it is not hot.  A helper's loop metadata goes with it where it is
    inlined."""
    if inlined:
        return _measured_shares(inventory, hot, inlined)
    key_of = {facts.name: facts.key for facts in inventory.functions.values()}
    shares = {facts.key: hot[facts.name] for facts in inventory.functions.values()
              if facts.name in hot}
    kept = set(out_of_line) if out_of_line is not None else set(key_of)
    callers = list(shares)
    for _ in range(INHERITED_DEPTH):
        found: dict[str, float] = {}
        for call in inventory.calls:
            callee = key_of.get(call.callee)
            if (call.function in callers and callee and call.callee not in kept
                    and callee not in shares):
                found[callee] = max(found.get(callee, 0.0), shares[call.function])
        shares.update(found)
        callers = list(found)
    return shares


def inherited(inventory: Inventory, hot: dict[str, float],
              out_of_line: Collection[str] | None) -> list[str]:
    """The functions hot_shares gives their caller's share, without the debug info."""
    own = {facts.key for facts in inventory.functions.values() if facts.name in hot}
    return sorted(inventory.functions[key].name for key in hot_shares(inventory, hot, out_of_line)
                  if key not in own)


def _measured_shares(inventory: Inventory, hot: dict[str, float],
                     inlined: Inlined) -> dict[str, float]:
    """hot_shares by the debug info: a hot function's share less the code inlined into
    it, plus its own code wherever it was inlined (into any hot function of the run:
    under a link-time optimized recording, one of another unit's)."""
    own = {name: share - sum(inlined.get(name, {}).values()) for name, share in hot.items()}
    for into in inlined.values():
        for function, share in into.items():
            own[function] = own.get(function, 0.0) + share
    return {facts.key: own[facts.name] for facts in inventory.functions.values()
            if own.get(facts.name, 0.0) >= MIN_OWN_SHARE}


def knobs_for(inventory: Inventory, hot: dict[str, float],
              out_of_line: Collection[str] | None = None,
              inlined: Inlined | None = None) -> tuple[Knob, ...]:
    """The decision knobs of one unit (see the module's docstring; `out_of_line` and
    `inlined`: as hot_shares takes them), each with the share of the run its code
    takes (Knob.heat)."""
    knobs = []
    shares = hot_shares(inventory, hot, out_of_line, inlined)
    for loop in _hottest_loops(inventory, shares):
        where = f"{loop.location} " if loop.location else ""
        for family, doc, settings in LOOP_KNOBS:
            values = ((),) + tuple(
                Decision("loop", loop.function, loop.path, loop.hash, prop, value).flags()
                for prop, value in settings)
            knobs.append(Knob(f"{loop.function}@{loop.path}/{family}", values,
                              f"{where}{doc} ({loop.instructions} instructions, depth "
                              f"{loop.depth}; its function's code "
                              f"{shares[loop.function]:.1f} % of the run)",
                              loop.location, shares[loop.function]))
    called = {call.callee for call in inventory.calls}
    ranked = sorted((f for f in inventory.functions.values() if f.name in hot
                     and f.name in called), key=lambda f: (-hot[f.name], f.key))
    for facts in ranked[:MAX_FUNCTIONS]:
        values = ((),) + tuple(Decision("fn", facts.key, "-", facts.hash, prop, 1).flags()
                               for prop in ("noinline", "alwaysinline"))
        knobs.append(Knob(f"{facts.key}/inline", values,
                          f"inlining of {facts.name} wherever it is called "
                          f"({facts.instructions} instructions)", heat=hot[facts.name]))
    return tuple(knobs)
