"""Relinking a recorded binary with replayed objects: archives rebuilt with their
members replaced in the original order, the project's shared libraries relinked beside
the binary, and the recorded link command run with its inputs swapped (replay.py makes
the objects).  Each input lands at its own path under the candidate's tree/ folder, as
the link named it (replay_args.in_tree)."""

from __future__ import annotations

import os
import shutil

from autopass_build.candidates.candidate import Candidate
from autopass_build.candidates.replay_args import (
    NOT_PIC,
    NOT_PIC_SAID,
    in_tree,
    linked_into_tree,
    thinlto_cache,
    thinlto_cache_folder,
    tree_files,
)
from autopass_build.candidates.unit_objects import QUIET, Flags, UnitObjects
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
from autopass_build.core import proc, toolchain
from autopass_build.core.files import fail_if_no_room, hash_json
from autopass_build.core.outcome import EvaluationError, Outcome
from autopass_build.core.stage_flags import without_strip_all
from autopass_build.measuring.binaries import alias_soname
from autopass_build.store.build_records import LinkRecord, UnitRecord
from autopass_build.store.targets import prebuilt_library_folders

# In the key of a replayed binary: a change to how links are replayed must not reuse
# binaries made the old way (2: the symbol table kept where the link said -s; 3: each
# archive in a folder of its own; 4: the baseline's archive members the build's own,
# ThinLTO bitcode compiled from source, every input at its own path under tree/).
LINK_RULES = 4


