"""What record mode stores for one successful compiler call.

After the real compile has run untouched, `record_call` emits each source's
pre-optimization IR with the same arguments (output, dependency and other side-output
flags removed, `-Xclang -disable-llvm-passes -emit-llvm` added, the unit's own `-O`
level kept), stores it by content, and records the unit; for a link it records the
inputs, hashing objects and archive members so units can be matched to binaries.
Any exception here is the caller's to log: the build has already succeeded.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from . import archive, proc, toolchain
from .compiler_args import (COMPILE, R_LINK, Invocation, Skip)
from .store import (ArchiveRecord, LinkInput, LinkRecord, SkipRecord, Store, UnitRecord,
                    hash_bytes, hash_file, hash_json)

DEFAULT_IR_TIMEOUT_S = 300.0


@dataclass(frozen=True)
class Call:
    """One run of the wrapper: which real compiler, with which arguments, where."""
    compiler_path: str    # resolved, absolute or PATH-relative
    compiler_argv0: str   # as the build wrote it (clang picks its driver mode from it)
    args: list[str]       # original arguments, passed to the real compiler unchanged
    cwd: str
    env: dict[str, str]
    store_dir: str
    root: str             # project root, for relative source paths
    cxx: bool


IR_FAILED = "ir_failed"      # the IR step exited non-zero: the unit is not captured
IR_TIMEOUT = "ir_timeout"    # the IR step hung and was killed


class CaptureError(Exception):
    def __init__(self, message: str, reason: str = IR_FAILED):
        super().__init__(message)
        self.reason = reason


def compiler_identity(store: Store, call: Call) -> toolchain.Identity:
    """Who the real compiler is; cached in the store by its path, size and mtime."""
    stamp = toolchain.stamp_of(call.compiler_path)
    cached = store.compiler_identity(call.compiler_path, stamp)
    if cached is not None:
        identity = toolchain.parse_version_output(call.compiler_path, cached)
    else:
        import subprocess
        result = subprocess.run([call.compiler_path, "--version"], capture_output=True,
                                stdin=subprocess.DEVNULL, timeout=60,
                                env={**call.env, "LC_ALL": "C"})
        text = result.stdout.decode("utf-8", "replace")
        identity = toolchain.parse_version_output(call.compiler_path, text)
        if identity is not None:
            store.remember_compiler(call.compiler_path, stamp, text)
    if identity is None or "clang" not in identity.vendor_line.lower():
        raise CaptureError(f"{call.compiler_path} is not clang; autopass needs clang to "
                           "capture LLVM IR (set AUTOPASS_CC/AUTOPASS_CXX)")
    return identity


def ir_timeout(env: dict[str, str]) -> float:
    try:
        return float(env.get("AUTOPASS_IR_TIMEOUT", DEFAULT_IR_TIMEOUT_S))
    except ValueError:
        return DEFAULT_IR_TIMEOUT_S


def capture_ir(store: Store, call: Call, inv: Invocation, source_index: int) -> str:
    source = inv.sources[source_index]
    tmp_ir = store.new_tmp_path(".bc")
    tmp_err = tmp_ir + ".stderr"
    argv = [call.compiler_argv0] + inv.ir_args(source, tmp_ir)
    try:
        done = proc.run_quiet(call.compiler_path, argv, call.env, ir_timeout(call.env),
                              tmp_err)
        if done.timed_out:
            raise CaptureError(f"IR step for {source.path} timed out after "
                               f"{ir_timeout(call.env):g}s", IR_TIMEOUT)
        if done.status != 0 or not os.path.isfile(tmp_ir):
            raise CaptureError(f"IR step for {source.path} failed ({done.status}): "
                               f"{_first_error_line(tmp_err)}")
        return store.adopt_blob("ir", tmp_ir, ".bc")
    finally:
        for leftover in (tmp_ir, tmp_err):
            try:
                os.unlink(leftover)
            except FileNotFoundError:
                pass


def _first_error_line(path: str) -> str:
    try:
        with open(path, "rb") as handle:
            lines = handle.read(4096).decode("utf-8", "replace").splitlines()
    except OSError:
        return "(no stderr)"
    errors = [line for line in lines if "error" in line]
    return (errors or lines or ["(no stderr)"])[0][:300]


def _abs(cwd: str, path: str) -> str:
    return os.path.normpath(os.path.join(cwd, path))


def _relative_to_root(path: str, root: str) -> str:
    rel = os.path.relpath(path, root)
    return path if rel.startswith("..") else rel


def record_units(store: Store, call: Call, inv: Invocation) -> list[UnitRecord]:
    identity = compiler_identity(store, call)
    expanded = [t for arg in inv.args for t in arg.tokens]
    units = []
    for index, source in enumerate(inv.sources):
        try:
            ir_hash = capture_ir(store, call, inv, index)
        except CaptureError as error:
            store.log(str(error))
            record_skip(store, call, Skip(error.reason, str(error), (source.path,)))
            continue
        source_abs = _abs(call.cwd, source.path)
        object_rel = inv.object_path(source)
        output = _abs(call.cwd, object_rel) if object_rel is not None else None
        unit_id = hash_json([call.cwd, source_abs, output, source.language,
                             os.path.basename(call.compiler_argv0), expanded])[:24]
        units.append(UnitRecord(
            id=unit_id, source=source_abs, source_rel=_relative_to_root(source_abs, call.root),
            cwd=call.cwd, compiler=call.compiler_path, argv=expanded, output=output,
            language=source.language, opt_level=inv.opt_level,
            source_hash=hash_file(source_abs),
            object_hash=hash_file(output) if output and inv.mode == COMPILE else None,
            ir_hash=ir_hash, compiler_id=identity.short()))
    if units:
        store.record_units(units)
    return units


def _library_dirs(inv: Invocation, cwd: str) -> list[str]:
    tokens = inv.flag_tokens(R_LINK)
    dirs = []
    for i, token in enumerate(tokens):
        if token == "-L" and i + 1 < len(tokens):
            dirs.append(_abs(cwd, tokens[i + 1]))
        elif token.startswith("-L") and len(token) > 2:
            dirs.append(_abs(cwd, token[2:]))
    return dirs


def _libraries(inv: Invocation) -> list[str]:
    tokens = inv.flag_tokens(R_LINK)
    names = []
    for i, token in enumerate(tokens):
        if token == "-l" and i + 1 < len(tokens):
            names.append(tokens[i + 1])
        elif token.startswith("-l") and len(token) > 2:
            names.append(token[2:])
    return names


def _resolve_library(name: str, dirs: list[str], static: bool) -> str | None:
    """A -lNAME found in the project's own -L folders (system folders are not ours)."""
    candidates = [name[1:]] if name.startswith(":") else (
        [f"lib{name}.a"] if static else [f"lib{name}.so", f"lib{name}.a"])
    for directory in dirs:
        for candidate in candidates:
            path = os.path.join(directory, candidate)
            if os.path.isfile(path):
                return path
    return None


