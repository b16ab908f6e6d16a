"""After the search: which units of the best candidate help, and does it hold up.

When the best candidate changes several units, each unit's flags are measured alone
(those that do not help on their own are dropped; if none helps alone, all are kept),
then the combination is re-measured with twice the pairs and half the precision.  Only
a FASTER verdict there yields winners.  On PGO runs, PGO alone and the result are also
measured against the recorded build, so the user sees both comparisons.
"""

from __future__ import annotations

from dataclasses import dataclass

from autopass_build.candidates import pgo
from autopass_build.candidates.evaluate import Evaluator
from autopass_build.measuring.stats import FASTER
from autopass_build.tuning.journal import Entry, Phase
from autopass_build.tuning.measuring import (
    Measurements,
    config_key,
    flags_of,
)


@dataclass
class Winner:
    source: str
    flags: tuple[str, ...]
    entry: Entry           # the journal entry that measured this unit's gain


def conclude(best: Entry, measurements: Measurements) -> tuple[Entry, list[Winner]]:
    """(the final re-measurement, the winners: empty unless it was FASTER)."""
    flags = flags_of(best)
    gains: dict[str, Entry] = {}
    if len(flags) > 1:
        for source, unit_flags in flags.items():
            alone = {source: unit_flags}
            entry = (measurements.journal.find(Phase.SEARCH, config_key(alone))
                     or measurements.once(Phase.ALONE, alone,
                                          f"{source} alone (attribution)"))
            if entry.verdict == FASTER:
                gains[source] = entry
        kept = {s: flags[s] for s in gains} or flags   # no single unit helps: keep all
    else:
        kept = flags
    final = measurements.once(Phase.FINAL, kept, "final re-measurement, tight interval",
                              tight=True)
    if final.verdict != FASTER or not final.measured:
        return final, []
    return final, [Winner(s, f, gains.get(s, final)) for s, f in sorted(kept.items())]


def versus_recorded(measurements: Measurements, plain: Evaluator,
                    profile: pgo.TrainedProfile, winners: list[Winner]) -> Entry:
    """On PGO, gains are against PGO alone; users compare with their plain build too.
    So PGO alone, and PGO with the winners, are each measured against the recorded
    build `plain` (journal phases PGO_ALONE and TUNED_ON_PGO).  Returns PGO alone's."""
    with_profile = pgo.flags_for(plain, profile)
    alone = measurements.once(Phase.PGO_ALONE, {}, "PGO alone against the recorded build",
                              evaluator=plain, under=with_profile)
    if winners:
        measurements.once(Phase.TUNED_ON_PGO, {w.source: w.flags for w in winners},
                          "tuned on PGO against the recorded build",
                          evaluator=plain, under=with_profile)
    return alone
