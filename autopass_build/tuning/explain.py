"""Why a run's candidates came out wrong, in words a user can act on: the notes the
summary of `autopass tune` prints."""

from __future__ import annotations

from autopass_build.candidates.stages import Stage, of_name
from autopass_build.core import flags as flagset
from autopass_build.core.outcome import Outcome
from autopass_build.core.plural import counted, listed
from autopass_build.measuring import output_check
from autopass_build.store.build_records import UnitRecord
from autopass_build.tuning.journal import STAGE_PHASES, Entry, Journal


def wrong_output_notes(units: list[UnitRecord], sources: list[str], journal: Journal
                       ) -> tuple[str, ...]:
    """Why candidates were WRONG_OUTPUT, when the units say: floating-point results
    that depend on optimization (libvorbis builds with -ffast-math: its PGO build
    encodes other bytes)."""
    wrong = [e for e in journal.entries if e.outcome == Outcome.WRONG_OUTPUT]
    if not wrong:
        return ()
    loose = {u.source_rel: flag for u in units if u.source_rel in sources
             for flag in [flagset.loose_floating_point(u.argv)] if flag}
    if not loose:
        return rounding_note(wrong) + stage_note(wrong)
    flag = sorted(set(loose.values()))[0]
    return (f"wrong output explained: {', '.join(sorted(loose))} "
            f"{'is' if len(loose) == 1 else 'are'} compiled with {flag}, so "
            "floating-point results depend on how the code is optimized and other stages "
            "or flags change the output; if small differences are acceptable, "
            '[check] mode = "numbers" (with a tolerance) or a [check] command lets such '
            "builds be measured",)

def rounding_note(wrong: list[Entry]) -> tuple[str, ...]:
    """A note when wrong outputs differed only in printed numbers, by little (aubio's
    pitch track, 1.6e-06 apart under -force-vector-width=4, without -ffast-math)."""
    rounded = [e for e in wrong if output_check.NUMBERS_ONLY in e.detail]
    if not rounded:
        return ()
    return (f"{counted(len(rounded), 'candidate')} of {len(wrong)} with wrong output "
            f"differed only in printed numbers, by little: {rounded[0].detail}",)


def stage_note(wrong: list[Entry]) -> tuple[str, ...]:
    """A note when whole-program stages changed the output: the program computes
    otherwise when built so, which autopass cannot fix and a user may want to know
    (glslang rejects one of its own test shaders when built with its PGO profile, by
    clang 19 without autopass as well)."""
    staged = sorted({e.stages for e in wrong if e.phase in STAGE_PHASES and e.stages})
    if not staged:
        return ()
    pgo = any(Stage.PGO in of_name(name) for name in staged)
    return (f"wrong output explained: built with {listed(staged, 'or')} the program computes "
            "otherwise, a sign of undefined behaviour in it or of a compiler bug; the output "
            "check kept such builds out"
            + ("; `autopass pgo` builds it with the profile and shows the run" if pgo else ""),)
