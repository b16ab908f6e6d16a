"""Is a candidate's run correct?  Its exit code and output against the baseline's.

`[check] mode`: "output" (exit code and stdout equal the baseline's, the default),
"numbers" (the same, except that each number in stdout may differ from the baseline's by
the relative `[check] tolerance`), "exit-code" (only the exit code), or "command" (the
user's checker gets a folder with stdout, stderr and exit_code, and must exit 0).
In every mode, the files named by `[check] files` (what an encoder writes with
`-o out.j2k`) must be written anew by each run and equal the baseline's.  In "output"
and "numbers", stdout lines that a `[check] ignore` pattern matches are not compared.
"""

from __future__ import annotations

import functools
import math
import os
import re
import tempfile
from dataclasses import dataclass
from typing import Protocol

from autopass_build.config import CheckConfig, RunConfig
from autopass_build.core import proc
from autopass_build.core.files import hash_file

UNWRITTEN = "not written by the run"    # a [check].files digest: the file was left as it was
UNREADABLE = "cannot be read as a file"  # ... and, with the reason, a folder or unreadable


class BenchmarkLike(Protocol):
    """What a check needs of benchmark.Benchmark (not imported: benchmark imports this)."""
    check: CheckConfig
    run: RunConfig
    project_dir: str

    @property
    def cwd(self) -> str: ...

    def env(self, candidate_env: dict[str, str]) -> dict[str, str]: ...


class RunLike(Protocol):
    """What a check reads of one run (benchmark.RunResult)."""
    status: int
    stdout: bytes
    stderr: bytes
    files: tuple[tuple[str, str], ...]
    stdout_cut: str


@dataclass
class Reference:
    """What the baseline produced: the standard every candidate run must meet."""
    status: int
    stdout: bytes
    stderr: bytes
    files: tuple[tuple[str, str], ...] = ()   # ([check].files path, content digest)
    stdout_cut: str = ""                      # as RunLike's: see read_output


# A decompressor's benchmark (`xz -dc big.xz`) prints gigabytes: held whole, the
# baseline's copy, each run's and the comparison's would all be in memory at once.
# Past this size a run keeps the first bytes, to quote a difference, and a digest of
# the whole, to compare.
STDOUT_KEPT = 64 << 20


def read_output(path: str, keep_all: bool = False) -> tuple[bytes, str]:
    """A run's standard output (or error), saved in `path`: (its bytes, "") when it is
    at most STDOUT_KEPT long or `keep_all` (a [check] command reads stdout whole), else
    (its first STDOUT_KEPT bytes, the digest of all of it)."""
    with open(path, "rb") as handle:
        if keep_all or os.fstat(handle.fileno()).st_size <= STDOUT_KEPT:
            return handle.read(), ""
        return handle.read(STDOUT_KEPT), hash_file(path)


def check_output(bench: BenchmarkLike, reference: Reference, result: RunLike) -> str:
    """"" when the run is correct, else why not."""
    mode = bench.check.mode
    if result.status != reference.status:
        return (f"exit code {result.status}, the baseline's was {reference.status}"
                + last_words(result))
    if result.files != reference.files:
        return _file_difference(reference.files, result.files)
    if mode in ("output", "numbers"):
        return _stdout_difference(bench.check, reference, result)
    if mode == "command":
        return _run_check_command(bench, result)
    return ""


def _stdout_difference(check: CheckConfig, reference: Reference, result: RunLike) -> str:
    """Modes "output" and "numbers": "" when stdout passes, else where it differs."""
    expected, got = reference.stdout, result.stdout
    same_rest = reference.stdout_cut == result.stdout_cut   # both whole, or equal digests
    if expected == got and same_rest:
        return ""
    if check.ignore and expected != got:
        expected, got = (compared_lines(check.ignore, out) for out in (expected, got))
    why = ""
    if got != expected:
        why = (_first_difference(expected, got) + numbers_only(expected, got)
               if check.mode == "output" else numbers_differ(expected, got, check.tolerance))
    if why or same_rest:
        return why
    return (f"stdout differs after its first {STDOUT_KEPT >> 20} MiB, where autopass "
            "compares it as a whole (a digest: no [check] ignore or tolerance there)")


IGNORED = b"(ignored)"


@functools.lru_cache(maxsize=8)
def _compiled(patterns: tuple[str, ...]) -> tuple[re.Pattern[str], ...]:
    return tuple(re.compile(p) for p in patterns)     # as config.py checked them


