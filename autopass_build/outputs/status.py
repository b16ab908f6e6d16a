"""`autopass db status`: how much of a tuning result still applies to today's source.

A database is measured on one version of the source; the source moves on.  For each
part this says what a build of today's source would still get:

    per-file entries   those whose source is unchanged (an entry of a changed source is
                       not applied: apply mode's warning, `db check`)
    the PGO profile    functions of today's units whose profile data still matches
                       (clang compiles each recorded unit's current source, front end
                       only, with the profile and counts what it would drop: its own
                       "out of date" and "incomplete" summaries)
    BOLT               its profile is for one exact binary (the code fingerprint):
                       applied only while the program's code is unchanged, which apply
                       checks at the link

and one recommendation: nothing, retrain (the decisions hold, the profiles are stale:
`apply --train` or tune again with the same stages) or re-tune (most entries no
longer apply).
"""

from __future__ import annotations

import os
import re
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from enum import Enum

from autopass_build.candidates.replay_args import codegen_args, source_args
from autopass_build.core import decisions, pgo_profile, proc
from autopass_build.core.outcome import EvaluationError
from autopass_build.core.plural import counted
from autopass_build.core.stage_flags import profile_use
from autopass_build.store.build_records import UnitRecord
from autopass_build.store.index import Store

# Below this share of the profiled functions still matching, the PGO stage has lost
# enough of its evidence that retraining is advised.  A judgement, not a measurement:
# PGO's gain is concentrated in hot functions, which one share cannot weigh.
RETRAIN_BELOW = 0.9
RETRAIN_HOW = ("retrain the profiles in the build (`autopass apply --train -- BUILD` from a "
               "clean tree), or tune again with the same stages")
RETUNE_ABOVE = 0.5        # of the entries: more than this no longer apply -> re-tune
OUT_OF_DATE = re.compile(rb"of (\d+) functions?, (\d+) (?:has|have) mismatched data")
INCOMPLETE = re.compile(rb"of (\d+) functions?, (\d+) (?:has|have) no data")
NO_DATA = b"no profile data available for file"
PGO_WARNINGS = ["-Wno-everything", "-Wprofile-instr-out-of-date", "-Wprofile-instr-missing",
                "-Wprofile-instr-unprofiled"]


class Advice(str, Enum):
    NOTHING = "nothing"
    RETRAIN = "retrain"
    RETUNE = "re-tune"

    def __str__(self) -> str:
        return self.value


@dataclass
class ProfileMatch:
    """The PGO profile against today's units: functions whose data still applies."""
    units: int = 0
    functions: int = 0
    mismatched: int = 0          # the function's control flow changed: its data is dropped
    missing: int = 0             # a function the profile does not know (new, or renamed)
    unprofiled: list[str] = field(default_factory=list)   # sources with no data at all
    failed: list[str] = field(default_factory=list)       # sources that did not compile

    @property
    def matched(self) -> int:
        return self.functions - self.mismatched - self.missing

    @property
    def share(self) -> float:
        return self.matched / self.functions if self.functions else 1.0

    def text(self) -> str:
        line = (f"{self.matched}/{self.functions} functions of "
                f"{counted(self.units, 'unit')} match "
                f"({self.share:.0%}; {self.mismatched} changed, {self.missing} new)")
        if self.unprofiled:
            line += f"; no data for {len(self.unprofiled)} sources"
        if self.failed:
            line += f"; {len(self.failed)} sources did not compile ({self.failed[0]})"
        return line


def profile_match(units: list[UnitRecord], profile: str, jobs: int = 0) -> ProfileMatch:
    """Compile each unit's current source with `profile`, front end only, and count."""
    found = ProfileMatch()
    present = [u for u in units if os.path.isfile(u.source)]
    with ThreadPoolExecutor(max_workers=jobs or os.cpu_count() or 1) as pool:
        for unit, done in zip(present, pool.map(lambda u: _profile_use(u, profile), present)):
            found.units += 1
            if done is None:
                found.failed.append(unit.source_rel)
                continue
            functions, mismatched, missing, no_data = done
            found.functions += functions
            found.mismatched += mismatched
            found.missing += missing
            if no_data:
                found.unprofiled.append(unit.source_rel)
    return found


