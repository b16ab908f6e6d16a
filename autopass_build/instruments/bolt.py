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
import json
import os
import shutil
import tempfile
from dataclasses import asdict, dataclass

from autopass_build.core import bolt, proc
from autopass_build.core.files import hash_file
from autopass_build.core.outcome import EvaluationError, Outcome
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
            if self.trained is None or self.trained.binary != fingerprint:
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
        bench = self.bench
        with tempfile.TemporaryDirectory(prefix="autopass-bolt-") as scratch:
            instrumented = os.path.join(scratch, os.path.basename(built.binary))
            self.show("BOLT: instrumenting the linked binary")
            bolt.instrument(built.binary, instrumented, os.path.join(scratch, "prof"))
            argv = ([t.replace("{exe}", instrumented) for t in bench.run.train]
                    or bench.argv(instrumented))
            self.show(f"BOLT: training on {'[run].train' if bench.run.train else 'the benchmark'}")
            done = proc.run_captured(argv, bench.cwd, bench.env(built.env),
                                     timeout=bench.run.timeout * 10)
            if done.timed_out or done.status != 0:
                raise EvaluationError(Outcome.TRAINING_FAIL, "the BOLT training run failed "
                                      f"(exit {done.status}): "
                                      + done.stderr.decode("utf-8", "replace")[-300:])
            raws = sorted(glob.glob(os.path.join(scratch, "prof*.fdata")))
            if not raws:
                raise EvaluationError(Outcome.TRAINING_FAIL, "the BOLT training run wrote no "
                                      "profile: does the program exit normally?")
            merged = os.path.join(scratch, "merged.fdata")
            bolt.merge(raws, merged)
            digest = hash_file(merged)
            path = self.store.blob_path("bolt", digest, ".fdata")
            os.makedirs(os.path.dirname(path), exist_ok=True)
            shutil.copyfile(merged, path)
        trained = TrainedBolt(path, digest, fingerprint, len(raws))
        with open(os.path.join(self.store.dir, BOLT_FILE), "w") as handle:
            json.dump(asdict(trained), handle, indent=1)
        return trained


def load(store_dir: str) -> TrainedBolt | None:
    """The last trained profile, if it is intact."""
    try:
        with open(os.path.join(store_dir, BOLT_FILE)) as handle:
            found = TrainedBolt(**json.load(handle))
    except (OSError, ValueError, TypeError, RecursionError):
        return None
    if not all(isinstance(v, str) for v in (found.path, found.hash, found.binary)):
        return None
    if not os.path.isfile(found.path) or hash_file(found.path) != found.hash:
        return None
    return found