def compared_lines(patterns: tuple[str, ...], stdout: bytes) -> bytes:
    """`stdout` with each line a [check].ignore pattern matches replaced by "(ignored)":
    line numbers in a difference stay the program's own."""
    ignored = _compiled(patterns)

    def matched(line: bytes) -> bool:
        text = line.decode("utf-8", "replace")
        return any(p.search(text) for p in ignored)

    return b"\n".join(IGNORED if matched(line) else line for line in stdout.split(b"\n"))


_SPECIAL = frozenset(".^$*+?{}[]\\|()")


def ignore_suggestion(expected: bytes, got: bytes) -> str:
    """A [check].ignore pattern for the first text line that differs: its words before
    the first digit ("Time used:   1.2 secs" gives "^Time used:"); "" when they are too
    few to name the line."""
    if _binary(expected) or _binary(got):
        return ""
    for a, b in zip(expected.split(b"\n"), got.split(b"\n")):
        if a == b:
            continue
        text = a.decode("utf-8", "replace")
        cut = next((i for i, c in enumerate(text) if c.isdigit()), len(text))
        head = text[:cut].strip()
        if sum(c.isalpha() for c in head) < 3:
            return ""
        indent = "^\\s*" if text[:1].isspace() else "^"
        return indent + "".join("\\" + c if c in _SPECIAL else c for c in head)
    return ""


# (inode, size, mtime_ns, ctime_ns), None: absent.  The status-change time, because a
# program may set the modification time back: flac, gzip, xz and zstd give their output
# the input's, and a rewrite of the same bytes in place then looked unwritten.  No
# program can set ctime; every write (and utime itself) moves it.
Signature = tuple[int, int, int, int] | None


def file_signatures(bench: BenchmarkLike) -> dict[str, Signature]:
    """Each [check].files path as it is before a run: what the run must change."""
    return {name: _signature(os.path.join(bench.cwd, name)) for name in bench.check.files}


def written_files(bench: BenchmarkLike, before: dict[str, Signature]
                  ) -> tuple[tuple[str, str], ...]:
    """(path, content digest) of each [check].files path after a run, UNWRITTEN for one
    the run left as it was: a stale file from the run before must not pass for its
    output (nothing is deleted, so a path named by mistake loses nothing)."""
    written = []
    for name, old in before.items():
        path = os.path.join(bench.cwd, name)
        new = _signature(path)
        changed = new is not None and new != old
        written.append((name, _digest(path) if changed or os.path.isdir(path)
                        else UNWRITTEN))
    return tuple(written)


def _digest(path: str) -> str:
    try:
        return hash_file(path)
    except OSError as error:            # a folder, or no permission to read
        return f"{UNREADABLE} ({error.strerror or error})"


def _signature(path: str) -> Signature:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns


def baseline_files_problem(files: tuple[tuple[str, str], ...]) -> str:
    """Why the baseline's [check].files cannot be the reference (a path it did not write,
    a folder), or ""."""
    for name, digest in files:
        if digest == UNWRITTEN or digest.startswith(UNREADABLE):
            why = "the baseline's run did not write" if digest == UNWRITTEN else digest
            return f"[check].files names {name}, which {why}"
    return ""


def _file_difference(expected: tuple[tuple[str, str], ...],
                     got: tuple[tuple[str, str], ...]) -> str:
    for (name, want), (_, have) in zip(expected, got):
        if have == UNWRITTEN:
            return f"{name} was not written by this run ([check].files)"
        if have.startswith(UNREADABLE):
            return f"{name} {have} ([check].files)"
        if have != want:
            return f"{name} differs from the baseline's ([check].files)"
    return "[check].files differ"


def last_words(result: RunLike) -> str:
    """"; its last line: '...'" from the run's stderr, else its stdout ("" when it wrote
    nothing): a benchmark script's "failed: shader.frag" says more than its exit code."""
    for stream in (result.stderr, result.stdout):
        lines = [line for line in stream.splitlines() if line.strip()]
        if lines:
            text = lines[-1].decode("utf-8", "replace").strip()
            return f"; its last line: {text[:120]!r}" + (" (cut)" if len(text) > 120 else "")
    return ""


def _first_difference(expected: bytes, got: bytes) -> str:
    if _binary(expected) or _binary(got):    # an encoder's stream has no lines to quote
        at = next((i for i, (a, b) in enumerate(zip(expected, got)) if a != b), None)
        if at is None:
            return f"stdout (binary) has {len(got)} bytes, the baseline's {len(expected)}"
        return (f"stdout (binary) differs first at byte {at} of {len(expected)}: expected "
                f"{expected[at:at + 8].hex(' ')}, got {got[at:at + 8].hex(' ')}")
    for number, (a, b) in enumerate(zip(expected.splitlines(), got.splitlines()), 1):
        if a != b:
            return (f"stdout line {number}: expected {a[:80].decode('utf-8', 'replace')!r}, "
                    f"got {b[:80].decode('utf-8', 'replace')!r}")
    return f"stdout has {len(got)} bytes, the baseline's {len(expected)}"


