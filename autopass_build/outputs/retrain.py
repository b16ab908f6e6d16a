"""`autopass apply --train -- BUILD`: the tuned decisions, with profiles trained on
today's source inside the build.

    build 1 (instrument): every compile and link instrumented for PGO, nothing else
    ─▶ training run ([run].train, or the benchmark) on the target: raw profiles, the
    benchmark's output kept as the reference ─▶ merged, counts held to the last profile
    or rounded (steady_counts)
    ─▶ build 1's outputs deleted, so the build system makes them again
    ─▶ build 2 (final): the database with the fresh profile ─▶ the benchmark's output
    checked against the reference
    ─▶ BOLT (when a stage): the linked target and the project libraries BOLT rewrote in
    tuning instrumented, trained, rewritten in place, checked again (bolt_retrain)
    ─▶ autopass.trained.flags.json (+ .profdata, .fdata, .bolt.yaml) beside the database:
    what the build was made with, for `autopass apply --db` and `db status`

Nothing of this may break the user's build: an instrumented build, training run or
check that fails makes build 2 (or its rebuild) use the database as shipped, with the
reason; BOLT that fails leaves the linked target as built.  Both builds run the user's
command as given, so it must build from a clean tree (else it compiles nothing
instrumented, which is said before anything is deleted).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time

from autopass_build.candidates import training
from autopass_build.candidates.steady_counts import (
    SteadyError,
    left_out_note,
    merge_profraw,
)
from autopass_build.core import flags_db, toolchain
from autopass_build.core.apply_terms import ApplyPolicy, TrainPhase
from autopass_build.core.errors import AutopassError
from autopass_build.core.files import disk_full, hash_file
from autopass_build.core.flags_db import FlagsDb, ProfileRef
from autopass_build.core.outcome import Outcome
from autopass_build.core.plural import counted
from autopass_build.core.stage_flags import BOLT, CSPGO, PGO
from autopass_build.core.stage_flags import flags as stage_flags
from autopass_build.measuring.benchmark import Benchmark, RunResult, run_once
from autopass_build.measuring.output_check import Reference, check_output, last_words
from autopass_build.outputs.bolt_retrain import (
    TRAINED_BOLT,
    TRAINED_LIBRARY,
    BoltRetrain,
    BoltUntrained,
)
from autopass_build.outputs.retrain_builds import (
    Build,
    Retrained,
    TrainBuilds,
    discard_leftovers,
)

TRAINED_DB = "autopass.trained.flags.json"
TRAINED_PROFILE = "autopass.trained.profdata"
INSTRUMENTED_SLOWDOWN = 10      # an instrumented run's timeout, in [run].timeout's


class RetrainError(AutopassError):
    """--train cannot start (nothing to train, a tree that builds nothing), or, under
    --policy error, could not train."""


class Retrainer:
    def __init__(self, command: list[str], db_path: str, root: str, policy: ApplyPolicy,
                 bench: Benchmark, show):
        self.command, self.db_path, self.root, self.policy = command, db_path, root, policy
        self.bench, self.show = bench, show
        self.db: FlagsDb = flags_db.load(db_path)
        target = self.db.target
        if target is None or not {PGO, BOLT} & set(target.stages):
            stages = "+".join(target.stages) if target else "none"
            raise RetrainError(f"{db_path} has no profile to train (its stages: {stages}): "
                               "build with `autopass apply`")
        self.target = target
        self.binary = os.path.join(root, target.output)
        self.folder = os.path.dirname(db_path)
        self.result = Retrained(0)
        self.held_to: str | None = None      # the profile counts are held to (_held_to)
        self.kept_aside: list[str] = []      # files to remove when the run ends
        self.builds = TrainBuilds(command, root, self.folder, policy, self.binary,
                                  self.result, show, cached=PGO in target.stages)
        # read before this run writes the trained database over the last one
        self.bolt_references = self._bolt_references() if BOLT in target.stages else {}

    def run(self) -> Retrained:
        said_leftovers(self.folder, self.show)
        try:
            result = self._builds()
            self.builds.settle()
            return result
        finally:
            # a signal, or an error, between an instrumented build and its training:
            # nothing instrumented is left for the next build to take as built
            self.builds.discard_pending()
            for path in self.kept_aside:
                with contextlib.suppress(OSError):
                    os.unlink(path)

    def _builds(self) -> Retrained:
        reference = None
        database = self.db_path
        if PGO in self.target.stages:
            reference, database = self._pgo()
        if database != self.db_path and CSPGO in self.target.stages:
            database = self._cspgo(database)
        if database != self.db_path:      # the fresh profile: check what it built
            build = self.builds.run(TrainPhase.FINAL, database,
                                "building with the profile just trained")
            self.result.status = build.status
            why = (f"failed (exit {build.status})" if build.status != 0
                   else self._differs(reference) if reference is not None else "")
            if why:
                self._fallback(f"the build with the fresh profile {why}", build)
                return self.result
        else:
            phase = TrainPhase.FINAL if BOLT in self.target.stages else TrainPhase.NONE
            build = self.builds.run(phase, self.db_path,
                                "building with the database as shipped")
            self.result.status = build.status
        if build.status == 0 and BOLT in self.target.stages:
            if self.binary in build.outputs:
                self._bolt(reference, database)
            elif PGO not in self.target.stages and not build.compiled:
                raise RetrainError(f"the build did not link {self.target.output} (up to "
                                   "date?): --train needs a clean build tree")
            else:       # it built other things: the target renamed or removed?
                self._bolt_not_trained(self._not_linked(build.linked))
        return self.result

    # ---- PGO ---------------------------------------------------------------------------
    def _pgo(self) -> tuple[Reference | None, str]:
        """Build 1 and the training run: (the reference output, the database build 2
        uses: the trained one, or the shipped one with the reason why)."""
        started = time.time()
        build = self.builds.run(TrainPhase.INSTRUMENT, self.db_path,
                                "building instrumented for PGO")
        if build.status == 0 and self.binary not in build.outputs and not build.linked:
            self.builds.discard(build)
            if not build.outputs:       # no compile went through autopass: say why
                from autopass_build.capture.record import unseen

                why = unseen.advice(os.getcwd(), started, "apply --train")
                raise RetrainError(f"the build did not link {self.target.output}: {why}")
            raise RetrainError(f"the build did not link {self.target.output} (up to date?): "
                               "--train needs a clean build tree (run your clean step first)")
        try:
            if build.status != 0:
                raise _Untrained(f"the instrumented build failed (exit {build.status})")
            if self.binary not in build.outputs:    # it linked others: renamed, removed?
                raise _Untrained(self._not_linked(build.linked))
            reference, profile = self._train_pgo()
            self.builds.discard(build)
            trained = self.db.replace(profile=ProfileRef(TRAINED_PROFILE, hash_file(profile)),
                                      target=self._with_new_units(build.units))
            database = self._save(trained)
        except _Untrained as why:
            if self.policy is ApplyPolicy.ERROR:      # a release pipeline that insists
                self.builds.discard(build)
                raise RetrainError(f"PGO not retrained: {why} (--policy error)") from None
            self.result.pgo = f"{why}: built with the shipped profile"
            self.show(f"PGO not retrained: {self.result.pgo}")
            self.builds.discard(build)
            return None, self.db_path
        self.result.pgo = "trained"
        return reference, database

    def _cspgo(self, trained: str) -> str:
        """The CS-PGO build (the database `trained` with the profile build 1 trained,
        instrumented after inlining) and its training run: the database build 3 uses,
        the fresh profile with its context-sensitive part, or, when any of it fails,
        the shipped one (a profile without its context-sensitive part would give the
        build less than the database does)."""
        build = self.builds.run(TrainPhase.CS_INSTRUMENT, trained,
                            "building instrumented after inlining (CS-PGO)")
        try:
            if build.status != 0:
                raise _Untrained(f"the CS-PGO instrumented build failed (exit {build.status})")
            if self.binary not in build.outputs:
                raise _Untrained(self._not_linked(build.linked))
            profile = self._train_pgo(base=os.path.join(self.folder, TRAINED_PROFILE))[1]
            self.builds.discard(build)
            db = flags_db.load(trained)
            return self._save(db.replace(profile=ProfileRef(TRAINED_PROFILE,
                                                            hash_file(profile))))
        except _Untrained as why:
            self.builds.discard(build)
            if self.policy is ApplyPolicy.ERROR:
                raise RetrainError(f"CS-PGO not retrained: {why} (--policy error)") from None
            self.result.pgo = f"CS-PGO: {why}: built with the shipped profile"
            self.show(f"PGO not retrained: {self.result.pgo}")
            return self.db_path

    def _not_linked(self, linked: list[str]) -> str:
        """Why a build that built other things did not link the target (`linked`: the
        binaries it linked, when known)."""
        others = ", ".join(os.path.relpath(path, self.root) for path in linked[:3]) + (
            ", ..." if len(linked) > 3 else "")
        did = f"linked {others} but not" if others else "did not link"
        return (f"the build {did} {self.target.output}, "
                f"the binary {os.path.basename(self.db_path)} was tuned for (renamed or "
                "removed since tuning? tune again; up to date? run your clean step first)")

    def _with_new_units(self, today: set[str]):
        """The target's stages for today's source: a unit added since tuning gets them
        too (LTO's flags; the database lists only the units tune measured).  Units gone
        since stay listed: naming a source that is not built does nothing."""
        new = sorted(today - set(self.target.units))
        stages = tuple(s for s in self.target.stages if s != PGO)
        if new and stage_flags(stages, self.target.opt_level).unit_flags:
            self.show(f"the stages' flags also go to {counted(len(new), 'source')} new "
                      f"since tuning: {', '.join(new[:5])}"
                      + (", ..." if len(new) > 5 else ""))
        return self.target.replace(units=tuple(sorted(set(self.target.units) | today)))

    def _train_pgo(self, base: str = "") -> tuple[Reference, str]:
        """The training run on the instrumented target, its raw profiles merged (with
        the indexed profile `base`: CS-PGO's first part) into TRAINED_PROFILE."""
        profdata = toolchain.find_tool("llvm-profdata")
        if profdata is None:
            raise _Untrained(toolchain.not_found("llvm-profdata"))
        started = time.time()
        with tempfile.TemporaryDirectory(prefix="autopass-train-") as scratch:
            raws = os.path.join(scratch, "raw")
            env = {"LLVM_PROFILE_FILE": os.path.join(raws, "%p.profraw")}
            if self.bench.run.train:          # training.run says what it runs
                try:
                    training.run(self.bench, self.binary, self.bench.env(env), self.show)
                except training.TrainingError as error:
                    raise _Untrained(str(error)) from None
                env = {"LLVM_PROFILE_FILE": os.path.join(scratch, "check-%p.profraw")}
            else:
                self.show("training: running the benchmark on the instrumented build")
            run = self._run(self.binary, env, INSTRUMENTED_SLOWDOWN)
            if run.outcome != Outcome.OK:
                raise _Untrained(f"the training run failed ({run.detail}){last_words(run)}")
            found = sorted(os.listdir(raws)) if os.path.isdir(raws) else []
            if not found:
                raise _Untrained("the training run wrote no profile: does it exit normally?")
            profile = os.path.join(self.folder, TRAINED_PROFILE)
            inputs = [os.path.join(raws, f) for f in found]
            if base:          # the output's name: read from a copy
                inputs.append(shutil.copy(base, os.path.join(scratch, "base.profdata")))
            self.show(f"training: merging {counted(len(found), 'raw profile')}")
            if self.held_to is None:     # before the first round writes over it
                self.held_to = self._held_to(profile, self.db.profile)
            try:
                left_out = merge_profraw(profdata, inputs, profile, scratch,
                                         self.held_to or None)
            except SteadyError as error:
                raise _Untrained(str(error)) from None
            except OSError as error:    # the last profile trained is kept, whole
                raise _Untrained(_cannot_write(profile, error)) from None
            if left_out:
                self.result.notes.append("PGO " + left_out_note(left_out, len(found)))
        self.result.seconds["training"] = time.time() - started
        return _reference(run), profile

    # ---- BOLT --------------------------------------------------------------------------
    def _bolt(self, reference: Reference | None, database: str) -> None:
        """The linked target (and the libraries BOLT rewrote in tuning) trained and
        rewritten in place (outputs/bolt_retrain.py); on any failure as linked."""
        started = time.time()
        step = BoltRetrain(self.target, self.root, self.folder, self.bench, self.show,
                           self.bolt_references)
        with tempfile.TemporaryDirectory(prefix="autopass-bolt-train-") as scratch:
            try:
                if reference is None:
                    reference = _reference(self._run(self.binary, {}, 1))
                trained = step.run(scratch, lambda: self._differs(reference))
            except BoltUntrained as error:
                self._bolt_not_trained(f"{error}: {self.target.output} is left as linked")
                return
        self.result.seconds["BOLT"] = time.time() - started
        try:
            self._save(flags_db.load(database).replace(target=trained))
        except _Untrained as why:       # the binary is laid out: only the record is lost
            self.result.bolt = f"{why}; {self.target.output} is laid out by the profile " \
                               "just trained, which is not kept"
            return
        self.result.bolt = "trained"

    def _bolt_not_trained(self, why: str) -> None:
        if self.policy is ApplyPolicy.ERROR:
            raise RetrainError(f"BOLT not retrained: {why} (--policy error)")
        self.result.bolt = why
        self.show(f"BOLT not retrained: {why}")

    # ---- shared ------------------------------------------------------------------------
    def _run(self, binary: str, env: dict[str, str], slowdown: int) -> RunResult:
        return run_once(self.bench, binary, env, self.bench.run.timeout * slowdown)

    def _differs(self, reference: Reference) -> str:
        """"" when the target's benchmark output is the reference's, else how not."""
        run = self._run(self.binary, {}, 1)
        if run.outcome != Outcome.OK:
            return f"does not run the benchmark ({run.detail})"
        why = check_output(self.bench, reference, run)
        return f"changes the benchmark's output ({why})" if why else ""

    def _fallback(self, why: str, build: Build) -> None:
        """Build 2 made a program that fails the check: its outputs deleted and built
        again with the database as shipped (under --policy error: not built again)."""
        if self.policy is ApplyPolicy.ERROR:
            self.builds.discard(build)
            raise RetrainError(f"PGO not retrained: {why} (--policy error)")
        self.show(f"PGO not retrained: {why}; building again with the shipped database")
        self.result.pgo = f"{why}: built with the shipped profile"
        self.builds.discard(build)
        self.result.status = self.builds.run(TrainPhase.NONE, self.db_path,
                                         "rebuilding").status

    def _held_to(self, trained: str, shipped: ProfileRef | None) -> str:
        """The profile a fresh one's counts are held to (steady_counts): the last one
        trained here, else the one the database ships, else none ("").  Copied aside:
        CS-PGO's round holds to it too, after the first round has written over it."""
        from autopass_build.capture.apply.applied_profiles import shipped_file

        found = trained if os.path.isfile(trained) else \
            shipped_file(shipped, self.db_path, "profile", "")[0] if shipped else ""
        if not found:
            return ""
        handle, kept = tempfile.mkstemp(prefix="autopass-held-", suffix=".profdata")
        os.close(handle)
        self.kept_aside.append(kept)
        shutil.copyfile(found, kept)
        return kept

    def _bolt_references(self) -> dict[str, list[tuple[str, str]]]:
        """For each BOLT profile --train writes, the profiles its counts may be held to,
        with the code fingerprint of the binary each was trained on (a BOLT profile
        names branches by offset: it is held only to one of the same binary): the last
        one trained here, then the one the database ships."""
        from autopass_build.capture.apply.applied_profiles import shipped_file

        found: dict[str, list[tuple[str, str]]] = {}
        trained_db = os.path.join(self.folder, TRAINED_DB)
        sources = [(flags_db.load(trained_db), trained_db)] if os.path.isfile(trained_db) \
            else []
        sources.append((self.db, self.db_path))
        for db, path in sources:
            target = db.target
            if target is None:
                continue
            plans = [(TRAINED_BOLT, target.bolt, target.bolt_binary)] + [
                (TRAINED_LIBRARY.format(name=os.path.basename(b.output)), b.profile, b.binary)
                for b in target.bolt_libraries]
            for name, ref, binary in plans:
                file = shipped_file(ref, path, "BOLT profile", "")[0] if ref else ""
                if file:
                    found.setdefault(name, []).append((file, binary))
        return found

    def _save(self, db: FlagsDb) -> str:
        """The trained database written beside the shipped one, whole (flags_db.save);
        _Untrained when it cannot be (a full disk)."""
        path = os.path.join(self.folder, TRAINED_DB)
        try:
            flags_db.save(path, db)
        except OSError as error:
            raise _Untrained(_cannot_write(path, error)) from None
        self.result.database = path
        return path


class _Untrained(Exception):
    """Why a profile could not be trained: the build goes on without it."""


def _reference(run: RunResult) -> Reference:
    return Reference(run.status, run.stdout, run.stderr, run.files, run.stdout_cut)


def said_leftovers(folder: str, show) -> None:
    """What an `apply --train` killed before it deleted its instrumented objects (or
    checked its final build's) left in the tree, deleted before this build, in one line
    (the build makes them again)."""
    count = discard_leftovers(folder)
    if count:
        show(f"deleted {counted(count, 'file')} an interrupted `apply --train` had built "
             "(instrumented, or not yet checked), so this build makes them again")


def _cannot_write(path: str, error: OSError) -> str:
    folder = os.path.dirname(path) or "."
    why = "its disk is full" if disk_full(folder) else (error.strerror or str(error))
    return f"cannot write {os.path.basename(path)} ({why})"
