"""The BOLT stage for the tuner: train a profile on a candidate's linked binary (and on
each project shared library it loads), then rewrite them with it, before the candidate
is measured.

    candidate (linked with -Wl,--emit-relocs) ──instrument──▶ run [run].train or the
    benchmark ──merge──▶ .autopass/blobs/bolt/<hash>.fdata (+ bolt.json: which binary)
    candidate + profile ──llvm-bolt──▶ the binary that is measured

A BOLT profile belongs to one binary (core/bolt_commands.py), so it is trained on the binary that
will ship and the stage is measured last, on top of everything else the run chose.  The
program's time is often in a library of its own (HarfBuzz's hb-shape in libharfbuzz.so,
libjpeg-turbo's cjpeg in libjpeg.so): the program and those libraries are instrumented
together, each writing its own profile in the same run, and each library is rewritten
into the candidate's `bolt/` folder, found first through LD_LIBRARY_PATH.  Any failure
of the program's is an EvaluationError with its outcome: the stage is rejected, never
the run; a library BOLT cannot rewrite is left as built, with a note.
"""

from __future__ import annotations

import dataclasses
import glob
import os
import tempfile
from dataclasses import dataclass

from autopass_build.candidates import training
from autopass_build.candidates.candidate import Candidate
from autopass_build.candidates.evaluate import Evaluator
from autopass_build.core import bolt_commands as bolt
from autopass_build.core.files import fail_if_no_room, relative_to
from autopass_build.core.outcome import EvaluationError, Outcome
from autopass_build.core.stage_flags import BOLT_LINK_FLAGS
from autopass_build.measuring.benchmark import Benchmark
from autopass_build.measuring.binaries import alias_soname
from autopass_build.store.index import Store

BOLT_FILE = "bolt.json"
LIBRARY_FILE = "bolt-{name}.json"      # one per library, by its file name


@dataclass
class TrainedBolt:
    path: str          # absolute, inside the store
    hash: str          # of the profile
    binary: str        # code fingerprint of the binary it was trained on
    runs: int
    workload: str      # Benchmark.workload() it was trained under
    library: str = ""  # a library's link output relative to the root; "" for the program
    yaml: str = ""     # the profile as YAML (bolt_commands.to_yaml), in the store; "" none
    yaml_hash: str = ""


@dataclass
class BroughtProfile:
    """A BOLT profile trained on a cluster node, its bytes (and its YAML's) with it."""
    trained: TrainedBolt
    data: bytes
    yaml: bytes = b""


@dataclass
class BroughtBolt:
    """What a node's BoltStage trained, for the driver's store (BoltStage.adopt)."""
    program: BroughtProfile | None
    libraries: list[BroughtProfile]
    rewritten: tuple[str, ...]          # TrainedBolt.library of those the call rewrote


@dataclass(frozen=True)
class BoltOnNode:
    """A BoltStage as data, for a cluster node (PortableStep.portable): the node trains
    and rewrites with its own store and benchmark, and sends back what it trained."""
    libraries: tuple[str, ...]          # absolute, as the driver names them