# A decimal number as programs print them (12, -3.5, 1e-07, .5, inf, nan); captured, so
# that splitting gives text and numbers in turn.
_NUMBER = re.compile(rb"([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|[-+]?(?:inf|nan)\b)")


def numbers_differ(expected: bytes, got: bytes, tolerance: float) -> str:
    """"" when `got` is `expected` with each number within the relative `tolerance`,
    else the first difference."""
    want, have = _NUMBER.split(expected), _NUMBER.split(got)
    if len(want) != len(have):
        return (f"stdout has {len(have) // 2} numbers, the baseline's {len(want) // 2} "
                f"([check] mode = \"numbers\")")
    offset = 0                          # of piece i in `expected`, to name its line
    for i, (a, b) in enumerate(zip(want, have)):
        if a != b and i % 2 == 0:
            line = expected[:offset + len(os.path.commonprefix([a, b]))].count(b"\n") + 1
            return f"stdout line {line}: text differs: expected {a[:60]!r}, got {b[:60]!r}"
        if a != b and not _close(float(a), float(b), tolerance):
            line = expected[:offset].count(b"\n") + 1
            return (f"stdout line {line}: {b.decode()} against the baseline's {a.decode()}, "
                    f"more than the relative tolerance {tolerance:g}")
        offset += len(a)
    return ""


# What a WRONG_OUTPUT detail says when only the printed numbers moved, and by little:
# the tuner counts such candidates (tuner._notes) to say what would accept them.
NUMBERS_ONLY = "only numbers differ"
NUMBERS_READ = 8 << 20     # a wrong output is read for numbers up to this size


def numbers_only(expected: bytes, got: bytes) -> str:
    """When `got` is `expected` with only its numbers changed, and by at most 1e-3
    relative (rounding: a reduction vectorized in another order, a contracted multiply-
    add), what `[check]` tolerance would accept it; else "".  Binary output and output
    past NUMBERS_READ are not read for numbers."""
    if max(len(expected), len(got)) > NUMBERS_READ or _binary(expected) or _binary(got):
        return ""
    want, have = _NUMBER.split(expected), _NUMBER.split(got)
    if len(want) != len(have) or want[0::2] != have[0::2]:
        return ""
    worst = max((_relative(float(a), float(b)) for a, b in zip(want[1::2], have[1::2])
                 if a != b), default=0.0)
    if not 0.0 < worst <= 1e-3:
        return ""
    tolerance = 10.0 ** (math.floor(math.log10(worst)) + 1)   # above it, with room
    return (f"; {NUMBERS_ONLY}, by at most {worst:.1e} relative ([check] mode = "
            f"\"numbers\" with tolerance = {tolerance:g} would accept it)")


def _relative(x: float, y: float) -> float:
    if x == y or (math.isnan(x) and math.isnan(y)):
        return 0.0                       # "0" and "0.0", "nan" and "-nan"
    if not (math.isfinite(x) and math.isfinite(y)):
        return math.inf
    return abs(x - y) / max(abs(x), abs(y))


def _close(x: float, y: float, tolerance: float) -> bool:
    return math.isclose(x, y, rel_tol=tolerance) or (math.isnan(x) and math.isnan(y))


def _binary(data: bytes) -> bool:
    head = data[:4096]
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as error:
        return error.start < len(head) - 3      # not a character cut at the 4 KiB edge
    return b"\0" in head


def _run_check_command(bench: BenchmarkLike, result: RunLike) -> str:
    with tempfile.TemporaryDirectory(prefix="autopass-check-") as outdir:
        for name, data in (("stdout", result.stdout), ("stderr", result.stderr),
                           ("exit_code", str(result.status).encode())):
            with open(os.path.join(outdir, name), "wb") as handle:
                handle.write(data)
        argv = [t.replace("{outdir}", outdir) for t in bench.check.command]
        done = proc.run_captured(argv, bench.project_dir, bench.env({}),
                                 timeout=max(60.0, bench.run.timeout))
        if done.status != 0 or done.timed_out:
            why = done.stdout.decode("utf-8", "replace").strip().splitlines()
            return f"check command failed ({done.status})" + (f": {why[-1]}" if why else "")
    return ""
