"""BOLT, the post-link optimizer: its command lines, computed in one place.

    linked binary (-Wl,--emit-relocs) ──llvm-bolt -instrument──▶ instrumented binary
    ──training run──▶ *.fdata ──merge-fdata──▶ profile
    linked binary + profile ──llvm-bolt -data=──▶ optimized binary (layout from the profile)

The tuner trains and measures (candidates/bolt.py); apply mode runs `optimize` on the
target's link output with the profile shipped beside the flags database.  A BOLT profile
describes one exact binary (functions by name, branches by offset), so it carries the
code fingerprint of the binary it was trained on and is applied only to that binary.

llvm-bolt writes its command line into the output (`.note.bolt_info`), so it runs in a
private folder on fixed file names: the same input and profile give the same bytes, in
the tuner and in every clean apply build.  It is started by its real path, because it
looks for its instrumentation runtime in `<its folder>/../lib` (Debian's
/usr/bin/llvm-bolt-19 link would send it to /usr/lib).  Runs in apply mode's link:
`subprocess` and `shutil` only when BOLT actually runs.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

from autopass_build.core import toolchain
from autopass_build.core.errors import AutopassError

RUNTIME = "libbolt_rt_instr.a"
# The layout options LLVM's BOLT documentation recommends for a profiled binary.
OPTIMIZE = ("-reorder-blocks=ext-tsp", "-reorder-functions=cdsort", "-split-functions",
            "-split-all-cold", "-split-eh", "-dyno-stats")
TIMEOUT_S = 900.0
CODE_SECTIONS = (".text", ".rodata", ".init", ".fini", ".plt", ".plt.got", ".data.rel.ro")


class BoltError(AutopassError):
    """BOLT could not run or rejected the binary; the message says which and why."""


def tool(name: str = "llvm-bolt") -> str | None:
    """`llvm-bolt` or `merge-fdata` of the LLVM the compiler comes from, by real path;
    $AUTOPASS_BOLT names llvm-bolt's path (merge-fdata is beside it)."""
    from autopass_build.core import names

    explicit = os.environ.get(names.ENV_BOLT)
    if explicit:
        if name != "llvm-bolt":
            explicit = os.path.join(os.path.dirname(os.path.realpath(explicit)), name)
        return os.path.realpath(explicit) if toolchain.is_executable_file(explicit) else None
    found = toolchain.find_tool(name)    # an executable file, or None
    return os.path.realpath(found) if found else None


def missing() -> str:
    """Why BOLT cannot run here ("" when it can)."""
    bolt = tool()
    hint = f"sudo apt-get install bolt-{toolchain.DEFAULT_LLVM_VERSION}"
    if bolt is None or tool("merge-fdata") is None:
        return f"llvm-bolt not found ({hint})"
    if not os.path.isfile(runtime_of(bolt)):
        return f"BOLT's instrumentation runtime {runtime_of(bolt)} is missing ({hint})"
    return ""


def _llvm_bolt() -> str:
    """llvm-bolt's real path, or BoltError saying how to install it."""
    bolt = tool()
    if bolt is None:
        raise BoltError(missing())
    return bolt


@contextlib.contextmanager
def _beside(binary: str, profile: str, name: str, folder: str | None = None
            ) -> Iterator[str]:
    """A private folder (in `folder`, else the system's) holding `binary` as `in` and
    `profile` as `name`: llvm-bolt writes its command line into its output, so it runs
    on these fixed names."""
    import shutil
    import tempfile

    prefix = ".autopass-bolt-" if folder else "autopass-bolt-"
    with tempfile.TemporaryDirectory(prefix=prefix, dir=folder) as scratch:
        shutil.copyfile(binary, os.path.join(scratch, "in"))
        shutil.copyfile(profile, os.path.join(scratch, name))
        yield scratch


def runtime_of(bolt: str) -> str:
    return os.path.join(os.path.dirname(os.path.dirname(bolt)), "lib", RUNTIME)


