"""Which sources the per-file search tunes.

The hottest units of the profile, until `max_units` of them or `coverage` % of it.  A
build may compile several sources in one command (`cc -o duk duktape.c duk_cmdline.c
...`), which apply mode gives one set of flags (F23): the hottest of them stands for the
command, and every candidate's flags go to all of its sources (`command_mates`).  A
command that also compiles sources the target is not made of (another program's) is left
out: its flags would reach them unmeasured.
"""

from __future__ import annotations

from collections.abc import Callable

from autopass_build.store.build_records import (
    CommandMates,
    UnitRecord,
    command_groups,
    command_mates,
)

WITH_OUTSIDERS = ("compiled in one command with sources {target} is not made of, which "
                  "apply mode would give the same flags, unmeasured")


def choose(shares: dict[str, float], units: list[UnitRecord], outsiders: set[str],
           target: str, max_units: int, coverage: float,
           show: Callable[[str], None]) -> list[str]:
    """The sources to tune, hottest first (`shares`: the profile's, hottest first; `units`
    the target's; `outsiders`: compiled_with_outsiders), saying which commands are tuned
    as one and which sources are left out."""
    mine = {u.source_rel for u in units}
    mine -= _riding_along(shares, command_groups(units))
    if any(s in mine and s not in outsiders for s in shares):   # else the search says so
        left_out = [s for s in list(shares)[:max_units] if s in outsiders]
        if left_out:
            show(f"not tuned per file: {', '.join(left_out)[:300]} "
                 f"({WITH_OUTSIDERS.format(target=target)})")
        mine -= outsiders
    chosen: list[str] = []
    covered = 0.0
    for source, share in shares.items():
        if source not in mine:
            continue
        if len(chosen) >= max_units or covered >= coverage:
            break
        chosen.append(source)
        covered += share
    for source, others in command_mates(chosen, units).items():
        show(f"{source} is compiled in one command with {', '.join(others)[:200]}: they "
             "take its flags (apply mode gives a command one set)")
    return chosen


def compiled_with_outsiders(units: list[UnitRecord], all_units: list[UnitRecord]) -> set[str]:
    """The sources of `units` (a target's) compiled in one command with a source of
    `all_units` that the target is not made of."""
    mine = {u.source_rel for u in units}
    groups = command_groups(all_units)
    return {source for source in mine if not set(groups.get(source, ())) <= mine}


def _riding_along(shares: dict[str, float], groups: CommandMates) -> set[str]:
    """The sources that are not tuned for themselves: compiled in one command with a
    hotter source (`shares` is hottest first), they take that one's flags."""
    riding: set[str] = set()
    for source in shares:
        if source in groups and source not in riding:
            riding |= set(groups[source]) - {source}
    return riding
