"""`autopass apply`'s tally: one line per compile or link of the build, written by the
wrapper, read by `apply` and `verify` to say what the build got of the database and
what not (F18)."""

from __future__ import annotations

import os

APPLIED = "1\n"          # a tally line: this command got the tuned flags
SEEN = "c\n"             # a tally line: a compile went through the wrapper
NOT_APPLIED = "! "       # a tally line: what a command did not get, and why
OUTPUT = "o "            # a tally line: a file `apply --train`'s instrumented build wrote


def write(path: str | None, line: str) -> None:
    """One line in the tally file at `path` (None: no tally kept).  Each a write of one
    line with O_APPEND: parallel compiles never interleave."""
    if path:
        try:
            with open(path, "a") as handle:
                handle.write(line)
        except OSError:
            pass


TALLY_NAME = "applied"


def _tally_lines(work_dir: str) -> list[str]:
    try:
        with open(os.path.join(work_dir, TALLY_NAME), encoding="utf-8",
                  errors="replace") as handle:
            return handle.read().splitlines(keepends=True)
    except OSError:
        return []


def applied_count(work_dir: str) -> int:
    """How many commands of a build run with `apply_environment(..., work_dir)` were
    given tuned flags (the wrapper writes one line for each)."""
    return sum(line == APPLIED for line in _tally_lines(work_dir))


def compiles_seen(work_dir: str) -> int:
    """How many compiles of that build went through the wrapper, flags or not."""
    return sum(line == SEEN for line in _tally_lines(work_dir))


def outputs_of(parsed, cwd: str) -> list[str]:
    """The files a compile or link of `parsed` (an Invocation) writes, absolute."""
    from autopass_build.capture.compiler_args import COMPILE

    if parsed.mode == COMPILE:
        written = [parsed.object_path(source) for source in parsed.sources]
    else:
        written = [parsed.link_output()]
    return [os.path.normpath(os.path.join(cwd, path)) for path in written if path]


def outputs(work_dir: str) -> list[str]:
    """What that build's instrumented compiles and links wrote, each once, in order."""
    return list(dict.fromkeys(line[len(OUTPUT):].rstrip("\n")
                              for line in _tally_lines(work_dir) if line.startswith(OUTPUT)))


def not_applied(work_dir: str) -> list[str]:
    """What of the database that build's commands did not get, and why (each said once,
    in the order first said): a profile refused, BOLT not run, a flag rejected."""
    return list(dict.fromkeys(line[len(NOT_APPLIED):].strip()
                              for line in _tally_lines(work_dir)
                              if line.startswith(NOT_APPLIED)))
