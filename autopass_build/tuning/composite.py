"""Composite candidates: per-unit winners found by attribution, put together.

A search candidate usually changes several hot units at once; the whole-program A/B
says how the program moved, attribution (instruments/attribution.py) how each changed
unit's own cost moved.  A unit's flags that made it clearly faster in one candidate are
a per-unit winner even when another unit of that candidate got slower and the program
did not move.  So after the search:

    per unit: the flags of its best attributed FASTER effect in any search entry
    ─▶ composed into one candidate (units without a winner keep the baseline's flags)
    ─▶ measured by the whole-program A/B (phase "composite"), confirmed like any
       would-be incumbent; the whole-program A/B stays the judge of what is written

Cross-unit effects (code layout, shared caches, inlining across units under LTO) are
real, which is why the composite is measured as a whole, never assumed.
"""

from __future__ import annotations

from autopass_build.instruments.stats import FASTER
from autopass_build.tuning.journal import Entry, Journal, Phase
from autopass_build.tuning.measuring import UnitFlags, config_key

RESERVED = 2          # evaluations kept for the composite and its confirmation


def per_unit_winners(journal: Journal) -> dict[str, tuple[tuple[str, ...], Entry]]:
    """source -> (its flags with the lowest attributed FASTER ratio, the entry)."""
    best: dict[str, tuple[float, tuple[str, ...], Entry]] = {}
    for entry in journal.of_phase(Phase.SEARCH):
        for effect in entry.effects:
            if effect.verdict != FASTER or effect.source not in entry.flags:
                continue
            flags = tuple(entry.flags[effect.source].split())
            if effect.source not in best or effect.ratio < best[effect.source][0]:
                best[effect.source] = (effect.ratio, flags, entry)
    return {source: (flags, entry) for source, (_, flags, entry) in best.items()}


def candidate(journal: Journal) -> UnitFlags | None:
    """The composite of the per-unit winners, or None when there is nothing new to
    measure (no winner, or the composite is a configuration measured already)."""
    winners = per_unit_winners(journal)
    if not winners:
        return None
    flags = {source: unit_flags for source, (unit_flags, _) in winners.items()}
    key = config_key(flags)
    if journal.find(Phase.SEARCH, key) or journal.find(Phase.COMPOSITE, key):
        return None
    return flags


def describe(journal: Journal) -> str:
    """'src/a.c from #3 (0.870x), src/b.c from #7 (0.910x)'."""
    parts = []
    for source, (_, entry) in sorted(per_unit_winners(journal).items()):
        ratio = min(e.ratio for e in entry.effects if e.source == source)
        parts.append(f"{source} from #{entry.n} ({ratio:.3f}x of its own cost)")
    return ", ".join(parts)