def code_fingerprint(path: str) -> str:
    """A hash of what a BOLT profile describes: the binary's code and read-only data
    sections (not its debug info or symbol table, which may name build folders)."""
    from autopass_build.core.files import hash_bytes

    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError as error:
        raise BoltError(f"cannot read {path} ({error.strerror})") from None
    parts = [name.encode() + b"\0" + body for name, body in _sections(data, path)
             if name in CODE_SECTIONS]
    if not parts:
        raise BoltError(f"{path} has no code sections")
    return hash_bytes(b"\0".join(parts))


def rewritten(path: str) -> bool:
    """Whether BOLT wrote `path` (it leaves a `.note.bolt_info` section): such a binary
    cannot be given to BOLT again."""
    try:
        with open(path, "rb") as handle:
            data = handle.read()
        return any(name == ".note.bolt_info" for name, _ in _sections(data, path))
    except (OSError, BoltError):
        return False


def statically_linked(path: str) -> bool:
    """No dynamic loader named (`-static`): BOLT cannot instrument such a binary (its
    runtime writes the profile at exit only through the loader's finalization)."""
    try:
        with open(path, "rb") as handle:
            data = handle.read()
        return all(name != ".interp" for name, _ in _sections(data, path))
    except (OSError, BoltError):
        return False


def _sections(data: bytes, path: str) -> list[tuple[str, bytes]]:
    """(name, contents) of each section of a 64-bit little-endian ELF file (what BOLT
    rewrites).  Read by hand: apply mode runs in an isolated interpreter, without
    pyelftools."""
    import struct

    if data[:4] != b"\x7fELF" or data[4:6] != b"\x02\x01" or len(data) < 64:
        raise BoltError(f"{path} is not a 64-bit little-endian ELF binary")
    try:
        shoff, = struct.unpack_from("<Q", data, 0x28)
        entsize, count, names_index = struct.unpack_from("<HHH", data, 0x3A)
        headers = [struct.unpack_from("<IIQQQQ", data, shoff + i * entsize)
                   for i in range(count)]
        names = headers[names_index]
        table = data[names[4]:names[4] + names[5]]
        found = []
        for name_at, kind, _flags, _addr, offset, size in headers:
            name = table[name_at:table.index(b"\0", name_at)].decode("utf-8", "replace")
            found.append((name, b"" if kind == 8 else data[offset:offset + size]))  # NOBITS
        return found
    except (struct.error, IndexError, ValueError):
        raise BoltError(f"{path}: its ELF section table cannot be read") from None


SKIP_HINT = "Consider adding this function to --skip-funcs"
MAX_SKIPPED = 8


def _run(argv: list[str], cwd: str, what: str) -> None:
    """Run llvm-bolt.  A function BOLT cannot rewrite (it names it: "unable to get new
    address ... in function luaV_execute/1(*2). Consider adding this function to
    --skip-funcs") is skipped and BOLT run again, as its message suggests: the rest of
    the binary is still laid out.  The same binary takes the same path every time."""
    from autopass_build.core import proc

    skipped: list[str] = []
    while True:
        extra = [f"--skip-funcs={','.join(skipped)}"] if skipped else []
        done = proc.run_captured(argv + extra, cwd, proc.clean_env(dict(os.environ)),
                                 TIMEOUT_S)
        if done.timed_out:
            raise BoltError(f"{what} took over {TIMEOUT_S:g}s")
        if done.status == 0:
            return
        lines = (done.stderr + done.stdout).decode("utf-8", "replace").strip().splitlines()
        errors = [line for line in lines if "ERROR" in line] or lines[-1:] or ["?"]
        function = _function_to_skip(errors[0])
        if not function or function in skipped or len(skipped) >= MAX_SKIPPED:
            raise BoltError(f"{what} failed (exit {done.status}): {errors[0][:300]}")
        skipped.append(function)


