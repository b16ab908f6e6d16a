"""What record mode stores for one successful compiler call.

After the real compile has run untouched, `record_call` emits each source's
pre-optimization IR with the same arguments (output, dependency and other side-output
flags removed, `-Xclang -disable-llvm-passes -emit-llvm` added, the unit's own `-O`
level kept), stores it by content, and records the unit; for a link it records the
inputs, hashing objects and archive members so units can be matched to binaries.
Any exception here is the caller's to log: the build has already succeeded.

Records are plain dicts written to the spool (see spool.py for why); their fields are
those of `store.UnitRecord`, `SkipRecord` and `LinkRecord`, plus "type".
"""

from __future__ import annotations

import os
import time

from autopass_build.capture.compiler_args import COMPILE, Invocation, Skip
from autopass_build.capture.host import Host, LocalHost
from autopass_build.capture.option_table import R_LINK, SHARED, STATIC
from autopass_build.capture.record import archive
from autopass_build.capture.record.spool import Spool
from autopass_build.core import toolchain
from autopass_build.core.errors import AutopassError
from autopass_build.core.files import disk_full, hash_bytes, hash_file, hash_json, relative_to
from autopass_build.core.names import ENV_IR_TIMEOUT, ENV_RECORD_SESSION

DEFAULT_IR_TIMEOUT_S = 300.0


class Call:
    """One run of the wrapper: which real compiler, with which arguments, where; `host`
    runs its commands (host.py)."""

    def __init__(self, compiler_path: str, compiler_argv0: str, args: list[str], cwd: str,
                 env: dict[str, str], root: str, host: Host | None = None):
        self.compiler_path = compiler_path    # resolved, absolute or PATH-relative
        self.compiler_argv0 = compiler_argv0  # as the build wrote it (clang's driver mode)
        self.args = args                      # original arguments, passed on unchanged
        self.cwd = cwd
        self.env = env                        # for the commands it runs
        self.root = root                      # project root, for relative source paths
        self.host = host or LocalHost()


IR_FAILED = "ir_failed"      # the IR step exited non-zero: the unit is not captured
IR_TIMEOUT = "ir_timeout"    # the IR step hung and was killed


class CaptureError(AutopassError):
    def __init__(self, message: str, reason: str = IR_FAILED):
        super().__init__(message)
        self.reason = reason


def compiler_identity(spool: Spool, call: Call) -> toolchain.Identity:
    """Who the real compiler is; cached in the store by its path, size and mtime."""
    stamp = toolchain.stamp_of(call.compiler_path)
    cached = spool.compiler_text(stamp)
    if cached is not None:
        identity = toolchain.parse_version_output(call.compiler_path, cached)
    else:
        text = toolchain.version_text(call.compiler_path, call.env)  # once per binary and store
        identity = toolchain.parse_version_output(call.compiler_path, text)
        if identity is not None:
            spool.remember_compiler(stamp, text)
    if identity is None or "clang" not in identity.vendor_line.lower():
        raise CaptureError(f"{call.compiler_path} is not clang; autopass needs clang to "
                           "capture LLVM IR (set AUTOPASS_CC/AUTOPASS_CXX)")
    return identity


def ir_timeout(env: dict[str, str]) -> float:
    try:
        return float(env.get(ENV_IR_TIMEOUT, DEFAULT_IR_TIMEOUT_S))
    except ValueError:
        return DEFAULT_IR_TIMEOUT_S


def capture_ir(spool: Spool, call: Call, inv: Invocation, source_index: int) -> str:
    source = inv.sources[source_index]
    tmp_ir = spool.new_tmp_path(".bc")
    tmp_err = tmp_ir + ".stderr"
    argv = [call.compiler_argv0] + inv.ir_args(source, tmp_ir)
    try:
        done = call.host.quiet(call.compiler_path, argv, call.env, ir_timeout(call.env),
                               tmp_err)
        if done.timed_out:
            raise CaptureError(f"IR step for {source.path} timed out after "
                               f"{ir_timeout(call.env):g}s", IR_TIMEOUT)
        if done.status != 0 or not os.path.isfile(tmp_ir):
            raise CaptureError(f"IR step for {source.path} failed ({done.status}): "
                               f"{_first_error_line(tmp_err)}")
        return spool.adopt_blob("ir", tmp_ir, ".bc")
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
        lines = []
    errors = [line for line in lines if "error" in line]
    if not (errors or lines) and disk_full(os.path.dirname(path)):
        return "no space left on the store's disk"
    return (errors or lines or ["(no stderr)"])[0][:300]


def _abs(cwd: str, path: str) -> str:
    return os.path.normpath(os.path.join(cwd, path))


def record_units(spool: Spool, call: Call, inv: Invocation,
                 captured: dict[int, str] | None = None) -> list[dict]:
    """Record each source of `inv` as a unit; `captured`: the IR blobs already stored, by
    source index (one-pass record made them), else each source's IR step runs now."""
    identity = compiler_identity(spool, call)
    expanded = [t for arg in inv.args for t in arg.tokens]
    units = []
    for index, source in enumerate(inv.sources):
        try:
            ir_hash = (captured or {}).get(index) or capture_ir(spool, call, inv, index)
        except CaptureError as error:
            spool.log(str(error))
            record_skip(spool, call, Skip(error.reason, str(error), (source.path,)))
            continue
        source_abs = _abs(call.cwd, source.path)
        object_rel = inv.object_path(source)
        output = _abs(call.cwd, object_rel) if object_rel is not None else None
        unit_id = hash_json([call.cwd, source_abs, output, source.language,
                             os.path.basename(call.compiler_argv0), expanded])[:24]
        unit = {
            "type": "unit", "id": unit_id, "source": source_abs,
            "source_rel": relative_to(source_abs, call.root), "cwd": call.cwd,
            "compiler": call.compiler_path, "argv": expanded, "output": output,
            "language": source.language, "opt_level": inv.opt_level,
            "source_hash": hash_file(source_abs),
            "object_hash": hash_file(output) if output and inv.mode == COMPILE else None,
            "ir_hash": ir_hash, "compiler_id": identity.short(), "recorded_at": time.time()}
        spool.write_record(unit)
        _in_session(call, "unit", unit_id)
        units.append(unit)
    return units