class Relinker:
    """The links of one candidate, over the objects `replayer` makes."""

    def __init__(self, replayer: UnitObjects) -> None:
        self.replayer = replayer

    # -- archives -----------------------------------------------------------------------
    def _archive_for(self, digest: str, flags_by_unit: dict[str, Flags], inputs: str,
                     linked_as: str) -> str:
        """The archive `digest` with each unit's member compiled with its flags, at the
        path the link gave it (`linked_as`) under `inputs` (see replay_args.in_tree)."""
        record = self.replayer.store.archive(digest)
        if record is None or not self.replayer.store.has_blob("ar", digest, ".a"):
            raise EvaluationError(Outcome.LINK_FAIL, f"archive {digest[:12]} was not kept "
                                  "by the recording: record the build again")
        original = self.replayer.store.blob_file("ar", digest, ".a")
        try:
            kept = archive.read_members(original)
        except (OSError, archive.ArchiveFormatError) as error:   # a thin one kept as it was
            raise EvaluationError(Outcome.LINK_FAIL, f"{os.path.basename(record.path)} cannot "
                                  f"be read from the store ({error}): record the build "
                                  "again") from None
        member_files = []
        staging = os.path.join(inputs, "ar-" + digest[:12])
        for index, ((name, member_hash), member) in enumerate(zip(record.members, kept)):
            unit = self.replayer.by_object.find(member_hash)
            flags = flags_by_unit.get(unit.id, ()) if unit else ()
            if unit and not self.replayer.as_built(unit, flags):
                data = open(self.replayer.object_for(unit, flags), "rb").read()
            else:
                data = member.data
                self.replayer.stats.cached += bool(unit)
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
    def build(self, target: str, flags_by_unit: dict[str, Flags] | None = None,
              link_flags: Flags = ()) -> Candidate:
        """Rebuild the recorded binary `target` (absolute path) with per-unit flags;
        `link_flags` go to every relink (PGO instrumentation needs its runtime)."""
        flags_by_unit = {k: tuple(v) for k, v in (flags_by_unit or {}).items() if v}
        link = self.replayer.links.get(target)
        if link is None:
            raise EvaluationError(Outcome.LINK_FAIL, f"no recorded link produces {target}")
        key = hash_json([LINK_RULES, target,
                         sorted((k, list(v)) for k, v in flags_by_unit.items()),
                         link.output_hash, self.replayer.compiler_override or "",
                         list(link_flags), self._tree_files(link)])[:20]
        folder = os.path.join(self.replayer.work, key)
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
        prebuilt = prebuilt_library_folders(linked, self.replayer.links,
                                            os.path.dirname(os.path.realpath(self.replayer.store.dir)))
        return os.pathsep.join(([folder] if rebuilt else []) + prebuilt)

    def _units_linked(self, link: LinkRecord) -> list[UnitRecord]:
        """Every unit `link` takes, its project libraries' included: compiled in one go
        (`_compile_all`) before the links read their objects one by one."""
        found: dict[str, UnitRecord] = {}
        for item in link.inputs:
            if item.kind == "unit" and item.path in self.replayer.units:
                found[item.path] = self.replayer.units[item.path]
            elif item.kind == "object":
                unit = self.replayer.by_object.find(item.hash, item.path)
                if unit is not None:
                    found[unit.id] = unit
            elif item.kind == "archive":
                record = self.replayer.store.archive(item.hash or "")
                for _, member_hash in (record.members if record else []):
                    unit = self.replayer.by_object.find(member_hash)
                    if unit is not None:
                        found[unit.id] = unit
        for shared in self._shared_inputs(link):
            found.update((u.id, u) for u in self._units_linked(shared))
        return list(found.values())

    def _compile_all(self, units: list[UnitRecord], flags_by_unit: dict[str, Flags]) -> None:
        """The objects of `units` with their flags, compiled `jobs` at a time: a clean
        build of a 390-unit application took its compiles one after the other."""
        missing = [u for u in units if not self.replayer.as_built(u, flags_by_unit.get(u.id, ()))
                   and not self.replayer.has_object(u, flags_by_unit.get(u.id, ()))]
        if len(missing) < 2 or self.replayer.jobs < 2:
            return                      # the link compiles them as it goes
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(self.replayer.jobs) as pool:
            for done in [pool.submit(self.replayer.object_for, u, flags_by_unit.get(u.id, ()))
                         for u in missing]:
                done.result()           # the first failure, as a serial build meets it

    def _tree_files(self, link: LinkRecord) -> list[str]:
        """The hashes of the files the link reads from the project tree besides its
        inputs, its shared inputs' links included (replay_args.tree_files)."""
        root = os.path.dirname(os.path.realpath(self.replayer.store.dir))
        return tree_files(link, root) + [h for shared in self._shared_inputs(link)
                                         for h in self._tree_files(shared)]

    def _link_of_shared(self, path: str) -> LinkRecord | None:
        """The recorded link that made a shared library input (libtool links the
        versioned file, libpng16.so.16.39.0, and passes a symlink to it)."""
        return self.replayer.links.get(path) or self.replayer.links.get(os.path.realpath(path))

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
            argv += thinlto_cache(argv, thinlto_cache_folder(self.replayer.work, LINK_RULES))
            tmp_out = out + ".tmp"
            argv[argv.index(out)] = tmp_out
            done = proc.run_captured(argv + QUIET, link.cwd,
                                     proc.clean_env(dict(os.environ)), self.replayer.compile_timeout)
        finally:
            shutil.rmtree(inputs, ignore_errors=True)
        if done.timed_out or done.status != 0:
            said = done.stderr.decode("utf-8", "replace")
            fail_if_no_room(said, os.path.dirname(out))
            said = said[:500]
            if NOT_PIC in done.stderr:
                said = f"{NOT_PIC_SAID}; {said}"
            raise EvaluationError(Outcome.LINK_FAIL, f"relinking {os.path.basename(out)} "
                                  f"failed: {said}")
        os.replace(tmp_out, out)
        self.replayer.stats.links += 1
        return out

    def _link_compiler(self, link: LinkRecord) -> str:
        return self.replayer.compiler_override or link.compiler

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
        units_here = {self.replayer.units[i.path].source: self.replayer.units[i.path] for i in link.inputs
                      if i.kind == "unit" and i.path in self.replayer.units}
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
                args += ["-x", "none", self.replayer.object_for(unit, flags_by_unit.get(unit.id, ()))]
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
        unit = self.replayer.by_object.find(item.hash, item.path)
        if unit is not None:
            made = self.replayer.object_for(unit, flags_by_unit.get(unit.id, ()))
        elif item.hash and self.replayer.store.has_blob("obj", item.hash, ".o"):
            made = self.replayer.store.blob_file("obj", item.hash, ".o")
        else:
            raise EvaluationError(Outcome.LINK_FAIL, f"{item.path} was not kept by the "
                                  "recording: record the build again")
        return linked_into_tree(made, in_tree(inputs, item.path))