def _describe_input(path: str, archives: list[ArchiveRecord]) -> LinkInput:
    if archive.is_archive(path):
        digest = hash_file(path)
        members = [(m.name, hash_bytes(m.data)) for m in archive.read_members(path)]
        archives.append(ArchiveRecord(digest, path, members))
        return LinkInput("archive", path, digest)
    kind = "shared" if ".so" in os.path.basename(path) else "object"
    return LinkInput(kind, path, hash_file(path) if os.path.isfile(path) else None)


def record_link(store: Store, call: Call, inv: Invocation, units: list[UnitRecord]) -> None:
    link_flags = inv.flag_tokens(R_LINK)
    static = "-static" in link_flags
    archives: list[ArchiveRecord] = []
    inputs = [LinkInput("unit", u.id) for u in units]
    for path in inv.link_inputs:
        inputs.append(_describe_input(_abs(call.cwd, path), archives))
    dirs = _library_dirs(inv, call.cwd)
    for name in _libraries(inv):
        found = _resolve_library(name, dirs, static)
        if found:
            inputs.append(_describe_input(found, archives))
    output = _abs(call.cwd, inv.link_output() or "a.out")
    kind = ("shared" if "-shared" in link_flags else
            "relocatable" if "-r" in link_flags else "executable")
    store.record_link(LinkRecord(
        output=output, cwd=call.cwd, compiler=call.compiler_path,
        argv=[t for arg in inv.args for t in arg.tokens], kind=kind, inputs=inputs,
        output_hash=hash_file(output) if os.path.isfile(output) else None), archives)


def record_call(store: Store, call: Call, inv: Invocation) -> None:
    units = record_units(store, call, inv) if inv.sources else []
    if inv.mode != COMPILE:
        record_link(store, call, inv, units)
    for skip in inv.skipped_sources:
        record_skip(store, call, skip)


def record_skip(store: Store, call: Call, skip: Skip) -> None:
    sources = [_abs(call.cwd, s) for s in skip.sources]
    store.record_skip(SkipRecord(call.cwd, call.args, sources, skip.reason, skip.detail))
