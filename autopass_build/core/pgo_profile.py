"""What a PGO profile is, and what clang says when it uses one: read in one place by the
tuner's builds, apply mode's compiles and `db status`.

An indexed profile (llvm-profdata's output) says in its header which instrumentation
wrote it: the front end's (-fprofile-instr-generate, keyed to the AST) or the IR's
(-fprofile-generate, keyed to each function's control flow as the optimizer sees it
after the pre-inliner), with or without a context-sensitive part (-fcs-profile-generate,
after inlining).  clang's -fprofile-use= reads both kinds; what it says of a function
whose data does not fit differs:

    front end   "profile data may be out of date: of N functions, M have mismatched
                data ..." once per file (-Wprofile-instr-out-of-date)
    IR          "function control flow change detected (hash mismatch) NAME ..." and,
                asked for (-pgo-warn-missing-function), "no profile data available for
                function NAME ..." once per function (-Wbackend-plugin)

Runs in apply mode's compiles: no imports beyond the standard library's `struct`, and
that only when a header is read.
"""

from __future__ import annotations

FRONTEND, IR, CS_IR = "frontend", "ir", "cs-ir"
MAGIC = b"\xfflprofi\x81"                 # an indexed profile's first 8 bytes
IR_BIT, CS_BIT = 1 << 56, 1 << 57         # in the version word that follows
# What an IR profile's use prints per function, with -Wbackend-plugin on.
MISMATCH = "function control flow change detected (hash mismatch) "
MISSING = "no profile data available for function "
# The warnings that make clang say them (and nothing else, and never as errors, whatever
# -Werror the unit has): what a build that counts the matches adds instead of -w.
# Warning options change no code.
MATCH_WARNINGS = ("-Wno-everything", "-Wbackend-plugin", "-Wno-error=backend-plugin",
                  "-mllvm", "-pgo-warn-missing-function")
# In a user's build: the IR profile's notes stay warnings under -Werror (a source
# changed since training must not fail the build), as the front end's do.
NOT_ERRORS = ("-Wno-error=backend-plugin", "-Wno-error=profile-instr-out-of-date")


def kind(path: str) -> str:
    """FRONTEND, IR or CS_IR by the profile's header; "" when `path` is not an indexed
    profile (unreadable, truncated to less than a header, or another file)."""
    import struct

    try:
        with open(path, "rb") as handle:
            head = handle.read(16)
    except OSError:
        return ""
    if len(head) < 16 or head[:8] != MAGIC:
        return ""
    version, = struct.unpack("<Q", head[8:])
    if not version & IR_BIT:
        return FRONTEND
    return CS_IR if version & CS_BIT else IR


# A context-sensitive record's hash has this bit set, and so does the hash clang prints
# when it meets a function of the context-sensitive part ("... main Hash = N ...").
CS_HASH_BIT = 1 << 60


def lto_compile(flags: tuple[str, ...] | list[str]) -> bool:
    """Whether a compile with `flags` makes LTO bitcode: its context-sensitive profile is
    used at the link, after the link's inlining.  What such a compile says of that part
    concerns only the machine code a fat LTO object carries beside the bitcode (for a
    linker that cannot read bitcode), inlined without the other units: not news."""
    from autopass_build.core.stage_flags import lto_of

    return bool(lto_of(flags))


class Said:
    """The functions an IR profile's use warned about, from clang's stderr; under LTO
    (`lto`), what it says of the profile's context-sensitive part is left out."""
    __slots__ = ("mismatched", "missing", "lto")

    def __init__(self, lto: bool = False) -> None:
        self.mismatched: set[str] = set()
        self.missing: set[str] = set()
        self.lto = lto

    def read(self, stderr: bytes) -> "Said":
        """Add what one compile said; returns self."""
        for line in stderr.decode("utf-8", "replace").splitlines():
            for phrase, found in ((MISMATCH, self.mismatched), (MISSING, self.missing)):
                if phrase in line and not (self.lto and _context_sensitive(line)):
                    name = line.split(phrase, 1)[1].split(" ", 1)[0]
                    if name:
                        found.add(name)
        return self

    def said(self, line: str) -> bool:
        """Whether `line` is one of the warnings this counts."""
        return (MISMATCH in line or MISSING in line) and not (
            self.lto and _context_sensitive(line))

    def __bool__(self) -> bool:
        return bool(self.mismatched or self.missing)

    def text(self, shown: int = 3) -> str:
        """One line: how many functions' data was dropped and why ("" when none)."""
        parts = []
        for names, why in ((self.mismatched, "whose control flow changed"),
                           (self.missing, "it has no data for")):
            if names:
                listed = ", ".join(sorted(names)[:shown]) + (", ..." if len(names) > shown
                                                             else "")
                parts.append(f"{len(names)} function{'s' if len(names) > 1 else ''} "
                             f"{why}: {listed}")
        return "; ".join(parts)


def _context_sensitive(line: str) -> bool:
    """Whether a warning's "Hash = N" is a context-sensitive record's."""
    digits = line.split(" Hash = ", 1)[1].split(" ", 1)[0] if " Hash = " in line else ""
    return digits.isdigit() and bool(int(digits) & CS_HASH_BIT)
