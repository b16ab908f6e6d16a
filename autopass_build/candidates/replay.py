"""Replay: any recorded binary, rebuilt with per-unit flags, from the stored IR.

    unit + flags ──compile (cached by IR, flags, compiler)──▶ object
    archive      ──members replaced in the original order──▶ archive
    link         ──the recorded command, inputs swapped────▶ candidate binary

Objects are compiled from the unit's pre-optimization IR with the unit's own
codegen-relevant flags (optimization, target, debug) plus the candidate's.  Units
whose IR replay does not reproduce the recorded object (see `fidelity.py`) are
recompiled from source instead.  Candidate binaries land in `.autopass/work/<key>/`;
shared libraries the binary links from the project are rebuilt beside it and found
first through LD_LIBRARY_PATH.
"""

from __future__ import annotations

import os
import shutil

from autopass_build.candidates.candidate import Candidate, ReplayStats
from autopass_build.candidates.replay_args import (
    NOT_PIC,
    NOT_PIC_SAID,
    codegen_args,
    in_tree,
    linked_into_tree,
    source_args,
    thinlto_cache,
    thinlto_cache_folder,
    tree_files,
)
from autopass_build.candidates.stages import thin_bitcode
from autopass_build.capture.apply.bitcode import BITCODE
from autopass_build.capture.compiler_args import Invocation, classify
from autopass_build.capture.option_table import (
    R_DEPENDENCY,
    R_LINK,
    R_LINK_INPUT,
    R_OUTPUT,
    R_SIDE_OUTPUT,
    R_SOURCE,
    STATIC,
)
from autopass_build.capture.record import archive
from autopass_build.capture.record.recorder import library_dirs, resolve_library
from autopass_build.core import decisions, pgo_profile, proc, toolchain
from autopass_build.core.files import hash_file, hash_json
from autopass_build.core.flags import replayable_from_ir
from autopass_build.core.names import ENV_REPLAY_CC
from autopass_build.core.outcome import EvaluationError, Outcome
from autopass_build.core.stage_flags import USE, without_strip_all
from autopass_build.measuring.binaries import alias_soname
from autopass_build.store.build_records import LinkRecord, UnitRecord
from autopass_build.store.index import Store
from autopass_build.store.targets import ObjectIndex, prebuilt_library_folders

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



