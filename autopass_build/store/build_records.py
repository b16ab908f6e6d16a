"""What the store holds, as typed records: a unit (one compile's IR and command line), a
compile skipped with its reason, a link with its inputs, an archive, the build that was
recorded; and which sources were compiled in one command together."""

from __future__ import annotations

import time
from dataclasses import dataclass, field


@dataclass
class UnitRecord:
    """One translation unit: a source compiled with one command into one object."""
    id: str
    source: str            # absolute
    source_rel: str        # relative to the project root (absolute when outside it)
    cwd: str
    compiler: str          # the real compiler that ran
    argv: list[str]        # arguments after the compiler, expanded, as classified
    output: str | None     # absolute object path; None when compiled and linked in one call
    language: str
    opt_level: str
    source_hash: str
    object_hash: str | None
    ir_hash: str
    compiler_id: str
    recorded_at: float = field(default_factory=time.time)


# A source compiled in one command with others -> those sources (they share its flags).
CommandMates = dict[str, tuple[str, ...]]


def command_groups(units: list[UnitRecord]) -> CommandMates:
    """Each source compiled in one command with others (`cc -c a.c b.c ...`: lz4's and
    lp_solve's libraries; `cc -o duk duktape.c duk_cmdline.c ...`: duktape) -> every
    source of that command, itself included, in the command's order.  Apply mode gives
    such a command one set of flags (F23): what is tuned for one of them is measured,
    and ships, for all of them."""
    by_command: dict[tuple[str, tuple[str, ...]], list[str]] = {}
    for u in units:
        group = by_command.setdefault((u.cwd, tuple(u.argv)), [])
        if u.source_rel not in group:
            group.append(u.source_rel)
    return {source: tuple(group) for group in by_command.values() if len(group) > 1
            for source in group}


def command_mates(sources: list[str], units: list[UnitRecord]) -> CommandMates:
    """Each of `sources` compiled in one command with others -> those others."""
    groups = command_groups(units)
    return {s: tuple(g for g in groups[s] if g != s) for s in sources if s in groups}


@dataclass
class SkipRecord:
    cwd: str
    argv: list[str]
    sources: list[str]
    reason: str
    detail: str = ""
    recorded_at: float = field(default_factory=time.time)


@dataclass
class LinkInput:
    kind: str     # "object", "archive", "shared", "unit" (compiled in the same call)
    path: str     # absolute; for "unit", the unit id
    hash: str | None = None


@dataclass
class LinkRecord:
    output: str            # absolute
    cwd: str
    compiler: str
    argv: list[str]
    kind: str              # "executable" or "shared"
    inputs: list[LinkInput]
    output_hash: str | None
    recorded_at: float = field(default_factory=time.time)


@dataclass
class ArchiveRecord:
    hash: str
    path: str
    members: list[tuple[str, str]]  # (member name, content hash), archive order


@dataclass(frozen=True)
class RecordedBuild:
    argv: list[str]
    cwd: str
