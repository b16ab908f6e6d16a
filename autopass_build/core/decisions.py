"""Decisions carried in the IR: one function's attribute, one call site's, one loop's
metadata, which LLVM keeps through a full or thin LTO link where a unit's flags do not
reach the code.  autopass's pass plugin (capture/pass_plugin.cpp) writes them into the
unit's IR at the start of its optimization pipeline.

A decision travels as one -mllvm option among a unit's flags, the way the database, the
journal, the strategies and the allowlist already carry flags:

    -mllvm -autopass-decision=KIND:FUNCTION:WHERE:HASH:PROPERTY=VALUE

    loop:lua_resume:2.1:3f9a0c11:vectorize.width=8    the 1st loop in the 2nd outermost
                                                      loop of lua_resume
    fn:luaH_get:-:0c1d2e3f:noinline=1                 an attribute of the function
    call:luaV_execute:luaH_get#2:77aa01bc:alwaysinline=1   the 2nd call to luaH_get in it

FUNCTION is the (mangled) name, or "~" and a hash of it when longer than 96 characters;
HASH is the hash of the loop's (a function's, a call's caller's) instructions when it was
tuned: a decision whose code changed is not applied and said, never applied to the wrong
loop.  The compile that carries one also loads the plugin (`plugin_flags`), so that clang
knows the option.  Runs in apply mode's compiles: standard library only.
"""

from __future__ import annotations

from autopass_build.core.errors import AutopassError
from autopass_build.core.records import Record

OPTION = "-autopass-decision="
NOT_APPLIED = "autopass-decision: not applied: "   # what the plugin says on stderr
MAX_FUNCTION = 97          # "~" and 16 hex digits, or a name of at most 96 characters
NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.$~")
HEX = frozenset("0123456789abcdef")
# property -> the values a decision may give it (what the plugin writes, and nothing else)
LOOP_PROPERTIES = {
    "vectorize.width": frozenset({1, 2, 4, 8, 16}),
    "vectorize.enable": frozenset({0, 1}),
    "interleave.count": frozenset({1, 2, 4, 8}),
    "unroll.count": frozenset({1, 2, 4, 8, 16}),
    "unroll.disable": frozenset({1}),
    "unroll.full": frozenset({1}),
    "distribute.enable": frozenset({0, 1}),
    "licm_versioning.disable": frozenset({1}),
}
FUNCTION_PROPERTIES = {name: frozenset({1}) for name in (
    "noinline", "alwaysinline", "cold", "hot", "minsize", "optsize")}
CALL_PROPERTIES = {name: frozenset({1}) for name in ("noinline", "alwaysinline")}
KINDS = {"loop": LOOP_PROPERTIES, "fn": FUNCTION_PROPERTIES, "call": CALL_PROPERTIES}


class DecisionError(AutopassError, ValueError):
    """Not a decision autopass writes; the message says which part."""


class Decision(Record):
    __slots__ = ("kind", "function", "where", "hash", "prop", "value")
    kind: str          # loop | fn | call
    function: str      # the function's key
    where: str         # a loop's path ("2.1"), a call's "callee#n", "-" for a function
    hash: str          # 8 hex digits: the code it was tuned on
    prop: str
    value: int

    def token(self) -> str:
        return f"{self.kind}:{self.function}:{self.where}:{self.hash}:{self.prop}={self.value}"

    def flags(self) -> tuple[str, str]:
        return ("-mllvm", OPTION + self.token())

    def target(self) -> tuple[str, str, str]:
        """What it decides about: the same loop, function or call site."""
        return (self.kind, self.function, self.where)

    def text(self) -> str:
        """As a reviewer reads it."""
        what = {"loop": f"loop {self.where} of {self.function}",
                "fn": f"function {self.function}",
                "call": f"call {self.where} in {self.function}"}[self.kind]
        setting = self.prop if self.prop in FUNCTION_PROPERTIES else f"{self.prop} {self.value}"
        return f"{what}: {setting}"


def parse(token: str) -> Decision:
    """The decision `token` spells (without the option's name), or DecisionError."""
    parts = token.split(":")
    if len(parts) != 5:
        raise DecisionError("a decision is KIND:FUNCTION:WHERE:HASH:PROPERTY=VALUE")
    kind, function, where, digest, setting = parts
    if kind not in KINDS:
        raise DecisionError(f"no decision kind {kind!r} (loop, fn, call)")
    if not 0 < len(function) <= MAX_FUNCTION or not set(function) <= NAME_CHARS:
        raise DecisionError(f"{function[:40]!r} is not a function's key")
    if len(digest) != 8 or not set(digest) <= HEX:
        raise DecisionError(f"{digest[:20]!r} is not a code hash (8 hex digits)")
    if not _where_ok(kind, where):
        raise DecisionError(f"{where[:40]!r} does not name a {kind}'s place")
    prop, _, value = setting.partition("=")
    allowed = KINDS[kind].get(prop)
    if allowed is None:
        raise DecisionError(f"no {kind} decision {prop!r}")
    if not value.isdigit() or int(value) not in allowed:
        raise DecisionError(f"{prop} takes {', '.join(map(str, sorted(allowed)))}")
    return Decision(kind, function, where, digest, prop, int(value))


def _where_ok(kind: str, where: str) -> bool:
    if kind == "fn":
        return where == "-"
    if kind == "loop":
        return all(part.isdigit() and len(part) <= 3 for part in where.split("."))
    callee, _, number = where.rpartition("#")
    return bool(callee) and set(callee) <= NAME_CHARS and len(callee) <= MAX_FUNCTION \
        and number.isdigit() and len(number) <= 4


def check_option(option: str) -> str:
    """Why the -mllvm option `option` is not a decision autopass writes ("" when it is)."""
    if not option.startswith(OPTION):
        return "not an autopass decision"
    try:
        parse(option[len(OPTION):])
    except DecisionError as error:
        return str(error)
    return ""


def of_flags(tokens: tuple[str, ...] | list[str]) -> list[Decision]:
    """The decisions among a unit's flags (the -mllvm options that carry them)."""
    found = []
    for before, token in zip(tokens, tokens[1:]):
        if before == "-mllvm" and token.startswith(OPTION):
            try:
                found.append(parse(token[len(OPTION):]))
            except DecisionError:
                pass        # the allowlist refused it before it got here
    return found


def without(tokens: tuple[str, ...]) -> tuple[str, ...]:
    """A unit's flags without their decisions."""
    kept: list[str] = []
    skip = False
    for index, token in enumerate(tokens):
        if skip:
            skip = False
        elif token == "-mllvm" and index + 1 < len(tokens) and \
                tokens[index + 1].startswith(OPTION):
            skip = True
        else:
            kept.append(token)
    return tuple(kept)


def plugin_flags(plugin: str) -> tuple[str, ...]:
    """What makes clang load the pass plugin so that it knows the decisions' option
    (-load, before the options are read) and runs its passes (-fpass-plugin)."""
    return ("-Xclang", "-load", "-Xclang", plugin, f"-fpass-plugin={plugin}")


NO_FUNCTION = "no such function in this unit"     # as the pass plugin says it


def not_applied(stderr: bytes) -> tuple[bytes, list[tuple[str, str]]]:
    """The plugin's lines taken out of a compile's stderr, and (token, why) of each."""
    kept, said = [], []
    for line in stderr.decode("utf-8", "replace").splitlines(keepends=True):
        if line.startswith(NOT_APPLIED):
            token, _, why = line[len(NOT_APPLIED):].strip().partition(" (")
            said.append((token, why.rstrip(")")))
        else:
            kept.append(line)
    return "".join(kept).encode(), said
