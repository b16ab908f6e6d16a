"""What the classifier (compiler_args.py) answers: the mode of a compiler call it can act
on (`Invocation`, every argument tagged with its role) or a `Skip` with a named reason,
in the style of ccache's argument processing: every bail-out has a name and the tests
assert those names.  Records of core/records.py: this runs in every compile."""

from __future__ import annotations

import os

from autopass_build.capture.option_table import (
    R_DEPENDENCY,
    R_LINK,
    R_LINK_INPUT,
    R_MODE,
    R_OUTPUT,
    R_SIDE_OUTPUT,
    R_SOURCE,
)
from autopass_build.core.records import Record

# ---- named outcomes -------------------------------------------------------------------
# Modes of an invocation we can act on.
COMPILE = "compile"            # -c: sources -> objects
COMPILE_AND_LINK = "compile_and_link"  # sources (and maybe objects) -> a linked binary
LINK = "link"                  # objects/archives -> a linked binary

# Reasons to pass a command through untouched.  "Quiet" ones are not worth recording
# (queries, probes, preprocessing); the others are compiles we saw but cannot capture.
QUERY = "query"                        # --version, -dumpmachine, -print-*, no inputs
VERBOSE = "verbose"                    # -v / -### : tools parse stderr, touch nothing
PREPROCESS = "preprocess"              # -E
DEPENDENCY_ONLY = "dependency_only"    # -M / -MM without -MD
ASSEMBLY_OUTPUT = "assembly_output"    # -S
SYNTAX_ONLY = "syntax_only"            # -fsyntax-only
ASSEMBLER_SOURCE = "assembler_source"  # only .s/.S inputs
PROBE = "probe"                        # conftest.c, CMake try_compile / compiler id
MISSING_ARGUMENT = "missing_argument"  # -o/-I/-x ... as the last argument
RESPONSE_FILE = "response_file"        # @file missing, unreadable or nested too deep
EMIT_LLVM = "emit_llvm"
SAVE_TEMPS = "save_temps"
PROFILE = "profile"
PCH = "pch"
MODULES = "modules"
MULTIPLE_ARCH = "multiple_arch"
STDIN_INPUT = "stdin_input"
CLANG_REJECTS = "clang_rejects"        # the build named gcc; clang refused, gcc built it
STDOUT_OUTPUT = "stdout_output"        # -o -: the object goes to standard output
UNSUPPORTED_LANGUAGE = "unsupported_language"
EMBED_BITCODE = "embed_bitcode"

# A precompiled header's own compile is quiet too: it holds no code of its own to tune,
# and the sources that include it are recorded with it.
QUIET_REASONS = frozenset({QUERY, VERBOSE, PREPROCESS, DEPENDENCY_ONLY, SYNTAX_ONLY, PROBE,
                           ASSEMBLY_OUTPUT, PCH})


# ---- results --------------------------------------------------------------------------
class Arg(Record):
    """One option with its value tokens, exactly as written (`("-o", "x.o")`)."""
    __slots__ = ("tokens", "role")
    tokens: tuple[str, ...]
    role: str


class Source(Record):
    __slots__ = ("path", "language", "arg_index")
    path: str           # as written on the command line
    language: str
    arg_index: int      # index into Invocation.args


class Skip(Record):
    """The command is passed through untouched; `reason` is one of the names above."""
    __slots__ = ("reason", "detail", "sources")
    _defaults = {"detail": "", "sources": ()}
    reason: str
    detail: str
    sources: tuple[str, ...]

    @property
    def quiet(self) -> bool:
        return self.reason in QUIET_REASONS


class Invocation(Record):
    __slots__ = ("mode", "args", "sources", "skipped_sources", "output", "link_inputs",
                 "opt_level", "used_response_file")
    _defaults = {"skipped_sources": (), "output": None, "link_inputs": (), "opt_level": "-O0",
                 "used_response_file": False}
    mode: str
    args: tuple[Arg, ...]             # the expanded command line, tagged
    sources: tuple[Source, ...]       # sources we capture IR for
    skipped_sources: tuple[Skip, ...]
    output: str | None                # as written (-o), or None
    link_inputs: tuple[str, ...]
    opt_level: str
    used_response_file: bool

    def object_path(self, source: Source) -> str | None:
        """Where the compiler writes the object for `source` (relative to cwd)."""
        if self.mode != COMPILE:
            return None  # compile-and-link: objects are temporaries
        if self.output is not None:
            return self.output
        base = os.path.basename(source.path)
        return os.path.splitext(base)[0] + ".o"

    def link_output(self) -> str | None:
        if self.mode == COMPILE:
            return None
        return self.output if self.output is not None else "a.out"

    def ir_args(self, source: Source, ir_output: str) -> list[str]:
        """The arguments that emit `source`'s pre-optimization IR and write nothing else."""
        out: list[str] = []
        for index, arg in enumerate(self.args):
            if arg.role in (R_OUTPUT, R_MODE, R_DEPENDENCY, R_SIDE_OUTPUT, R_LINK,
                            R_LINK_INPUT):
                continue
            if arg.role == R_SOURCE and index != source.arg_index:
                continue
            out.extend(arg.tokens)
        out += ["-w", "-Xclang", "-disable-llvm-passes", "-emit-llvm", "-c", "-o", ir_output]
        return out

    def flag_tokens(self, *roles: str) -> list[str]:
        return [t for a in self.args if a.role in roles for t in a.tokens]