def _profile_use(unit: UnitRecord, profile: str) -> tuple[int, int, int, bool] | None:
    """(functions, mismatched, missing, no data at all) of one unit, or None when it did
    not compile.  A front-end profile is used by the front end, which sums up what it
    dropped; an IR profile by the optimizer, which names each function: the unit's IR
    is made first (its functions counted there), then optimized with the profile."""
    frontend = pgo_profile.kind(profile) == pgo_profile.FRONTEND
    with tempfile.TemporaryDirectory(prefix="autopass-status-") as folder:
        ir = os.path.join(folder, "unit.ll")
        done = _compile([unit.compiler, *source_args(unit), "-Xclang", "-disable-llvm-passes",
                         "-S", "-emit-llvm", "-o", ir]
                        + ([profile_use(profile), *PGO_WARNINGS] if frontend else []), unit.cwd)
        if done is None:
            return None
        if frontend:
            out_of_date = OUT_OF_DATE.search(done.stderr)
            incomplete = INCOMPLETE.search(done.stderr)
            summary = out_of_date or incomplete
            total = int(summary.group(1)) if summary else _defined_functions(ir)
            return (total, int(out_of_date.group(2)) if out_of_date else 0,
                    int(incomplete.group(2)) if incomplete else 0, NO_DATA in done.stderr)
        used = _compile([unit.compiler, *codegen_args(unit), profile_use(profile),
                         *pgo_profile.MATCH_WARNINGS, "-c", "-x", "ir", ir, "-o", os.devnull],
                        unit.cwd)
        if used is None:
            return None
        # A context-sensitive part describes the build after inlining, across units
        # under LTO: one unit compiled alone cannot check it (lto=True leaves it out).
        said = pgo_profile.Said(lto=True).read(used.stderr)
        total = _defined_functions(ir)
        return (total, len(said.mismatched), len(said.missing),
                total > 0 and len(said.missing) == total)


def _compile(argv: list[str], cwd: str) -> proc.Captured | None:
    """A compile's outcome, None when it failed or could not start."""
    try:
        done = proc.run_captured(argv, cwd, proc.clean_env(dict(os.environ)), 600)
    except OSError:
        return None
    return None if done.status != 0 or done.timed_out else done


def _defined_functions(ir: str) -> int:
    with open(ir, "rb") as handle:
        return sum(1 for line in handle if line.startswith(b"define "))


@dataclass
class DecisionsMatch:
    """A database's decisions carried in the IR against today's source: how many still
    find the code they were tuned on (the same function, loop or call, its hash the
    same), and why the others do not."""
    decisions: int = 0
    matched: int = 0
    lost: list[str] = field(default_factory=list)     # "source: decision (why)"

    def text(self) -> str:
        line = f"{self.matched}/{self.decisions} still match today's source"
        if self.lost:
            line += f"; not applied: {'; '.join(self.lost[:3])}" + (
                f" and {len(self.lost) - 3} more" if len(self.lost) > 3 else "")
        return line


def decisions_match(store: Store, root: str,
                    carried: dict[str, list[decisions.Decision]]) -> DecisionsMatch:
    """Each source's decisions against the functions and loops of its source as it is
    today (the pass plugin's inventory of a compile of it)."""
    from autopass_build.candidates.replay import Replayer
    from autopass_build.evidence.inventory import of_unit

    replayer = Replayer(store)
    units = {u.source_rel: u for u in store.units()}
    found = DecisionsMatch()
    for source, wanted in sorted(carried.items()):
        found.decisions += len(wanted)
        unit = units.get(source)
        if not wanted:
            continue
        if unit is None or not os.path.isfile(unit.source):
            found.lost += [f"{source}: {d.text()} (the source is not here)" for d in wanted]
            continue
        try:
            today = of_unit(replayer, unit, from_source=True)
        except EvaluationError as error:
            found.lost += [f"{source}: {d.text()} ({error})" for d in wanted[:1]]
            continue
        for decision in wanted:
            why = _mismatch(decision, today)
            if why:
                found.lost.append(f"{source}: {decision.text()} ({why})")
            else:
                found.matched += 1
    return found


def _mismatch(decision: decisions.Decision, today) -> str:
    """Why `decision` no longer finds its code in the inventory `today` ("" when it does)."""
    function = today.functions.get(decision.function)
    if function is None:
        return "its function is gone"
    if decision.kind == "loop":
        loop = next((x for x in today.loops_of(decision.function) if x.path == decision.where),
                    None)
        if loop is None:
            return "its loop is gone"
        return "" if loop.hash == decision.hash else "the loop changed"
    if decision.kind == "call" and not any(c.function == decision.function
                                           and c.place == decision.where for c in today.calls):
        return "its call is gone"
    return "" if function.hash == decision.hash else "the function changed"