class BoltStage:
    """The post-link step of a BOLT candidate (Evaluator.evaluate's `post_link`);
    `libraries`: the project shared libraries the program loads, as built (absolute)."""

    def __init__(self, store: Store, bench: Benchmark, show=None,
                 libraries: tuple[str, ...] = ()):
        self.store = store
        self.bench = bench
        self.show = show or (lambda message: None)
        root = os.path.dirname(store.dir)
        self.libraries = {os.path.basename(p): relative_to(p, root) for p in libraries}
        self.trained: TrainedBolt | None = load(store.dir)
        self.trained_libraries = [t for name in self.libraries
                                  if (t := load(store.dir, name)) is not None]
        self.rewritten: list[TrainedBolt] = []    # the libraries the last call rewrote

    def __call__(self, built: Candidate) -> Candidate:
        """`built` rewritten by BOLT with profiles trained on it (or found for it)."""
        try:
            binaries = {"": built.binary, **{
                name: path for name in self.libraries
                if os.path.isfile(path := os.path.join(built.folder, name))}}
            fingerprints = {name: bolt.code_fingerprint(path) for name, path in binaries.items()}
            if self._stale(fingerprints):
                self._train(built, binaries, fingerprints)
            assert self.trained is not None
            folder = os.path.join(built.folder, "bolt")
            os.makedirs(folder, exist_ok=True)
            output = os.path.join(folder, os.path.basename(built.binary))
            self.show("BOLT: rewriting the binary with its profile")
            bolt.optimize(built.binary, self.trained.path, output)
        except bolt.BoltError as error:
            fail_if_no_room(str(error), built.folder)
            raise EvaluationError(Outcome.POST_LINK_FAIL, str(error)) from None
        self.rewritten = []
        for trained in self.trained_libraries:
            library = binaries.get(os.path.basename(trained.library))
            if library and self._rewrite_library(library, trained, folder):
                self.rewritten.append(trained)
        env = _found_first(folder, built.env) if self.rewritten else built.env
        return Candidate(output, built.folder, env)

    def found_again(self, without: Evaluator) -> bool:
        """BOLT kept before the run was stopped: the binary it was trained on (the build
        `without` makes, linked for BOLT) built again, so that its profile is found by
        that binary's fingerprint (or trained again on it), never one the store holds
        for another.  False, said, when it cannot be."""
        try:
            built = without.replayer.build(without.target.output, dict(without.base_flags),
                                           without.base_link_flags + BOLT_LINK_FLAGS)
            self(built)
        except EvaluationError as error:
            self.show(f"BOLT not kept: its profile could not be found again after the stop "
                      f"({error})")
            return False
        return True

    def portable(self) -> BoltOnNode:
        root = os.path.dirname(self.store.dir)
        return BoltOnNode(tuple(os.path.join(root, rel) for rel in self.libraries.values()))

    def brought(self) -> BroughtBolt:
        """What this stage trained, with the profiles' bytes (a node's, for the driver)."""
        def read(path: str) -> bytes:
            with open(path, "rb") as handle:
                return handle.read()

        def with_bytes(trained: TrainedBolt) -> BroughtProfile:
            return BroughtProfile(trained, read(trained.path),
                                  read(trained.yaml) if trained.yaml else b"")

        return BroughtBolt(with_bytes(self.trained) if self.trained else None,
                           [with_bytes(t) for t in self.trained_libraries],
                           tuple(t.library for t in self.rewritten))

    def adopt(self, brought: object) -> None:
        """The profiles a node's stage trained, kept in this store (checked against
        their hashes) and recorded as the last ones, as training here does."""
        if not isinstance(brought, BroughtBolt):
            return
        self.trained = self._arrived(brought.program) if brought.program else None
        self.trained_libraries = [self._arrived(p) for p in brought.libraries]
        self.rewritten = [t for t in self.trained_libraries if t.library in brought.rewritten]

    def _arrived(self, profile: BroughtProfile) -> TrainedBolt:
        path = training.keep_bytes(self.store, profile.data, "bolt", ".fdata",
                                   profile.trained.hash)
        trained = dataclasses.replace(profile.trained, path=path)
        if profile.yaml:
            trained.yaml = training.keep_bytes(self.store, profile.yaml, "bolt", ".yaml",
                                               trained.yaml_hash)
        training.save(self.store.dir, _file(trained.library), trained)
        return trained

    def _rewrite_library(self, path: str, trained: TrainedBolt, folder: str) -> bool:
        output = os.path.join(folder, os.path.basename(path))
        self.show(f"BOLT: rewriting {trained.library} with its profile")
        try:
            bolt.optimize(path, trained.path, output)
        except bolt.BoltError as error:
            self.show(f"BOLT: {trained.library} is left as built: {error}")
            return False
        alias_soname(output)
        return True

    def _stale(self, fingerprints: dict[str, str]) -> bool:
        """Whether any binary's profile is missing, or was trained on other code, another
        workload or (a library) another path in the tree."""
        trained = {os.path.basename(t.library): t for t in self.trained_libraries
                   if t.library == self.libraries.get(os.path.basename(t.library))}
        if self.trained is not None:
            trained[""] = self.trained
        return any(name not in trained or trained[name].binary != fingerprint
                   or trained[name].workload != self.bench.workload()
                   for name, fingerprint in fingerprints.items())

    def _train(self, built: Candidate, binaries: dict[str, str],
               fingerprints: dict[str, str]) -> None:
        """One instrumented run of the program with its libraries instrumented beside
        it, each writing its own profile (`lib<n>-<pid>.fdata`, the program's
        `prof.<pid>.fdata`)."""
        libraries = [name for name in binaries if name]
        with tempfile.TemporaryDirectory(prefix="autopass-bolt-") as scratch:
            self.show("BOLT: instrumenting the linked binary" + (
                " and the project libraries it loads" if libraries else ""))
            instrumented = os.path.join(scratch, os.path.basename(built.binary))
            bolt.instrument(built.binary, instrumented, os.path.join(scratch, "prof"))
            folder = os.path.join(scratch, "lib")
            os.makedirs(folder)
            for index, name in enumerate(libraries):
                copy = os.path.join(folder, name)
                bolt.instrument(binaries[name], copy, os.path.join(scratch, f"lib{index}-"))
                alias_soname(copy)
            env = _found_first(folder, built.env) if libraries else built.env
            try:
                training.run(self.bench, instrumented, self.bench.env(env), self.show)
            except training.TrainingError as error:
                raise EvaluationError(Outcome.TRAINING_FAIL, f"BOLT: {error}") from None
            self.trained = self._kept(scratch, "prof", fingerprints[""], "")
            if self.trained is None:
                raise EvaluationError(Outcome.TRAINING_FAIL, "the BOLT training run wrote no "
                                      "profile: does the program exit normally?")
            self.trained = self._with_yaml(self.trained, built.binary, scratch)
            self.trained_libraries = [
                found for index, name in enumerate(libraries)
                if (found := self._kept(scratch, f"lib{index}-", fingerprints[name],
                                        self.libraries[name])) is not None]

    def _with_yaml(self, trained: TrainedBolt, binary: str, scratch: str) -> TrainedBolt:
        """The program's profile also as YAML, kept beside it: a later build of the
        program, whose code differs, can still be laid out by it (stale-profile
        inference in apply mode).  Without it only the exact binary gets BOLT."""
        yaml = os.path.join(scratch, "profile.yaml")
        try:
            bolt.to_yaml(binary, trained.path, yaml)
        except (bolt.BoltError, OSError) as error:
            self.show(f"BOLT: no YAML profile for later builds ({error})")
            return trained
        path, digest = training.keep(self.store, yaml, "bolt", ".yaml")
        trained = dataclasses.replace(trained, yaml=path, yaml_hash=digest)
        training.save(self.store.dir, _file(""), trained)
        return trained

    def _kept(self, scratch: str, prefix: str, fingerprint: str, library: str
              ) -> TrainedBolt | None:
        """The profiles one binary wrote, merged and kept in the store (None: none)."""
        raws = sorted(glob.glob(os.path.join(scratch, f"{prefix}*.fdata")))
        if not raws:
            return None
        merged = os.path.join(scratch, f"{prefix}merged.fdata")
        bolt.merge(raws, merged)
        path, digest = training.keep(self.store, merged, "bolt", ".fdata")
        trained = TrainedBolt(path, digest, fingerprint, len(raws), self.bench.workload(),
                              library)
        training.save(self.store.dir, _file(library), trained)
        return trained


def _found_first(folder: str, candidate_env: dict[str, str]) -> dict[str, str]:
    """A candidate's environment with `folder` first on its LD_LIBRARY_PATH (the
    benchmark puts the user's after it: Benchmark.env)."""
    path = [folder] + [p for p in [candidate_env.get("LD_LIBRARY_PATH", "")] if p]
    return {**candidate_env, "LD_LIBRARY_PATH": os.pathsep.join(path)}


def _file(library: str) -> str:
    return LIBRARY_FILE.format(name=os.path.basename(library)) if library else BOLT_FILE


def load(store_dir: str, library: str = "") -> TrainedBolt | None:
    """The last trained profile of the program (or of the library of that file name),
    if it is intact."""
    return training.load(store_dir, _file(library), TrainedBolt)
