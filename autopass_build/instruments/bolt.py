"""The BOLT stage for the tuner: train a profile on a candidate's linked binary, then
rewrite that binary with it, before the candidate is measured.

    candidate (linked with -Wl,--emit-relocs) ──instrument──▶ run [run].train or the
    benchmark ──merge──▶ .autopass/blobs/bolt/<hash>.fdata (+ bolt.json: which binary)
    candidate + profile ──llvm-bolt──▶ the binary that is measured

A BOLT profile belongs to one binary (core/bolt.py), so it is trained on the binary that
will ship and the stage is measured last, on top of everything else the run chose.  Any
failure is an EvaluationError with its outcome: the stage is rejected, never the run.
"""

from __future__ import annotations

import glob
import os
import tempfile
from dataclasses import dataclass

from autopass_build.core import bolt
from autopass_build.core.outcome import EvaluationError, Outcome
from autopass_build.instruments import training
from autopass_build.instruments.measure import Benchmark
from autopass_build.instruments.replay import Candidate
from autopass_build.store.index import Store

BOLT_FILE = "bolt.json"


@dataclass
class TrainedBolt:
    path: str          # absolute, inside the store
    hash: str          # of the profile
    binary: str        # code fingerprint of the binary it was trained on
    runs: int
    workload: str      # Benchmark.workload() it was trained under


class BoltStage:
    """The post-link step of a BOLT candidate (Evaluator.evaluate's `post_link`)."""

    def __init__(self, store: Store, bench: Benchmark, show=None):
        self.store = store
        self.bench = bench
        self.show = show or (lambda message: None)
        self.trained: TrainedBolt | None = load(store.dir)

    def __call__(self, built: Candidate) -> Candidate:
        """`built` rewritten by BOLT with a profile trained on it (or found for it)."""
        try:
            fingerprint = bolt.code_fingerprint(built.binary)
            if self.trained is None or self.trained.binary != fingerprint \
                    or self.trained.workload != self.bench.workload():
                self.trained = self._train(built, fingerprint)
            folder = os.path.join(built.folder, "bolt")
            os.makedirs(folder, exist_ok=True)
            output = os.path.join(folder, os.path.basename(built.binary))
            self.show("BOLT: rewriting the binary with its profile")
            bolt.optimize(built.binary, self.trained.path, output)
        except bolt.BoltError as error:
            raise EvaluationError(Outcome.POST_LINK_FAIL, str(error)) from None
        return Candidate(output, built.folder, built.env)

    def _train(self, built: Candidate, fingerprint: str) -> TrainedBolt:
        with tempfile.TemporaryDirectory(prefix="autopass-bolt-") as scratch:
            instrumented = os.path.join(scratch, os.path.basename(built.binary))
            self.show("BOLT: instrumenting the linked binary")
            bolt.instrument(built.binary, instrumented, os.path.join(scratch, "prof"))
            try:
                training.run(self.bench, instrumented, self.bench.env(built.env), self.show)
            except training.TrainingError as error:
                raise EvaluationError(Outcome.TRAINING_FAIL, f"BOLT: {error}") from None
            raws = sorted(glob.glob(os.path.join(scratch, "prof*.fdata")))
            if not raws:
                raise EvaluationError(Outcome.TRAINING_FAIL, "the BOLT training run wrote no "
                                      "profile: does the program exit normally?")
            merged = os.path.join(scratch, "merged.fdata")
            bolt.merge(raws, merged)
            path, digest = training.keep(self.store, merged, "bolt", ".fdata")
        trained = TrainedBolt(path, digest, fingerprint, len(raws), self.bench.workload())
        training.save(self.store.dir, BOLT_FILE, trained)
        return trained


def load(store_dir: str) -> TrainedBolt | None:
    """The last trained profile, if it is intact."""
    return training.load(store_dir, BOLT_FILE, TrainedBolt)