@dataclass
class BoltMatch:
    """llvm-bolt's own count of how a shipped BOLT profile meets today's program."""
    profiled: int          # functions the profile has samples for, found in the program
    stale: int             # of those, the ones whose code changed (a block hash differs)
    blocks_matched: int    # stale blocks stale-profile inference matched exactly
    blocks_stale: int

    @property
    def share(self) -> float:
        """The share of profiled functions whose profile still matches exactly."""
        return 1.0 - self.stale / self.profiled if self.profiled else 0.0

    def text(self) -> str:
        exact = self.profiled - self.stale
        inferred = (f"; stale-profile inference matched {self.blocks_matched} of "
                    f"{self.blocks_stale} changed blocks exactly" if self.blocks_stale else "")
        return (f"{exact}/{self.profiled} profiled functions unchanged "
                f"({self.share:.0%}){inferred} (llvm-bolt's report)")


def bolt_match(report: str) -> BoltMatch | None:
    """The counts of llvm-bolt's stale-profile report (bolt_commands.stale_report)."""
    profiled = re.search(r"(\d+) out of \d+ functions in the binary \([\d.]+%\) have "
                         r"non-empty execution profile", report)
    if profiled is None:
        return None
    stale = re.search(r"(\d+) \([\d.]+% of all profiled\) functions have invalid", report)
    blocks = re.search(r"exact match for [\d.]+% of basic blocks \((\d+) out of (\d+) stale\)",
                       report)
    return BoltMatch(int(profiled.group(1)), int(stale.group(1)) if stale else 0,
                     int(blocks.group(1)) if blocks else 0, int(blocks.group(2)) if blocks else 0)


def advice(entries: int, not_applying: int, pgo: ProfileMatch | None, unusable: list[str],
           bolt: BoltMatch | None = None) -> tuple[Advice, str]:
    """The one recommendation, with its reason; `unusable`: why each shipped profile
    (PGO's, BOLT's) cannot be used as it is."""
    if entries and not_applying > RETUNE_ABOVE * entries:
        return Advice.RETUNE, (f"{not_applying} of {entries} per-file entries no longer "
                               "apply: `autopass tune` (record the build first)")
    if pgo is not None and (pgo.share < RETRAIN_BELOW or pgo.unprofiled):
        return Advice.RETRAIN, (f"the PGO profile matches {pgo.share:.0%} of today's "
                                f"functions: {RETRAIN_HOW}")
    if bolt is not None and bolt.share < RETRAIN_BELOW:
        return Advice.RETRAIN, (f"the BOLT profile matches {bolt.share:.0%} of the functions "
                                f"it profiled unchanged: {RETRAIN_HOW}")
    if unusable:
        return Advice.RETRAIN, f"{unusable[0]}: {RETRAIN_HOW}"
    return Advice.NOTHING, "what was measured still applies"


# What apply mode says of a part it did not apply (capture/apply/applier.py's words), by kind:
# how `apply` sums up a build's decay in one line.
DECAY_KINDS = (("entry not applied", "{entries} not applied (source changed)"),
               ("PGO profile is out of date", "the PGO profile out of date in {sources}"),
               ("stale-profile inference", "BOLT by stale-profile inference"),
               ("BOLT not applied", "BOLT not applied"),
               ("PGO profile", "the PGO profile not applied"))


def decay_line(notes: list[str]) -> str:
    """One line for what of a database a build did not get (`notes`: apply's tally of
    not-applied warnings), "" when it got all of it."""
    counts: dict[str, int] = {}
    for note in notes:
        kind = next((text for marker, text in DECAY_KINDS if marker in note), "")
        if kind:
            counts[kind] = counts.get(kind, 0) + 1
    if not counts:
        return ""
    parts = [kind.format(entries=counted(n, "per-file entry", "per-file entries"),
                         sources=counted(n, "source")) for kind, n in counts.items()]
    return ("of what was tuned: " + ", ".join(parts) + " -- `autopass db status` says how "
            "much still applies; `autopass apply --train` retrains the profiles")
