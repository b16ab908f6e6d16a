"""Profiles whose counts do not move from one training run to the next, so that two
builds of one source are one binary.

A training run's counts are the program's own, and many programs do not repeat them
exactly: Lua seeds its string hashes with the time and the addresses of locals (two runs
of bench/workloads/lua_mix.lua differ in 80 of their counters, by up to 3 %: interning,
table inserts, sort pivots, the collector), a threaded program splits work by timing.
The profile feeds the compiler's choices, so such counts give binaries that differ in
their bytes, and rounding alone does not hold them still: rounded to two significant
digits, 19 of those 80 counters still fell on either side of a rounding boundary
(754,209 and 757,044 round to 750,000 and 760,000).  So each count is also held to a
reference profile, the last one trained for this database (else the one it shipped):
a counter of a function with the same name and hash whose new count lies within
SNAP_SHARE (+ SNAP_SLACK) of the reference's takes the reference's count; any other is
rounded to DIGITS significant digits.  A second build then reproduces the first's profile
exactly, while a count that really moved (the source or the workload changed) is taken
as trained.  No choice the compiler makes turns on such a difference: branch weights
move by under 10 %.  BOLT's edge counts are held the same way, edge by edge.

    raw profiles ──llvm-profdata merge──▶ indexed ──--text──▶ counts held or rounded
    ──llvm-profdata merge──▶ the profile (the same text gives the same bytes)
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import NamedTuple

from autopass_build.core import proc
from autopass_build.core.errors import AutopassError
from autopass_build.core.files import copy_atomic

DIGITS = 2
SNAP_SHARE = 0.10        # a new count within 10 % of the reference's (+ SNAP_SLACK) keeps it
# Small counts move by whole dozens (Lua's collector: one branch taken 18 times in one run,
# never in the next): below this, any count is noise next to the program's hot ones.
SNAP_SLACK = 32


class SteadyError(AutopassError):
    """llvm-profdata failed; the message says how."""


def rounded(count: int) -> int:
    """`count` to DIGITS significant digits (half up: 66666 -> 67000; 149 -> 150)."""
    if count < 10 ** DIGITS:
        return count
    scale = 10 ** (len(str(count)) - DIGITS)
    return (count + scale // 2) // scale * scale


def held(count: int, reference: int | None) -> int:
    """`count` as the profile gets it: the reference's where it is near, else rounded."""
    if reference is not None and abs(count - reference) <= SNAP_SHARE * reference + SNAP_SLACK:
        return reference
    return rounded(count)


Counters = dict[tuple[str, str], list[int]]    # (function, hash) -> its counter values


def counters_of(text: str) -> Counters:
    """The counter values of each function of llvm-profdata's text format."""
    found: Counters = {}
    for counter in _counter_lines(text.splitlines()):
        found.setdefault(counter.key, []).append(counter.value)
    return found


def round_proftext(text: str, reference: Counters | None = None) -> str:
    """llvm-profdata's text format with every counter held or rounded (`reference`:
    the counters of the profile to hold to) and every value-site count rounded; names,
    hashes and the numbers of counters and sites as they were."""
    lines = text.splitlines()
    reference = reference or {}
    for counter in _counter_lines(lines):
        old = reference.get(counter.key)
        same_shape = old is not None and len(old) == counter.of
        lines[counter.line] = str(held(counter.value,
                                       old[counter.position] if old and same_shape else None))
    in_values = False
    for index, line in enumerate(lines):
        stripped = line.strip()
        if not stripped:
            in_values = False
        elif stripped.startswith("# Num Value Kinds:"):
            in_values = True
        elif in_values and ":" in stripped and stripped.rsplit(":", 1)[1].isdigit():
            name, count = stripped.rsplit(":", 1)
            lines[index] = f"{name}:{rounded(int(count))}"
    return "\n".join(lines) + "\n"


class _Counter(NamedTuple):
    key: tuple[str, str]     # the function's name and hash
    line: int                # its line in the text
    value: int
    position: int            # which of the function's counters (0 first)
    of: int                  # how many it has


def _counter_lines(lines: list[str]) -> Iterator[_Counter]:
    name = digest = ""
    counters = left = 0
    before = ""
    for index, line in enumerate(lines):
        stripped = line.strip()
        if not stripped:
            left, name = 0, ""
        elif left:
            yield _Counter((name, digest), index, int(stripped), counters - left, counters)
            left -= 1
        elif not name and not stripped.startswith(("#", ":")):
            name = stripped
        elif before == "# Func Hash:":
            digest = stripped
        elif before == "# Num Counters:" and stripped.isdigit():
            counters = int(stripped)
        elif stripped == "# Counter Values:":
            left = counters
        before = stripped