class Replayer:
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
        key = hash_json([unit.ir_hash, unit.source_hash if from_source else "",
                         self.codegen_args(unit), list(flags), unit.compiler_id,
                         self._compiler(unit)])
        return self.store.blob_path("replay", key, ".o"), from_source

    def has_object(self, unit: UnitRecord, flags: Flags = ()) -> bool:
        return os.path.exists(self._object_path(unit, flags, None)[0]) or \
            self._recorded_object(unit, flags) is not None

    def _as_built(self, unit: UnitRecord, flags: Flags) -> bool:
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
        if not self._as_built(unit, flags) or not unit.object_hash or \
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
            from autopass_build.capture.build_env import pass_plugin, wrapper_dir

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
            message = done.stderr.decode("utf-8", "replace").strip().splitlines()
            raise EvaluationError(Outcome.COMPILE_FAIL, f"{unit.source_rel}: "
                                  + (message[0] if message else f"exit {done.status}"))
        return done

    # -- archives -----------------------------------------------------------------------
    def _archive_for(self, digest: str, flags_by_unit: dict[str, Flags], inputs: str,
                     linked_as: str) -> str:
        """The archive `digest` with each unit's member compiled with its flags, at the
        path the link gave it (`linked_as`) under `inputs` (see replay_args.in_tree)."""
        record = self.store.archive(digest)
        if record is None or not self.store.has_blob("ar", digest, ".a"):
            raise EvaluationError(Outcome.LINK_FAIL, f"archive {digest[:12]} was not kept "
                                  "by the recording: record the build again")
        original = self.store.blob_file("ar", digest, ".a")
        try:
            kept = archive.read_members(original)
        except (OSError, archive.ArchiveFormatError) as error:   # a thin one kept as it was
            raise EvaluationError(Outcome.LINK_FAIL, f"{os.path.basename(record.path)} cannot "
                                  f"be read from the store ({error}): record the build "
                                  "again") from None
        member_files = []
        staging = os.path.join(inputs, "ar-" + digest[:12])
        for index, ((name, member_hash), member) in enumerate(zip(record.members, kept)):
            unit = self.by_object.find(member_hash)
            flags = flags_by_unit.get(unit.id, ()) if unit else ()
            if unit and not self._as_built(unit, flags):
                data = open(self.object_for(unit, flags), "rb").read()
            else:
                data = member.data
                self.stats.cached += bool(unit)
            member_path = os.path.join(staging, str(index), name)
            os.makedirs(os.path.dirname(member_path), exist_ok=True)
            with open(member_path, "wb") as handle:
                handle.write(data)
            member_files.append(member_path)
        # At its own path: busybox links 56 archives, every one named lib.a or
        # built-in.o, which overwrote each other in one folder (the link lost `main`).
        out = in_tree(inputs, linked_as)
        ar = toolchain.find_tool("llvm-ar")
        if ar is None:
            raise EvaluationError(Outcome.LINK_FAIL, toolchain.not_found("llvm-ar"))
        done = proc.run_captured([ar, "qcsD", out] + member_files, inputs)
        shutil.rmtree(staging, ignore_errors=True)
        if done.status != 0:
            raise EvaluationError(Outcome.LINK_FAIL, f"llvm-ar failed: {done.stderr[:300]!r}")
        return out

    # -- links --------------------------------------------------------------------------
    # In the key of a replayed binary: a change to how links are replayed must not reuse
    # binaries made the old way (2: the symbol table kept where the link said -s; 3: each
    # archive in a folder of its own; 4: the baseline's archive members the build's own,
    # ThinLTO bitcode compiled from source, every input at its own path under tree/).
    LINK_RULES = 4

    def build(self, target: str, flags_by_unit: dict[str, Flags] | None = None,
              link_flags: Flags = ()) -> Candidate:
        """Rebuild the recorded binary `target` (absolute path) with per-unit flags;
        `link_flags` go to every relink (PGO instrumentation needs its runtime)."""
        flags_by_unit = {k: tuple(v) for k, v in (flags_by_unit or {}).items() if v}
        link = self.links.get(target)
        if link is None:
            raise EvaluationError(Outcome.LINK_FAIL, f"no recorded link produces {target}")
        key = hash_json([self.LINK_RULES, target,
                         sorted((k, list(v)) for k, v in flags_by_unit.items()),
                         link.output_hash, self.compiler_override or "",
                         list(link_flags), self._tree_files(link)])[:20]
        folder = os.path.join(self.work, key)
        os.makedirs(folder, exist_ok=True)
        self._compile_all(self._units_linked(link), flags_by_unit)
        binary = self._link(link, flags_by_unit, folder, tuple(link_flags))
        path = self._library_path(link, folder)
        return Candidate(binary, folder, {"LD_LIBRARY_PATH": path} if path else {})

    def _library_path(self, link: LinkRecord, folder: str) -> str:
        """Where the candidate finds its shared libraries: the rebuilt ones in `folder`
        first, then the folders of the project's libraries autopass did not see built
        (a prebuilt .so in the tree), which the binary found through an rpath like
        $ORIGIN that does not hold from `folder`."""
        rebuilt = self._shared_inputs(link)
        linked = [i.path for made in [link] + rebuilt for i in made.inputs if i.kind == "shared"]
        prebuilt = prebuilt_library_folders(linked, self.links,
                                            os.path.dirname(os.path.realpath(self.store.dir)))
        return os.pathsep.join(([folder] if rebuilt else []) + prebuilt)

    def _units_linked(self, link: LinkRecord) -> list[UnitRecord]:
        """Every unit `link` takes, its project libraries' included: compiled in one go
        (`_compile_all`) before the links read their objects one by one."""
        found: dict[str, UnitRecord] = {}
        for item in link.inputs:
            if item.kind == "unit" and item.path in self.units:
                found[item.path] = self.units[item.path]
            elif item.kind == "object":
                unit = self.by_object.find(item.hash, item.path)
                if unit is not None:
                    found[unit.id] = unit
            elif item.kind == "archive":
                record = self.store.archive(item.hash or "")
                for _, member_hash in (record.members if record else []):
                    unit = self.by_object.find(member_hash)
                    if unit is not None:
                        found[unit.id] = unit
        for shared in self._shared_inputs(link):
            found.update((u.id, u) for u in self._units_linked(shared))
        return list(found.values())

    def _compile_all(self, units: list[UnitRecord], flags_by_unit: dict[str, Flags]) -> None:
        """The objects of `units` with their flags, compiled `jobs` at a time: a clean
        build of a 390-unit application took its compiles one after the other."""
        missing = [u for u in units if not self._as_built(u, flags_by_unit.get(u.id, ()))
                   and not self.has_object(u, flags_by_unit.get(u.id, ()))]
        if len(missing) < 2 or self.jobs < 2:
            return                      # the link compiles them as it goes
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(self.jobs) as pool:
            for done in [pool.submit(self.object_for, u, flags_by_unit.get(u.id, ()))
                         for u in missing]:
                done.result()           # the first failure, as a serial build meets it

    def _tree_files(self, link: LinkRecord) -> list[str]:
        """The hashes of the files the link reads from the project tree besides its
        inputs, its shared inputs' links included (replay_args.tree_files)."""
        root = os.path.dirname(os.path.realpath(self.store.dir))
        return tree_files(link, root) + [h for shared in self._shared_inputs(link)
                                         for h in self._tree_files(shared)]

    def _link_of_shared(self, path: str) -> LinkRecord | None:
        """The recorded link that made a shared library input (libtool links the
        versioned file, libpng16.so.16.39.0, and passes a symlink to it)."""
        return self.links.get(path) or self.links.get(os.path.realpath(path))

    def _shared_inputs(self, link: LinkRecord) -> list[LinkRecord]:
        found = [self._link_of_shared(i.path) for i in link.inputs if i.kind == "shared"]
        return [f for f in found if f is not None]

    def _link(self, link: LinkRecord, flags_by_unit: dict[str, Flags], folder: str,
              link_flags: Flags) -> str:
        out = os.path.join(folder, os.path.basename(link.output))
        for shared in self._shared_inputs(link):
            self._rebuilt_shared(shared, flags_by_unit, folder, link_flags)
        if os.path.exists(out):
            return out  # same target, same flags: already built (renamed into place last)
        inputs = os.path.join(folder, "tree")     # see replay_args.in_tree; gone after the link
        try:
            argv = ([self._link_compiler(link)]
                    + self._link_args(link, flags_by_unit, inputs, out) + list(link_flags))
            argv += thinlto_cache(argv, thinlto_cache_folder(self.work, self.LINK_RULES))
            tmp_out = out + ".tmp"
            argv[argv.index(out)] = tmp_out
            done = proc.run_captured(argv + QUIET, link.cwd,
                                     proc.clean_env(dict(os.environ)), self.compile_timeout)
        finally:
            shutil.rmtree(inputs, ignore_errors=True)
        if done.timed_out or done.status != 0:
            said = done.stderr.decode("utf-8", "replace")[:500]
            if NOT_PIC in done.stderr:
                said = f"{NOT_PIC_SAID}; {said}"
            raise EvaluationError(Outcome.LINK_FAIL, f"relinking {os.path.basename(out)} "
                                  f"failed: {said}")
        os.replace(tmp_out, out)
        self.stats.links += 1
        return out

    def _link_compiler(self, link: LinkRecord) -> str:
        return self.compiler_override or link.compiler

    def _rebuilt_shared(self, shared: LinkRecord, flags_by_unit: dict[str, Flags],
                        folder: str, link_flags: Flags) -> None:
        alias_soname(self._link(shared, flags_by_unit, folder, link_flags))

    def _link_args(self, link: LinkRecord, flags_by_unit: dict[str, Flags], inputs: str,
                   out: str) -> list[str]:
        """The recorded link's arguments, its inputs replaced: objects and archives at
        their own paths under `inputs`, the project's shared libraries rebuilt beside
        `out`."""
        folder = os.path.dirname(out)
        parsed = classify(link.argv, link.cwd)
        if not isinstance(parsed, Invocation):  # pragma: no cover - recorded links parse
            raise EvaluationError(Outcome.LINK_FAIL, f"cannot re-read the link of {out}")
        by_path = {i.path: i for i in link.inputs if i.kind != "unit"}
        units_here = {self.units[i.path].source: self.units[i.path] for i in link.inputs
                      if i.kind == "unit" and i.path in self.units}
        lib_dirs = library_dirs(parsed, link.cwd)
        static = any(t in STATIC for t in parsed.flag_tokens(R_LINK))
        args = ["-L" + folder] if self._shared_inputs(link) else []
        for arg in parsed.args:
            token = arg.tokens[-1]
            absolute = os.path.normpath(os.path.join(link.cwd, token))
            if arg.role == R_OUTPUT:
                args += ["-o", out]
            elif arg.role in (R_DEPENDENCY, R_SIDE_OUTPUT):
                continue
            elif arg.role == R_SOURCE and absolute in units_here:
                unit = units_here[absolute]
                args += ["-x", "none", self.object_for(unit, flags_by_unit.get(unit.id, ()))]
            elif arg.role == R_LINK_INPUT and absolute in by_path:
                args.append(self._replaced_input(by_path[absolute], flags_by_unit, inputs,
                                                 folder))
            elif arg.role == R_LINK and arg.tokens[0].startswith("-l"):
                args += self._replaced_library(arg.tokens, lib_dirs, static, by_path,
                                               flags_by_unit, inputs, folder)
            else:   # symbols kept: perf, attribution and BOLT read them (STRIP_ALL)
                args.extend(without_strip_all(arg.tokens))
        return args

    def _replaced_library(self, tokens: tuple[str, ...], lib_dirs: list[str], static: bool,
                          by_path: dict, flags_by_unit: dict[str, Flags], inputs: str,
                          folder: str) -> list[str]:
        name = tokens[1] if tokens[0] == "-l" else tokens[0][2:]
        found = resolve_library(name, lib_dirs, static)
        if found and found in by_path and by_path[found].kind == "archive":
            return [self._replaced_input(by_path[found], flags_by_unit, inputs, folder)]
        return list(tokens)  # shared: found first through -L<folder>

    def _replaced_input(self, item, flags_by_unit: dict[str, Flags], inputs: str,
                        folder: str) -> str:
        """`item` for the replayed link: an object or archive at its own path under
        `inputs`, a project library as rebuilt in `folder`."""
        if item.kind == "archive":
            return self._archive_for(item.hash, flags_by_unit, inputs, item.path)
        if item.kind == "shared":
            rebuilt = self._link_of_shared(item.path)
            return os.path.join(folder, os.path.basename(rebuilt.output)) if rebuilt \
                else item.path
        unit = self.by_object.find(item.hash, item.path)
        if unit is not None:
            made = self.object_for(unit, flags_by_unit.get(unit.id, ()))
        elif item.hash and self.store.has_blob("obj", item.hash, ".o"):
            made = self.store.blob_file("obj", item.hash, ".o")
        else:
            raise EvaluationError(Outcome.LINK_FAIL, f"{item.path} was not kept by the "
                                  "recording: record the build again")
        return linked_into_tree(made, in_tree(inputs, item.path))

