"""The builds of `apply --train`: the user's own command run in apply mode, once per
phase (instrumented, CS-instrumented, final, or plain), its compiles through ccache
where that makes the instrumented build incremental (capture/apply/train_cache.py),
what each wrote and linked read back from the wrapper's tally."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field

from autopass_build.capture.apply import tally, train_cache
from autopass_build.capture.build_env import apply_environment
from autopass_build.capture.server import serving
from autopass_build.core import proc
from autopass_build.core.apply_terms import ApplyPolicy, TrainPhase
from autopass_build.core.names import ENV_TRAIN_CACHE, ENV_TRAIN_CCACHE, ENV_TRAIN_PHASE
from autopass_build.outputs.todays_units import target_units

# In the database's folder while objects the run has not vouched for are in the tree (an
# instrumented build's; the final build's until its program passed the check and BOLT):
# each phase's tally, which names them.  Left by a run that was stopped or killed (kill
# -9, a power cut), it tells the next `apply` or `apply --train` what to delete before it
# builds, so no later build links an object from an interrupted one.
PENDING = ".autopass-train"


def delete_outputs(paths: list[str]) -> None:
    """Files a build wrote, deleted so that the build system makes them again."""
    for path in paths:
        try:
            os.unlink(path)
        except OSError:
            pass        # gone already (a configure probe's), or not a file we made


def discard_leftovers(folder: str) -> int:
    """The outputs of builds an `apply --train` did not live to delete or vouch for
    (their tallies wait in `folder`/PENDING): deleted, with the tallies; how many."""
    pending = os.path.join(folder, PENDING)
    if not os.path.isdir(pending):
        return 0
    outputs = [path for phase in sorted(os.listdir(pending))
               for path in tally.begun(os.path.join(pending, phase))]
    delete_outputs(outputs)
    shutil.rmtree(pending, ignore_errors=True)
    return len(outputs)


class Stopped(Exception):
    """A build was stopped by a signal; `status` is its exit status (128 + n)."""

    def __init__(self, status: int):
        super().__init__(f"the build was stopped (exit {status})")
        self.status = status


@dataclass
class Retrained:
    status: int                   # the build's exit status (its last build's)
    pgo: str = ""                 # "trained", why the shipped profile was used, "" not asked
    bolt: str = ""                # "trained", why not, "" not asked
    database: str = ""            # the database the build was made with, when trained
    notes: list[str] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)   # builds and training
    # per build ("instrument", "final"): (compiles ccache answered, compiles), and why
    # the builds had no cache when they had none
    cached: dict[str, tuple[int, int]] = field(default_factory=dict)
    uncached: str = ""


@dataclass
class Build:
    status: int
    outputs: list[str]            # what its compiles and links wrote (absolute)
    units: set[str] = field(default_factory=set)   # the target's sources (instrumented)
    linked: list[str] = field(default_factory=list)  # what it linked (instrumented)
    compiled: int = 0             # compiles of sources that went through autopass
    pending: str = ""             # an instrumented build's tally, until `discard`


class TrainBuilds:
    """The builds of one `apply --train`, their times and cache hits written to `result`."""

    def __init__(self, command: list[str], root: str, folder: str, policy: ApplyPolicy,
                 binary: str, result: "Retrained", show, cached: bool) -> None:
        """`folder`: the database's, where an instrumented build's tally waits."""
        self.command, self.root, self.policy, self.binary = command, root, policy, binary
        self.folder = folder
        self.result, self.show = result, show
        self.cache_env = self._cache_env() if cached else {}

    def run(self, phase: TrainPhase, database: str, what: str) -> Build:
        """The user's build in apply mode, as `phase` of `apply --train` wants it (NONE:
        plain), with `database`; Stopped when a signal stopped it.  An instrumented
        build's tally stays in the database's folder (PENDING) until `discard` deletes
        what it built: whatever stops this run, no later build takes its objects; the
        final build's too, until `settle` says its program passed."""
        started = time.time()
        tallied = phase is not TrainPhase.NONE
        work = self._pending(phase) if tallied else \
            tempfile.mkdtemp(prefix="autopass-train-build-")
        self.show(what)         # after the tally's folder is there: a kill on the line finds it
        try:
            env = apply_environment(self.root, database, self.policy, work)
            cached = phase is not TrainPhase.NONE and bool(self.cache_env)
            if phase is not TrainPhase.NONE:
                env[ENV_TRAIN_PHASE] = phase.value
            if cached:
                env.update(self.cache_env)
            # the build's own runs of an instrumented program (configure checks, tests)
            # write their raw profiles there, not into the tree
            env["LLVM_PROFILE_FILE"] = os.path.join(work, "build-%p.profraw")
            with serving(env):
                status = proc.run_build(self.command, env)
            build = Build(status, tally.outputs(work), compiled=tally.compiles_seen(work),
                          pending=work if tallied else "")
            if phase is TrainPhase.INSTRUMENT:
                build.units = target_units(work, self.binary, self.root)
                build.linked = sorted(tally.linked(work))
            if cached:
                hit, missed = train_cache.hits(work)
                self.result.cached[phase.value] = (hit, hit + missed)
        finally:
            if not tallied:
                shutil.rmtree(work, ignore_errors=True)
        if status > 128:        # Ctrl-C, a CI timeout: no second build after it
            raise Stopped(status)
        key = f"build ({phase.value})" if phase is not TrainPhase.NONE else "build"
        self.result.seconds[key] = self.result.seconds.get(key, 0.0) + time.time() - started
        return build

    def _pending(self, phase: TrainPhase) -> str:
        folder = os.path.join(self.folder, PENDING, phase.value)
        shutil.rmtree(folder, ignore_errors=True)
        os.makedirs(folder)
        return folder

    def discard(self, build: Build) -> None:
        """What an instrumented `build` wrote, deleted so the build system makes it
        again, and its tally with it (those its commands set out to write too)."""
        delete_outputs(tally.begun(build.pending) if build.pending else build.outputs)
        if build.pending:
            shutil.rmtree(build.pending, ignore_errors=True)

    def settle(self) -> None:
        """The final build's program passed its check (and BOLT's): its outputs are the
        build's now, no longer to delete when the run stops."""
        shutil.rmtree(os.path.join(self.folder, PENDING, TrainPhase.FINAL.value),
                      ignore_errors=True)

    def discard_pending(self) -> int:
        """Every tallied build's outputs not discarded or settled yet (a signal, an
        error between the build and its training or its check): deleted; how many."""
        return discard_leftovers(self.folder)

    def _cache_env(self) -> dict[str, str]:
        """What makes the two builds' compiles go through ccache (capture/
        train_cache.py): nothing when it is turned off, not installed, or its folder
        cannot be written (each said in the summary)."""
        folder = train_cache.folder(dict(os.environ))
        if not folder:
            return {}
        ccache = shutil.which("ccache")
        if ccache is None:
            self.result.uncached = "every unit compiled anew (install ccache to make " \
                                   "the instrumented build incremental)"
            return {}
        try:
            os.makedirs(folder, exist_ok=True)
            if not os.access(folder, os.W_OK):
                raise PermissionError(folder)
        except OSError:
            self.result.uncached = f"no cache: cannot write {folder} (set {ENV_TRAIN_CACHE})"
            return {}
        return {ENV_TRAIN_CCACHE: ccache, ENV_TRAIN_CACHE: folder}