def merge_profraw(profdata: str, raws: list[str], output: str, scratch: str,
                  reference: str | None = None) -> list[str]:
    """The raw profiles `raws` merged into `output`, each count held to the indexed
    profile `reference` (when it can be read) or rounded.  A raw profile llvm-profdata
    cannot read (one cut short by a process killed while writing it, one another LLVM's
    runtime wrote) is left out, the others merged: what was left out comes back as
    "file: why" each.  None readable: SteadyError."""
    exact = os.path.join(scratch, "exact.profdata")
    said = _profdata(profdata, ["merge", "--failure-mode=all", "-o", exact] + sorted(raws),
                     scratch)
    held_to = None
    if reference and os.path.isfile(reference):
        try:
            held_to = counters_of(_as_text(profdata, reference, scratch, "reference"))
        except SteadyError:
            held_to = None         # another LLVM's, damaged: nothing to hold to
    steady = round_proftext(_as_text(profdata, exact, scratch, "exact"), held_to)
    steady_text = os.path.join(scratch, "steady.proftext")
    with open(steady_text, "w", encoding="utf-8", errors="surrogateescape") as handle:
        handle.write(steady)
    steady_indexed = os.path.join(scratch, "steady.profdata")
    _profdata(profdata, ["merge", "-o", steady_indexed, steady_text], scratch)
    copy_atomic(steady_indexed, output)     # whole, or the last one kept (a full disk)
    return unreadable(said, raws)


def unreadable(said: str, raws: list[str]) -> list[str]:
    """"file: why" for each of `raws` llvm-profdata warned it could not read, from its
    words ("warning: PATH: truncated profile data"), each once."""
    found: dict[str, str] = {}
    for line in said.splitlines():
        warned = line.removeprefix("warning: ")
        if warned == line:
            continue
        for raw in raws:
            if warned.startswith(raw + ":"):
                found.setdefault(os.path.basename(raw), warned[len(raw) + 1:].strip())
    return [f"{name}: {why}" for name, why in sorted(found.items())]


def left_out_note(left_out: list[str], of: int) -> str:
    """What to say of the raw profiles merge_profraw left out (`of` raw profiles)."""
    return (f"trained on {of - len(left_out)} of the training run's {of} raw profiles: "
            f"llvm-profdata cannot read {'; '.join(left_out[:3])}"
            + ("; ..." if len(left_out) > 3 else "")
            + " (a process killed while writing its profile, or one built by another LLVM)")


def _as_text(profdata: str, indexed: str, scratch: str, name: str) -> str:
    text = os.path.join(scratch, f"{name}.proftext")
    _profdata(profdata, ["merge", "--text", "-o", text, indexed], scratch)
    with open(text, encoding="utf-8", errors="surrogateescape") as handle:
        return handle.read()


def _profdata(profdata: str, args: list[str], cwd: str) -> str:
    """llvm-profdata run with `args`: what it said on stderr (its warnings)."""
    done = proc.run_captured([profdata] + args, cwd, proc.clean_env(dict(os.environ)), 600)
    said = done.stderr.decode("utf-8", "replace")
    if done.status != 0:
        raise SteadyError(f"llvm-profdata {args[0]} failed: " + said.strip()[-300:])
    return said


def round_fdata(path: str, reference: str | None = None) -> None:
    """A merged BOLT profile with each edge's count (its last field) held to the same
    edge of the BOLT profile `reference` or rounded, in place.  An edge taken a few times
    in one run and not at all in the next (a loop's exit, by the input's size) is one
    whose count of 0 is held too: it is in the profile exactly when it was in the
    reference's.  The edges are sorted, so that their order is no run's own."""
    head, edges = _edges(path)
    known = _edges(reference)[1] if reference and os.path.isfile(reference) else None
    steady = {}
    for edge in sorted(set(edges) | set(known or {})):
        count = held(edges.get(edge, 0), known.get(edge, 0) if known is not None else None)
        if count:
            steady[edge] = count
    with open(path, "w", encoding="utf-8", errors="surrogateescape") as handle:
        handle.write("".join(f"{line}\n" for line in head))
        handle.write("".join(f"{edge} {count}\n" for edge, count in steady.items()))


def _edges(path: str) -> tuple[list[str], dict[str, int]]:
    """An fdata file's lines that are not edges (a mode line), and its edges' counts."""
    head: list[str] = []
    edges: dict[str, int] = {}
    for line in _lines(path):
        edge, _, count = line.rpartition(" ")
        if edge.count(" ") >= 1 and count.isdigit():
            edges[edge] = edges.get(edge, 0) + int(count)
        elif line.strip():
            head.append(line)
    return head, edges


def _lines(path: str) -> list[str]:
    with open(path, encoding="utf-8", errors="surrogateescape") as handle:
        return handle.read().splitlines()
