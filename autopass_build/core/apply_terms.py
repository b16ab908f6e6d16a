"""Apply mode's words, as types: the policy for an entry it doubts, and the phase of an
`apply --train` build.  They reach the wrapper as text (AUTOPASS_APPLY_POLICY,
AUTOPASS_TRAIN_PHASE, a launcher's --autopass-policy=) and are parsed once, where apply
mode starts (capture/apply/apply_mode.py); everything after compares members.  Kept out of
core/names.py, which every compile imports: `enum` is one import the record path does
without (test_wrapper's import test)."""

from __future__ import annotations

from enum import Enum


class ApplyPolicy(str, Enum):
    """What apply mode does with an entry it doubts (a stale source, a stale profile,
    flags the compiler rejects): the plain compile with a warning, an error that stops
    the build, or the entry anyway."""
    WARN = "warn"
    ERROR = "error"
    APPLY_ANYWAY = "apply-anyway"


class TrainPhase(str, Enum):
    """`apply --train` builds twice, or three times: INSTRUMENT (every compile and link
    instrumented for PGO, nothing of the database applied), CS_INSTRUMENT (with CS-PGO:
    the database with the profile just trained, instrumented again after inlining) and
    FINAL (the database with the profile just trained; BOLT is trained on the linked
    target after the build, not applied at its link).  NONE: a plain apply."""
    NONE = ""
    INSTRUMENT = "instrument"
    CS_INSTRUMENT = "cs-instrument"
    FINAL = "final"


APPLY_POLICIES = tuple(p.value for p in ApplyPolicy)
TRAIN_PHASES = tuple(p.value for p in TrainPhase if p is not TrainPhase.NONE)
DEFAULT_APPLY_POLICY = ApplyPolicy.WARN
