"""Composite candidates: per-unit winners found by attribution, put together.

A search candidate usually changes several hot units at once; the whole-program A/B
says how the program moved, attribution (measuring/attribution.py) how each changed
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

from dataclasses import dataclass

from autopass_build.core.flags import UnitFlags
from autopass_build.measuring.stats import FASTER
from autopass_build.tuning.journal import Entry, Journal, Phase
from autopass_build.tuning.measuring import config_key

RESERVED = 2          # evaluations kept for the composite and its confirmation


@dataclass(frozen=True)
class UnitWinner:
    """A unit's best attributed FASTER flags, and the search entry that measured them."""
    flags: tuple[str, ...]
    ratio: float          # the unit's own cost, candidate / baseline
    entry: Entry


def per_unit_winners(journal: Journal) -> dict[str, UnitWinner]:
    """source -> its flags with the lowest attributed FASTER ratio in any search entry."""
    best: dict[str, UnitWinner] = {}
    for entry in journal.of_phase(Phase.SEARCH):
        for effect in entry.effects:
            if effect.verdict != FASTER or effect.source not in entry.flags:
                continue
            if effect.source not in best or effect.ratio < best[effect.source].ratio:
                best[effect.source] = UnitWinner(tuple(entry.flags[effect.source].split()),
                                                 effect.ratio, entry)
    return best


def candidate(journal: Journal, winners: dict[str, UnitWinner]) -> UnitFlags | None:
    """The composite of `winners`, or None when there is nothing new to measure (no
    winner, or the composite is a configuration measured already)."""
    if not winners:
        return None
    flags = {source: winner.flags for source, winner in winners.items()}
    key = config_key(flags)
    if journal.find(Phase.SEARCH, key) or journal.find(Phase.COMPOSITE, key):
        return None
    return flags


def describe(winners: dict[str, UnitWinner]) -> str:
    """'src/a.c from #3 (0.870x of its own cost), src/b.c from #7 (...)'."""
    return ", ".join(f"{source} from #{w.entry.n} ({w.ratio:.3f}x of its own cost)"
                     for source, w in sorted(winners.items()))
