"""A unit's object under a candidate's flags, from the stored IR.

    unit + flags ──compile (cached by IR, flags, compiler)──▶ object

Objects are compiled from the unit's pre-optimization IR with the unit's own
codegen-relevant flags (optimization, target, debug) plus the candidate's.  Units
whose IR replay does not reproduce the recorded object (see `fidelity.py`) are
recompiled from source instead.  The links that take the objects: relink.py.
"""

from __future__ import annotations

import os

from autopass_build.candidates.candidate import ReplayStats
from autopass_build.candidates.replay_args import (
    codegen_args,
    source_args,
)
from autopass_build.candidates.stages import thin_bitcode
from autopass_build.capture.apply.bitcode import BITCODE
from autopass_build.core import decisions, pgo_profile, proc, toolchain
from autopass_build.core.cpu import this_cpu
from autopass_build.core.files import fail_if_no_room, hash_file, hash_json
from autopass_build.core.flags import replayable_from_ir
from autopass_build.core.names import ENV_REPLAY_CC
from autopass_build.core.outcome import EvaluationError, Outcome
from autopass_build.core.stage_flags import USE
from autopass_build.store.build_records import UnitRecord
from autopass_build.store.index import Store
from autopass_build.store.targets import ObjectIndex

QUIET = ["-w", "-Wno-unused-command-line-argument"]
DEFAULT_COMPILE_TIMEOUT_S = 600.0

Flags = tuple[str, ...]


def _profile_of(flags: Flags) -> str:
    """The PGO profile a compile with `flags` uses ("" none)."""
    return next((f[len(USE):] for f in reversed(flags) if f.startswith(USE)), "")


def _quiet(flags: Flags) -> list[str]:
    """What silences a compile: everything, except what a PGO profile's use says of the
    functions it cannot give data to (counted: `profile_said`)."""
    return (list(pgo_profile.MATCH_WARNINGS) + QUIET[1:]) if _profile_of(flags) else QUIET



