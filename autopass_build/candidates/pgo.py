"""Profile-guided optimization from the recorded build: instrument, train, merge, store.

    units ──from their recorded IR, -fprofile-generate──▶ instrumented binary (relinked
    with the profile runtime) ──the benchmark, LLVM_PROFILE_FILE──▶ *.profraw
    ──llvm-profdata merge, counts rounded (steady_counts)──▶
    .autopass/blobs/profile/<hash>.profdata

A PGO build is then every runtime unit with `-fprofile-use=<that file>`.  The
instrumentation is the IR's (core/stage_flags.INSTRUMENT): its counters sit where the
optimizer sees the function, after the pre-inliner, and both the instrumented and the
profiled compile replay from the recorded IR.  What the profile's use said of functions
whose data it dropped is counted by the replayer (`match_note`): a profile trained on
this very build matches every function, so a drop means the pipeline differs.  The
profile's content hash names it, so a changed profile is a different build, never a
stale cache hit.  The training command defaults to the benchmark; it can differ
([run].train) so that training and evaluation inputs are not the same.
"""

from __future__ import annotations

import dataclasses
import glob
import os
import shutil
import tempfile
from dataclasses import dataclass

from autopass_build.candidates import steady_counts, training
from autopass_build.candidates.evaluate import Evaluator
from autopass_build.core import pgo_profile, toolchain
from autopass_build.core.errors import AutopassError
from autopass_build.core.files import hash_bytes, hash_json
from autopass_build.core.flags import UnitFlags
from autopass_build.core.outcome import EvaluationError
from autopass_build.core.plural import counted
from autopass_build.core.stage_flags import (
    CS_INSTRUMENT,
    CS_INSTRUMENT_FLAGS,
    INSTRUMENT,
    INSTRUMENT_LINK_FLAGS,
    lto_of,
    profile_use,
)
from autopass_build.store.index import Store

PGO_FILE = "pgo.json"
CS_FILE = "cspgo.json"
GENERATE = INSTRUMENT
RUNTIME_LINK_FLAGS = INSTRUMENT_LINK_FLAGS


class PgoError(AutopassError):
    pass


@dataclass
class TrainedProfile:
    path: str          # absolute, inside the store
    hash: str
    target: str
    runs: int
    workload: str      # Benchmark.workload() it was trained under
    # pgo_profile.IR; a record without it (a front-end profile of an earlier autopass)
    # does not load, and the profile is trained again
    level: str

    def use_flag(self) -> str:
        return profile_use(self.path)


def match_note(evaluator: Evaluator, profile: TrainedProfile, built: str) -> str:
    """What the compiles of the build `built` (a composition's name) said of the
    profile's fit: every function matched, or how many were dropped and which; "" when
    no compile with the profile has run yet (its objects were cached)."""
    said = evaluator.replayer.profile_said.pop(profile.path, None)
    if said is None:
        return ""
    if not said:
        return f"PGO profile on {built}: every function's data matched its code"
    if said.mismatched:
        return (f"PGO profile on {built}: {said.text()} (their counts are dropped; the "
                "instrumented build's pipeline differs from this one's)")
    # no counters for a function: the instrumented build inlined it everywhere (a
    # header's static helper, seen on flac) or did not build it; nothing is dropped
    return (f"PGO profile on {built}: {said.text()} (the instrumented build had no "
            "counters for it: inlined everywhere there, or not built; it is optimized "
            "without profile data)")


def flags_for(evaluator: Evaluator, profile: TrainedProfile) -> UnitFlags:
    """Every runtime unit of the target compiled with the profile."""
    return {u.id: (profile.use_flag(),) for u in evaluator.units}


def train(evaluator: Evaluator, progress=None) -> TrainedProfile:
    """A profile of the recorded build: every unit instrumented, the benchmark (or
    [run].train) run once; recorded as the store's last profile (`load`)."""
    result = trained_here(evaluator, progress)
    training.save(evaluator.store.dir, PGO_FILE, result)
    return result


def trained_here(evaluator: Evaluator, progress=None) -> TrainedProfile:
    """`train`'s profile, kept in the store but not recorded as its last one: a cluster
    node's, which the driver keeps (`adopt`)."""
    show = progress or (lambda message: None)
    show(f"building {evaluator.target.output_rel} instrumented "
         f"({counted(len(evaluator.units), 'unit')})")
    path, digest, runs = _trained(evaluator, {u.id: (GENERATE,) for u in evaluator.units},
                                  RUNTIME_LINK_FLAGS, show)
    return TrainedProfile(path, digest, evaluator.target.output_rel, runs,
                          evaluator.bench.workload(), pgo_profile.kind(path))


