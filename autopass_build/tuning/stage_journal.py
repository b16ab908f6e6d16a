"""What a run's journal says of its stage phase: which evaluations were the stages
before the search, how long one took, and what it holds of a step on top, so that a
resumed run takes a step measured before its stop as it was decided (kept or not) and
measures again only what was not decided."""

from __future__ import annotations

from enum import Enum

from autopass_build.candidates import stages
from autopass_build.candidates.stages import AFTER_SEARCH, Stage
from autopass_build.measuring.stats import FASTER
from autopass_build.tuning.journal import STAGE_EVALUATIONS, Entry, Journal, Phase
from autopass_build.tuning.measuring import config_key


class Earlier(Enum):
    """A step as the journal of a resumed run holds it."""
    NONE = "not measured"
    KEPT = "verified faster"
    NOT_KEPT = "not verified faster"


def earlier(journal: Journal, deterministic: bool, composition: tuple[Stage, ...]) -> Earlier:
    """What `journal` holds of the last step of `composition` (the metric
    `deterministic`: no confirmation is taken)."""
    key = config_key({}, stages.name(composition))
    first = journal.find(Phase.STAGE, key)
    if first is None:
        return Earlier.NONE
    if first.verdict != FASTER or not first.measured:
        return Earlier.NOT_KEPT
    if deterministic:
        return Earlier.KEPT
    confirmed = journal.find(Phase.STAGE_CONFIRM, key)
    if confirmed is None:
        return Earlier.NONE          # its confirmation was stopped: taken again
    return Earlier.KEPT if confirmed.verdict == FASTER and confirmed.measured \
        else Earlier.NOT_KEPT


def kept_entry(journal: Journal, composition: tuple[Stage, ...]) -> Entry | None:
    """The measurement that kept the last step of `composition`: its confirmation
    (its first look where the metric repeats exactly)."""
    key = config_key({}, stages.name(composition))
    found = journal.find(Phase.STAGE_CONFIRM, key) or journal.find(Phase.STAGE, key)
    return found if found is not None and found.measured else None


def stage_phase_entries(journal: Journal) -> list[Entry]:
    """The evaluations of the stage phase before the search (not the steps after it,
    which a resumed run may hold too)."""
    return [e for e in journal.of_phase(*STAGE_EVALUATIONS)
            if not set(e.composition) & set(AFTER_SEARCH)]


def stage_evaluation_seconds(journal: Journal, relinked: bool = False) -> float | None:
    """Seconds a stage evaluation took on average in this run (None before any): what a
    build and link of the whole program and its measurement cost here.  `relinked`: of
    the evaluations that compiled nothing (every unit from the cache: a confirmation),
    what a step that only links again costs; the average of all where there is none."""
    looks = [e for e in journal.of_phase(*STAGE_EVALUATIONS) if e.timing.seconds > 0]
    cached = [e for e in looks if e.timing.compiled == 0 and e.timing.cached > 0]
    chosen = cached if relinked and cached else looks
    return sum(e.timing.seconds for e in chosen) / len(chosen) if chosen else None