def _function_to_skip(error: str) -> str:
    """The function a BOLT-ERROR suggests skipping, as --skip-funcs takes it
    ("luaV_execute/1(*2)" is written "luaV_execute/1"); "" if it suggests none."""
    if SKIP_HINT not in error or " in function " not in error:
        return ""
    name = error.split(" in function ", 1)[1].split(SKIP_HINT, 1)[0].strip().rstrip(".")
    if name.endswith(")") and "(*" in name:
        name = name[:name.rindex("(*")]
    return name if name and "," not in name and " " not in name else ""


def optimize(binary: str, profile: str, output: str, stale: bool = False) -> None:
    """Write `binary` laid out by `profile` to `output` (atomically: `output` is the old
    file or the new one, never half of one).  `stale`: `profile` is the YAML profile of
    another build of the program (`to_yaml`), matched to this one by llvm-bolt's
    stale-profile inference.  BoltError when BOLT cannot do it."""
    bolt = _llvm_bolt()
    name = "profile.yaml" if stale else "profile.fdata"
    with _beside(binary, profile, name, os.path.dirname(os.path.abspath(output))) as scratch:
        _run([bolt, "in", "-o", "out", f"-data={name}", *OPTIMIZE,
              *(["--infer-stale-profile"] if stale else [])], scratch, "llvm-bolt")
        os.chmod(os.path.join(scratch, "out"), os.stat(binary).st_mode & 0o7777)
        os.replace(os.path.join(scratch, "out"), output)


def stale_report(binary: str, yaml_profile: str) -> str:
    """What llvm-bolt says when it lays `binary` out with the YAML profile of another
    build of it, by stale-profile inference (its BOLT-INFO and BOLT-WARNING lines): how
    many profiled functions match and how many blocks inference matched.  Nothing is
    written beside `binary`."""
    from autopass_build.core import proc

    bolt = _llvm_bolt()
    with _beside(binary, yaml_profile, "profile.yaml") as scratch:
        done = proc.run_captured([bolt, "in", "-o", "out", "-data=profile.yaml",
                                  "--infer-stale-profile"], scratch,
                                 proc.clean_env(dict(os.environ)), TIMEOUT_S)
    said = (done.stdout + done.stderr).decode("utf-8", "replace")
    if done.status != 0:
        errors = [line for line in said.splitlines() if "ERROR" in line] or ["?"]
        raise BoltError(f"llvm-bolt cannot read {binary} with it: {errors[0][:200]}")
    return said


def to_yaml(binary: str, profile: str, output: str) -> None:
    """`profile` (fdata, trained on `binary`) as BOLT's YAML profile, which carries each
    block's hash: what stale-profile inference needs to apply it to a later build."""
    from autopass_build.core.files import copy_atomic

    bolt = _llvm_bolt()
    with _beside(binary, profile, "profile.fdata") as scratch:
        _run([bolt, "in", "-o", "out", "-data=profile.fdata", "-w", "profile.yaml"], scratch,
             "llvm-bolt -w")
        copy_atomic(os.path.join(scratch, "profile.yaml"), output)


def instrument(binary: str, output: str, profile_prefix: str) -> None:
    """`binary` instrumented: each run writes `<profile_prefix>.<pid>.fdata`."""
    bolt = _llvm_bolt()
    _run([bolt, binary, "-instrument", "-o", output,
          f"--instrumentation-file={profile_prefix}", "--instrumentation-file-append-pid"],
         os.path.dirname(os.path.abspath(output)), "llvm-bolt -instrument")


def merge(profiles: list[str], output: str) -> None:
    """The training runs' profiles merged into one file."""
    merger = tool("merge-fdata")
    if merger is None:
        raise BoltError(missing())
    _run([merger, "-q", "-o", output, *profiles], os.path.dirname(os.path.abspath(output)),
         "merge-fdata")