def library_dirs(inv: Invocation, cwd: str) -> list[str]:
    tokens = inv.flag_tokens(R_LINK)
    dirs = []
    for i, token in enumerate(tokens):
        if token == "-L" and i + 1 < len(tokens):
            dirs.append(_abs(cwd, tokens[i + 1]))
        elif token.startswith("-L") and len(token) > 2:
            dirs.append(_abs(cwd, token[2:]))
    return dirs


def libraries(inv: Invocation) -> list[str]:
    tokens = inv.flag_tokens(R_LINK)
    names = []
    for i, token in enumerate(tokens):
        if token == "-l" and i + 1 < len(tokens):
            names.append(tokens[i + 1])
        elif token.startswith("-l") and len(token) > 2:
            names.append(token[2:])
    return names


def resolve_library(name: str, dirs: list[str], static: bool) -> str | None:
    """A -lNAME found in the project's own -L folders (system folders are not ours)."""
    candidates = [name[1:]] if name.startswith(":") else (
        [f"lib{name}.a"] if static else [f"lib{name}.so", f"lib{name}.a"])
    for directory in dirs:
        for candidate in candidates:
            path = os.path.join(directory, candidate)
            if os.path.isfile(path):
                return path
    return None


def _describe_input(spool: Spool, path: str, archives: list[dict]) -> list:
    """[kind, path, hash] of one linker input; archives also get their members listed.

    Objects and archives are kept as blobs ("obj", "ar") for replay."""
    if archive.is_archive(path):
        read = archive.read_members(path)
        digest = (spool.keep_bytes("ar", archive.regular_archive(read), ".a")
                  if archive.is_thin(path) else spool.keep_file("ar", path, ".a"))
        members = [[m.name, hash_bytes(m.data)] for m in read]
        archives.append({"hash": digest, "path": path, "members": members})
        return ["archive", path, digest]
    if ".so" in os.path.basename(path):
        return ["shared", path, hash_file(path) if os.path.isfile(path) else None]
    return ["object", path, spool.keep_file("obj", path, ".o") if os.path.isfile(path)
            else None]


def link_input_paths(inv: Invocation, cwd: str, static: bool | None = None) -> list[str]:
    """A link's inputs, absolute: its objects and archives as given, then each -lNAME
    found in the project's own -L folders (`static`: archives only; None: as the link
    asks, -static or not)."""
    if static is None:
        static = any(t in STATIC for t in inv.flag_tokens(R_LINK))
    dirs = library_dirs(inv, cwd)
    return [_abs(cwd, path) for path in inv.link_inputs] + [
        found for name in libraries(inv) if (found := resolve_library(name, dirs, static))]


def record_link(spool: Spool, call: Call, inv: Invocation, units: list[dict]) -> None:
    link_flags = inv.flag_tokens(R_LINK)
    archives: list[dict] = []
    inputs = [["unit", u["id"], None] for u in units]
    for path in link_input_paths(inv, call.cwd):
        inputs.append(_describe_input(spool, path, archives))
    output = _abs(call.cwd, inv.link_output() or "a.out")
    kind = ("shared" if any(t in SHARED for t in link_flags) else
            "relocatable" if "-r" in link_flags else "executable")
    spool.write_record({
        "type": "link", "output": output, "cwd": call.cwd, "compiler": call.compiler_path,
        "argv": [t for arg in inv.args for t in arg.tokens], "kind": kind, "inputs": inputs,
        "output_hash": hash_file(output) if os.path.isfile(output) else None,
        "archives": archives, "recorded_at": time.time()})
    _in_session(call, "link", hash_json([output]))


def record_call(spool: Spool, call: Call, inv: Invocation,
                captured: dict[int, str] | None = None) -> None:
    units = record_units(spool, call, inv, captured) if inv.sources else []
    if inv.mode != COMPILE:
        record_link(spool, call, inv, units)
    for skip in inv.skipped_sources:
        record_skip(spool, call, skip)


def record_skip(spool: Spool, call: Call, skip: Skip) -> None:
    sources = [_abs(call.cwd, s) for s in skip.sources]
    spool.write_record({
        "type": "skip", "cwd": call.cwd, "argv": call.args, "sources": sources,
        "reason": skip.reason, "detail": skip.detail, "recorded_at": time.time()})
    _in_session(call, "skip", hash_json([call.cwd, call.args, sources]))


def _in_session(call: Call, kind: str, key: str) -> None:
    """One line in the session file of the `autopass record` running this build: what
    it recorded, so that its summary counts its own records, not those of another
    record into the same store at the same time (a line with O_APPEND: compiles in
    parallel never interleave)."""
    path = call.env.get(ENV_RECORD_SESSION)
    if path:
        try:
            with open(path, "a") as handle:
                handle.write(f"{kind} {key}\n")
        except OSError:
            pass