class UnitObjects:
    """Each unit's object under given flags, compiled from its stored IR (or its source,
    where replaying the IR does not give the build's object back), cached by what
    decides its bytes."""

    def __init__(self, store: Store, compile_timeout: float = DEFAULT_COMPILE_TIMEOUT_S,
                 compiler_override: str | None = None, trust_fidelity: bool = True):
        """`trust_fidelity=False` replays every unit from IR, whatever `replay --check`
        found (the check itself needs that)."""
        self.store = store
        self.units = {u.id: u for u in store.units()}
        self.by_object = ObjectIndex(list(self.units.values()))
        self.links = {link.output: link for link in store.links()}
        self.from_source = store.units_replayed_from_source() if trust_fidelity else set()
        self.recorded_objects = trust_fidelity    # the baseline takes the build's own
        self.compile_timeout = compile_timeout
        self.compiler_override = compiler_override or os.environ.get(ENV_REPLAY_CC)
        self.stats = ReplayStats()
        self.work = os.path.join(store.dir, "work")
        self.jobs = os.cpu_count() or 1      # compiles at once (_compile_all)
        self._codegen: dict[str, list[str]] = {}  # unit id -> its codegen arguments
        # profile path -> the functions its use warned about, over every compile with
        # it (a cached object says nothing again: the first build of a profile tells)
        self.profile_said: dict[str, pgo_profile.Said] = {}
        self._plugin: tuple[str, str] | None = None   # (pass plugin, its clang): when asked

    # -- objects ------------------------------------------------------------------------
    def codegen_args(self, unit: UnitRecord) -> list[str]:
        if unit.id not in self._codegen:
            self._codegen[unit.id] = codegen_args(unit)
        return self._codegen[unit.id]

    def _compiler(self, unit: UnitRecord) -> str:
        return self.compiler_override or unit.compiler

    def _object_path(self, unit: UnitRecord, flags: Flags, from_source: bool | None
                     ) -> tuple[str, bool]:
        """Where the object of `unit` with `flags` is cached, and whether it is compiled
        from source (see object_for)."""
        if from_source is None:
            from_source = (unit.id in self.from_source
                           or not replayable_from_ir(tuple(flags), unit.opt_level)
                           or (self.recorded_objects and thin_bitcode(unit.argv, flags)))
        key = [unit.ir_hash, unit.source_hash if from_source else "",
               self.codegen_args(unit), list(flags), unit.compiler_id, self._compiler(unit)]
        if any(flag.endswith("=native") for flag in flags):
            # code for the CPU that compiles it: a cluster node of another CPU, sharing
            # this cache, makes another object of the same flags
            key.append([this_cpu().model, *this_cpu().isa])
        return self.store.blob_path("replay", hash_json(key), ".o"), from_source

    def has_object(self, unit: UnitRecord, flags: Flags = ()) -> bool:
        return os.path.exists(self._object_path(unit, flags, None)[0]) or \
            self._recorded_object(unit, flags) is not None

    def as_built(self, unit: UnitRecord, flags: Flags) -> bool:
        """Whether `unit` with `flags` is the recorded build's own object: no flags of
        ours, the recorded compiler, and not while judging the IR replay itself (`replay
        --check`).  The baseline is then the build itself: a large application's first
        replay compiled every unit again for nothing (GEOS: 389 compiles), and under
        ThinLTO a compile of the IR is not the build's object (it keeps the names of
        local values, which change the module's hash, hence the names of its promoted
        functions and the linked code: glslang's BOLT profile did not fit apply's build)."""
        return not flags and self.recorded_objects and unit.compiler == self._compiler(unit)

    def _recorded_object(self, unit: UnitRecord, flags: Flags) -> str | None:
        """The object the recorded build made for `unit` (see _as_built), where the store
        kept it (an object given to a link; an archive's members are in its blob)."""
        if not self.as_built(unit, flags) or not unit.object_hash or \
                not self.store.has_blob("obj", unit.object_hash, ".o"):
            return None
        return self.store.blob_file("obj", unit.object_hash, ".o")

    def object_for(self, unit: UnitRecord, flags: Flags = (),
                   from_source: bool | None = None) -> str:
        """The object of `unit` compiled with its own flags plus `flags` (cached).

        From IR where that equals a compile of the source with `flags` appended (what
        apply mode does), else from source; `from_source=True` forces the latter."""
        path, from_source = self._object_path(unit, flags, from_source)
        recorded = self._recorded_object(unit, flags)   # first: a replay cached by `replay
        if recorded is not None:                        # --check` is not the build's
            self.stats.cached += 1
            return recorded
        if os.path.exists(path):
            self.stats.cached += 1
            return path
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = self.store.spool.new_tmp_path(".o")
        try:
            if from_source:
                self._compile_source(unit, flags, tmp)
                self.stats.from_source += 1
            else:
                self._compile_ir(unit, flags, tmp)
                self.stats.compiled += 1
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        return path

    def code_object_for(self, unit: UnitRecord, flags: Flags = ()) -> str:
        """`unit`'s object with machine code to read (its functions, their sizes, its
        code's shape): `object_for`'s, or where that is LLVM bitcode (a build that is
        LTO already, -flto=thin without fat objects), the same compile out of LTO."""
        path = self.object_for(unit, flags)
        with open(path, "rb") as handle:
            if handle.read(4) != BITCODE:
                return path
        return self.object_for(unit, tuple(flags) + ("-fno-lto",))

    def _compile_ir(self, unit: UnitRecord, flags: Flags, output: str) -> None:
        try:
            with self.store.blob_copy("ir", unit.ir_hash, ".bc") as ir:
                argv = ([self._compiler(unit)] + self.codegen_args(unit)
                        + self._with_plugin(unit, flags) + _quiet(flags)
                        + ["-c", "-x", "ir", ir, "-o", output])
                self._heard(argv, self.run_compiler(argv, unit.cwd, unit))
        except FileNotFoundError as lost:
            raise EvaluationError(Outcome.COMPILE_FAIL,
                                  f"{unit.source_rel}: the store lost its recorded IR "
                                  f"({lost}): record the build again") from None

    def _compile_source(self, unit: UnitRecord, flags: Flags, output: str) -> None:
        if not os.path.isfile(unit.source) or hash_file(unit.source) != unit.source_hash:
            raise EvaluationError(Outcome.COMPILE_FAIL,
                                  f"{unit.source_rel} changed since it was recorded and its "
                                  "IR does not replay exactly: record the build again")
        argv = ([self._compiler(unit)] + source_args(unit) + self._with_plugin(unit, flags)
                + _quiet(flags) + ["-c", "-o", output])
        self._heard(argv, self.run_compiler(argv, unit.cwd, unit))

    def _with_plugin(self, unit: UnitRecord, flags: Flags) -> list[str]:
        """`flags`, and what loads autopass's pass plugin when they carry decisions
        (core/decisions.py); an EvaluationError when it cannot be loaded."""
        if not any(f.startswith(decisions.OPTION) for f in flags):
            return list(flags)
        return list(flags) + list(decisions.plugin_flags(self.plugin_for(unit)))

    def plugin_for(self, unit: UnitRecord) -> str:
        """autopass's pass plugin, for `unit`'s compiler (built once: build_env), or an
        EvaluationError saying why it cannot be had."""
        if self._plugin is None:
            from autopass_build.capture.build_env import wrapper_dir
            from autopass_build.capture.native_builds import pass_plugin

            self._plugin = pass_plugin(wrapper_dir(self.store.dir)) or ("", "")
        plugin, built_for = self._plugin
        if not plugin or os.path.realpath(self._compiler(unit)) != built_for:
            raise EvaluationError(Outcome.COMPILE_FAIL, (
                f"{unit.source_rel}: decisions carried in the IR need autopass's pass plugin"
                + (f", built for {built_for}, not {self._compiler(unit)}" if plugin else
                   ", which cannot be built here (llvm-config and LLVM's headers: sudo "
                   f"apt-get install llvm-{toolchain.DEFAULT_LLVM_VERSION}-dev)")))
        return plugin

    def _heard(self, argv: list[str], done: proc.Captured) -> None:
        """What a compile with a PGO profile said of the functions it dropped data of."""
        profile = _profile_of(tuple(argv))
        if profile:
            self.profile_said.setdefault(profile, pgo_profile.Said(
                pgo_profile.lto_compile(argv))).read(done.stderr)

    def run_compiler(self, argv: list[str], cwd: str, unit: UnitRecord) -> proc.Captured:
        """Run a compiler on `unit`; a hang, a crash or an error is an EvaluationError
        with its outcome."""
        done = proc.run_captured(argv, cwd, proc.clean_env(dict(os.environ)),
                                 self.compile_timeout,
                                 fixed_layout=proc.wants_fixed_layout(argv))
        if done.timed_out:
            raise EvaluationError(Outcome.COMPILE_TIMEOUT, f"compiling {unit.source_rel} "
                                  f"took over {self.compile_timeout:g}s")
        if done.status < 0:
            raise EvaluationError(Outcome.COMPILE_CRASH, f"the compiler died (signal "
                                  f"{-done.status}) on {unit.source_rel}")
        if done.status != 0:
            said = done.stderr.decode("utf-8", "replace")
            fail_if_no_room(said, self.work)
            message = said.strip().splitlines()
            raise EvaluationError(Outcome.COMPILE_FAIL, f"{unit.source_rel}: "
                                  + (message[0] if message else f"exit {done.status}"))
        return done
