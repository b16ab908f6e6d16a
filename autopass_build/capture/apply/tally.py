"""`autopass apply`'s tally: one line per compile or link of the build, written by the
wrapper, read by `apply` and `verify` to say what the build got of the database and
what not (F18)."""

from __future__ import annotations

import os

APPLIED = "1\n"          # a tally line: this command got the tuned flags
SEEN = "c\n"             # a tally line: a compile went through the wrapper
NOT_APPLIED = "! "       # a tally line: what a command did not get, and why
OUTPUT = "o "            # a tally line: a file `apply --train`'s instrumented build wrote
BEGUN = "b "             # a tally line: a file one of its commands set out to write
COMPILED = "u "          # a tally line: object, source (--train's builds: today's units)
LINKED = "l "            # a tally line: a link's output, its inputs, its own sources
FIELD = "\t"             # between a tally line's paths
SOURCES_FOLLOW = "\t\t"  # in a LINKED line: the sources the link command compiled itself


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


def graph_lines(parsed, cwd: str) -> list[str]:
    """Tally lines that say what a successful compile or link of `parsed` made of what:
    each compile's object and source, each link's output, inputs (its objects,
    archives and the project's -l libraries) and the sources it compiled itself.
    `apply --train` walks them to find the target's units of today's source."""
    from autopass_build.capture.compiler_args import COMPILE
    from autopass_build.capture.record.recorder import link_input_paths

    def absolute(path: str) -> str:
        return os.path.normpath(os.path.join(cwd, path))

    if parsed.mode == COMPILE:
        return [f"{COMPILED}{absolute(obj)}{FIELD}{absolute(source.path)}\n"
                for source in parsed.sources if (obj := parsed.object_path(source))]
    inputs = link_input_paths(parsed, cwd)
    sources = [absolute(source.path) for source in parsed.sources]
    return [f"{LINKED}{absolute(parsed.link_output() or 'a.out')}{FIELD}"
            + FIELD.join(inputs) + SOURCES_FOLLOW + FIELD.join(sources) + "\n"]


def compiled(work_dir: str) -> dict[str, str]:
    """object -> source, of that build's compiles (graph_lines)."""
    found = {}
    for line in _tally_lines(work_dir):
        if line.startswith(COMPILED):
            obj, _, source = line[len(COMPILED):].rstrip("\n").partition(FIELD)
            found[obj] = source
    return found


def linked(work_dir: str) -> dict[str, tuple[list[str], list[str]]]:
    """link output -> (its inputs, the sources it compiled itself), of that build."""
    found = {}
    for line in _tally_lines(work_dir):
        if line.startswith(LINKED):
            head, _, sources = line[len(LINKED):].rstrip("\n").partition(SOURCES_FOLLOW)
            output, *inputs = head.split(FIELD)
            found[output] = ([i for i in inputs if i],
                             [s for s in sources.split(FIELD) if s])
    return found


def outputs(work_dir: str) -> list[str]:
    """What that build's instrumented compiles and links wrote, each once, in order."""
    return list(dict.fromkeys(line[len(OUTPUT):].rstrip("\n")
                              for line in _tally_lines(work_dir) if line.startswith(OUTPUT)))


def begun(work_dir: str) -> list[str]:
    """Every file that build's commands wrote or set out to write (a command killed
    before its tally line), each once: what to delete so that none is taken as built."""
    return list(dict.fromkeys(line.split(" ", 1)[1].rstrip("\n")
                              for line in _tally_lines(work_dir)
                              if line.startswith((OUTPUT, BEGUN))))


def not_applied(work_dir: str) -> list[str]:
    """What of the database that build's commands did not get, and why (each said once,
    in the order first said): a profile refused, BOLT not run, a flag rejected."""
    return list(dict.fromkeys(line[len(NOT_APPLIED):].strip()
                              for line in _tally_lines(work_dir)
                              if line.startswith(NOT_APPLIED)))
