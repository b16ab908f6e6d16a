"""Profile-guided optimization from the recorded build: instrument, train, merge, store.

    units ──from source, -fprofile-instr-generate──▶ instrumented binary (relinked with
    the profile runtime) ──the benchmark, LLVM_PROFILE_FILE──▶ *.profraw
    ──llvm-profdata merge, counts rounded (steady_counts)──▶
    .autopass/blobs/profile/<hash>.profdata

A PGO build is then every runtime unit with `-fprofile-instr-use=<that file>` (compiled
from source: clang's instrumentation profile is keyed to the front end's view of each
function).  The profile's content hash names it, so a changed profile is a different
build, never a stale cache hit.  The training command defaults to the benchmark; it can
differ ([run].train) so that training and evaluation inputs are not the same.
"""

from __future__ import annotations

import glob
import os
import shutil
import tempfile
from dataclasses import dataclass

from autopass_build.core import toolchain
from autopass_build.core.flags import UnitFlags
from autopass_build.core.outcome import EvaluationError
from autopass_build.core.plural import counted
from autopass_build.core.stage_flags import INSTRUMENT, INSTRUMENT_LINK_FLAGS
from autopass_build.instruments import steady_counts, training
from autopass_build.instruments.evaluate import Evaluator

PGO_FILE = "pgo.json"
GENERATE = INSTRUMENT
RUNTIME_LINK_FLAGS = INSTRUMENT_LINK_FLAGS


class PgoError(Exception):
    pass


@dataclass
class TrainedProfile:
    path: str          # absolute, inside the store
    hash: str
    target: str
    runs: int
    workload: str      # Benchmark.workload() it was trained under

    def use_flag(self) -> str:
        return f"-fprofile-instr-use={self.path}"


def flags_for(evaluator: Evaluator, profile: TrainedProfile) -> UnitFlags:
    """Every runtime unit of the target compiled with the profile."""
    return {u.id: (profile.use_flag(),) for u in evaluator.units}


def train(evaluator: Evaluator, progress=None) -> TrainedProfile:
    show = progress or (lambda message: None)
    profdata = toolchain.find_tool("llvm-profdata")
    if profdata is None:
        raise PgoError(toolchain.not_found("llvm-profdata"))
    show(f"building {evaluator.target.output_rel} instrumented "
         f"({counted(len(evaluator.units), 'unit')} from source)")
    try:
        built = evaluator.replayer.build(evaluator.target.output,
                                         {u.id: (GENERATE,) for u in evaluator.units},
                                         link_flags=RUNTIME_LINK_FLAGS)
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
        try:    # rounded: a program whose counts vary by run still gets one profile
            left_out = steady_counts.merge_profraw(profdata, raws, merged, scratch)
        except steady_counts.SteadyError as error:
            raise PgoError(str(error)) from None
        if left_out:
            show(steady_counts.left_out_note(left_out, len(raws)))
        path, digest = training.keep(evaluator.store, merged, "profile", ".profdata")
    shutil.rmtree(built.folder, ignore_errors=True)
    result = TrainedProfile(path, digest, evaluator.target.output_rel, len(raws),
                            bench.workload())
    training.save(evaluator.store.dir, PGO_FILE, result)
    return result


def load(store_dir: str) -> TrainedProfile | None:
    return training.load(store_dir, PGO_FILE, TrainedProfile)
