"""Profiles rounded to two significant digits, so that two training runs make one build.

A training run's counts are the program's own, and many programs do not repeat them
exactly: Lua seeds its string hashes with the time and the addresses of locals (a table
walked in another order), a threaded program splits work by timing, a hash of pointers
moves with ASLR.  The profile feeds the compiler's choices, so counts that differ in
their fifth digit give objects that differ in their bytes, and two clean `apply --train`
builds of one source would not be bit-identical.  Rounded to two significant digits
(66,666 -> 67,000), such counts become one number, while no decision the compiler makes
from a profile turns on the third digit: branch weights move by under 5 %, hot and cold
stay hot and cold.  A count near a rounding boundary can still fall either side; that
is a remaining, rarer source of difference, and `autopass verify` says when it happens.

    raw profiles ──llvm-profdata merge──▶ indexed ──--text──▶ counts rounded
    ──llvm-profdata merge──▶ the profile (the same input gives the same bytes)
    BOLT's merged .fdata: each edge's count rounded in place (text already)
"""

from __future__ import annotations

import os

from autopass_build.core import proc

DIGITS = 2


class SteadyError(Exception):
    """llvm-profdata failed; the message says how."""


def rounded(count: int) -> int:
    """`count` to DIGITS significant digits (half up: 66666 -> 67000; 149 -> 150)."""
    if count < 10 ** DIGITS:
        return count
    scale = 10 ** (len(str(count)) - DIGITS)
    return (count + scale // 2) // scale * scale


def round_proftext(text: str) -> str:
    """llvm-profdata's text format with every counter and value-site count rounded;
    names, hashes and the numbers of counters and sites as they were."""
    out: list[str] = []
    counters = left = 0       # the record's number of counters; how many still to round
    in_values = False         # inside a record's value sites ("callee:count" lines)
    before = ""
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped:
            in_values, left = False, 0
        elif left:
            line, left = str(rounded(int(stripped))), left - 1
        elif before == "# Num Counters:" and stripped.isdigit():
            counters = int(stripped)
        elif stripped == "# Counter Values:":
            left = counters
        elif stripped.startswith("# Num Value Kinds:"):
            in_values = True
        elif in_values and ":" in stripped and stripped.rsplit(":", 1)[1].isdigit():
            name, count = stripped.rsplit(":", 1)
            line = f"{name}:{rounded(int(count))}"
        out.append(line)
        before = stripped
    return "\n".join(out) + "\n"


def merge_profraw(profdata: str, raws: list[str], output: str, scratch: str) -> None:
    """The raw profiles `raws` merged into `output`, counts rounded."""
    exact = os.path.join(scratch, "exact.profdata")
    text = os.path.join(scratch, "exact.proftext")
    _profdata(profdata, ["merge", "-o", exact] + sorted(raws), scratch)
    _profdata(profdata, ["merge", "--text", "-o", text, exact], scratch)
    with open(text, encoding="utf-8", errors="surrogateescape") as handle:
        steady = round_proftext(handle.read())
    steady_text = os.path.join(scratch, "steady.proftext")
    with open(steady_text, "w", encoding="utf-8", errors="surrogateescape") as handle:
        handle.write(steady)
    _profdata(profdata, ["merge", "-o", output, steady_text], scratch)


def _profdata(profdata: str, args: list[str], cwd: str) -> None:
    done = proc.run_captured([profdata] + args, cwd, proc.clean_env(dict(os.environ)), 600)
    if done.status != 0:
        raise SteadyError(f"llvm-profdata {args[0]} failed: "
                          + done.stderr.decode("utf-8", "replace").strip()[-300:])


def round_fdata(path: str) -> None:
    """A merged BOLT profile with each edge's count (its last field) rounded, in place."""
    with open(path, encoding="utf-8", errors="surrogateescape") as handle:
        lines = handle.read().splitlines()
    steady = []
    for line in lines:
        fields = line.split(" ")
        if len(fields) >= 3 and fields[-1].isdigit():
            fields[-1] = str(rounded(int(fields[-1])))
        steady.append(" ".join(fields))
    with open(path, "w", encoding="utf-8", errors="surrogateescape") as handle:
        handle.write("\n".join(steady) + "\n")