def adopt(store: Store, data: bytes, trained: TrainedProfile, where: str,
          workload: str, record: str = PGO_FILE, **mine) -> TrainedProfile:
    """A profile trained elsewhere (`where`: a cluster node), its bytes `data`: kept in
    this store under its hash and recorded as the last one trained (in `record`: PGO's,
    or CS-PGO's with `mine`, its fields as this machine names them), as training here
    does, under this machine's `workload` (a node's copy of the project runs it in
    another folder); PgoError when the bytes are not the profile the node hashed."""
    digest = hash_bytes(data)
    if digest != trained.hash:
        raise PgoError(f"the PGO profile trained on {where} arrived damaged (its hash "
                       f"{digest[:12]}, not {trained.hash[:12]}): tune again")
    path = training.keep_bytes(store, data, "profile", ".profdata", digest)
    result = dataclasses.replace(trained, path=path, workload=workload, **mine)
    training.save(store.dir, record, result)
    return result


@dataclass
class TrainedCs(TrainedProfile):
    """A profile with its context-sensitive part, for one build: `base` the hash of the
    profile it extends, `built` a hash of the build's flags (the stages, per-file flags)
    it was counted on."""
    base: str = ""
    built: str = ""


def train_cs(evaluator: Evaluator, base: TrainedProfile, progress=None) -> TrainedCs:
    """CS-PGO on the build `evaluator` makes (its baseline: the chosen stages with
    `base`'s profile, and the per-file winners): that build with -fcs-profile-generate
    added to every compile and link, trained, its counts merged with `base`'s.  Found
    in the store when this build was trained on this workload before."""
    show = progress or (lambda message: None)
    built = build_hash(evaluator)
    found = training.load(evaluator.store.dir, CS_FILE, TrainedCs)
    if found and (found.base, found.built, found.workload) == (base.hash, built,
                                                              evaluator.bench.workload()):
        return found
    show(f"CS-PGO: building {evaluator.target.output_rel} instrumented after inlining")
    lto = bool(lto_of(evaluator.base_link_flags))
    path, digest, runs = _trained(
        evaluator, {u.id: evaluator.base_flags.get(u.id, ()) + (CS_INSTRUMENT,)
                    for u in evaluator.units},
        evaluator.base_link_flags + CS_INSTRUMENT_FLAGS + ((base.use_flag(),) if lto else ()),
        show, base.path, found.path if found else None)
    result = TrainedCs(path, digest, evaluator.target.output_rel, runs,
                       evaluator.bench.workload(), pgo_profile.kind(path), base.hash, built)
    training.save(evaluator.store.dir, CS_FILE, result)
    return result


def build_hash(evaluator: Evaluator) -> str:
    """The identity of the build a CS profile is counted on: `evaluator`'s baseline
    flags (the stages, the per-file winners)."""
    return hash_json([sorted((k, list(v)) for k, v in evaluator.base_flags.items()),
                      list(evaluator.base_link_flags)])[:24]


def _trained(evaluator: Evaluator, flags: UnitFlags, link_flags: tuple[str, ...], show,
             base: str = "", reference: str | None = None) -> tuple[str, str, int]:
    """Build with `flags` and `link_flags` (an instrumented build), train, merge the raw
    profiles (with the indexed profile `base` when given; counts held to `reference`):
    the profile kept in the store, its hash, and the number of raw profiles."""
    profdata = toolchain.find_tool("llvm-profdata")
    if profdata is None:
        raise PgoError(toolchain.not_found("llvm-profdata"))
    try:
        built = evaluator.replayer.build(evaluator.target.output, flags, link_flags)
    except EvaluationError as error:
        raise PgoError(f"the instrumented build failed: {error}") from None
    bench = evaluator.bench
    with tempfile.TemporaryDirectory(prefix="autopass-pgo-") as scratch:
        env = {**bench.env(built.env), "LLVM_PROFILE_FILE": os.path.join(scratch, "%p.profraw")}
        try:
            training.run(bench, built.binary, env, show)
        except training.TrainingError as error:
            raise PgoError(str(error)) from None
        raws = sorted(glob.glob(os.path.join(scratch, "*.profraw")))
        if not raws:
            raise PgoError("the benchmark wrote no profile: does it exit normally?")
        merged = os.path.join(scratch, "merged.profdata")
        show(f"training: merging {counted(len(raws), 'raw profile')}")
        try:    # rounded: a program whose counts vary by run still gets one profile
            left_out = steady_counts.merge_profraw(profdata, raws + ([base] if base else []),
                                                   merged, scratch, reference)
        except steady_counts.SteadyError as error:
            raise PgoError(str(error)) from None
        if left_out:
            show(steady_counts.left_out_note(left_out, len(raws)))
        path, digest = training.keep(evaluator.store, merged, "profile", ".profdata")
    shutil.rmtree(built.folder, ignore_errors=True)
    return path, digest, len(raws)


def load(store_dir: str) -> TrainedProfile | None:
    """The last profile trained, if it is intact and the IR's (the tuner's replays take
    no other kind)."""
    found = training.load(store_dir, PGO_FILE, TrainedProfile)
    return found if found is not None and found.level == pgo_profile.IR else None
