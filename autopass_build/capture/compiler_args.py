"""Pure classification of a gcc/clang command line.

`classify(args, cwd, cxx_driver)` returns an `Invocation` (what the command does, its
sources, output, and every argument tagged with a role) or a `Skip` with a *named*
reason, in the style of ccache's argument processing: every bail-out has a name and the
tests assert those names.  No I/O happens here except reading `@file` response files.

Arguments are `str` as Python decodes argv (utf-8 with surrogateescape), so arbitrary
bytes round-trip through `os.fsencode`.
"""

from __future__ import annotations

import os

from autopass_build.capture.invocation import (  # noqa: F401 - the classifier's answers
    ASSEMBLER_SOURCE,
    ASSEMBLY_OUTPUT,
    CLANG_REJECTS,
    COMPILE,
    COMPILE_AND_LINK,
    DEPENDENCY_ONLY,
    EMBED_BITCODE,
    EMIT_LLVM,
    LINK,
    MISSING_ARGUMENT,
    MODULES,
    MULTIPLE_ARCH,
    PCH,
    PREPROCESS,
    PROBE,
    PROFILE,
    QUERY,
    QUIET_REASONS,
    RESPONSE_FILE,
    SAVE_TEMPS,
    STDIN_INPUT,
    STDOUT_OUTPUT,
    SYNTAX_ONLY,
    UNSUPPORTED_LANGUAGE,
    VERBOSE,
    Arg,
    Invocation,
    Skip,
    Source,
)
from autopass_build.capture.option_table import (
    DEPENDENCY_FILE,
    DEPENDENCY_ONLY_BIT,
    JOINED,
    QUERY_BIT,
    R_DEBUG,
    R_DEPENDENCY,
    R_LANGUAGE,
    R_LINK_INPUT,
    R_OPTIMIZATION,
    R_OTHER,
    R_SOURCE,
    R_WARNING,
    SEPARATE,
    STAGE,
    SYNTAX_ONLY_BIT,
    VERBOSE_BIT,
    lookup,
)
from autopass_build.capture.response_files import (
    ResponseFileError,
    read_response_file,
)

SOURCE_LANGUAGES = {
    ".c": "c", ".i": "cpp-output",
    ".cc": "c++", ".cp": "c++", ".cxx": "c++", ".cpp": "c++", ".CPP": "c++", ".c++": "c++",
    ".C": "c++", ".ii": "c++-cpp-output",
    ".m": "objective-c", ".mi": "objective-c-cpp-output",
    ".mm": "objective-c++", ".M": "objective-c++", ".mii": "objective-c++-cpp-output",
    ".s": "assembler", ".S": "assembler-with-cpp", ".sx": "assembler-with-cpp",
    ".h": "header", ".hh": "header", ".hpp": "header", ".hxx": "header", ".H": "header",
    ".cu": "cuda", ".cl": "cl", ".f": "fortran", ".f90": "fortran", ".F90": "fortran",
    ".ll": "ir", ".bc": "ir", ".cppm": "c++-module", ".ccm": "c++-module",
    ".cxxm": "c++-module", ".c++m": "c++-module", ".ixx": "c++-module",
}
# Languages whose pre-optimization IR we capture.
CAPTURED_LANGUAGES = frozenset({"c", "c++", "cpp-output", "c++-cpp-output", "objective-c",
                                "objective-c++"})
LANGUAGE_SKIP_REASON = {
    "assembler": ASSEMBLER_SOURCE, "assembler-with-cpp": ASSEMBLER_SOURCE,
    "header": PCH, "c-header": PCH, "c++-header": PCH, "ir": EMIT_LLVM,
    "c++-module": MODULES,
}
CXX_PROMOTED = {"c": "c++", "cpp-output": "c++-cpp-output"}  # clang++ compiles .c as C++

MAX_RESPONSE_FILES = 64
STAGE_ORDER = {"": 0, "-c": 1, "-S": 2, "-E": 3}   # gcc: -E wins over -S wins over -c


# ---- classification -------------------------------------------------------------------
def _language_of(path: str, forced: str | None) -> str:
    if forced is not None:
        return forced
    ext = os.path.splitext(path)[1]
    return SOURCE_LANGUAGES.get(ext, SOURCE_LANGUAGES.get(ext.lower(), "")) if ext else ""


def _is_probe(path: str) -> bool:
    base = os.path.basename(path)
    stem = base.split(".", 1)[0]
    # conftest.c, and gnulib's conftest1.c / conftest2.c
    return ((stem.startswith("conftest") and (stem[8:] == "" or stem[8:].isdigit()))
            or base.startswith("CMakeCCompilerId")
            or base.startswith("CMakeCXXCompilerId")
            or base.startswith("CMakeCCompilerABI") or base.startswith("CMakeCXXCompilerABI")
            or "/CMakeScratch/TryCompile-" in path or "/CMakeTmp/" in path
            or "/CompilerIdC/" in path or "/CompilerIdCXX/" in path
            or base.startswith("cmTC_")
            or "/_CMakeLTOTest-" in path       # check_ipo_supported's probe project
            or "meson-private" in path.split("/")    # meson's sanity checks and probes
            # `-x c++ /dev/null -o /dev/null`: does the compiler take a flag (ninja's
            # configure.py); a device is no source to tune, /dev/null no object
            or path.startswith(("/dev/", "/proc/")))


def _optimization_role(token: str) -> str:
    if token.startswith(("-W", "-pedantic")) or token == "-w":
        return R_WARNING
    if token.startswith("-g"):
        return R_DEBUG
    if token.startswith("-std=") or token.startswith("--std="):
        return R_LANGUAGE
    if token.startswith(("-O", "-f", "-m")):
        return R_OPTIMIZATION
    return R_OTHER


def _unsupported_flag(token: str) -> str:
    if token == "-emit-llvm":
        return EMIT_LLVM
    if token.startswith(("-save-temps", "--save-temps")):
        return SAVE_TEMPS
    if (token.startswith(("-fprofile-", "-fcs-profile-", "-fauto-profile"))
            and not token.startswith("-fprofile-list")) or token in ("--coverage",
                                                                     "-fbranch-probabilities"):
        return PROFILE
    if token.startswith(("-fmodules", "-fmodule-file", "-fprebuilt-module-path", "-fcxx-modules",
                         "-fmodule-map-file", "-fimplicit-module-maps")) \
            and not token.startswith("-fmodules-ts=") and token != "-fno-modules":
        return MODULES
    if token.startswith("-fembed-bitcode") and token != "-fembed-bitcode=off":
        return EMBED_BITCODE
    return ""


def classify(args: list[str], cwd: str = ".", cxx_driver: bool = False) -> Invocation | Skip:
    """Classify the arguments (without argv[0]) of a compiler call run in `cwd`."""
    try:
        return _classify(list(args), cwd, cxx_driver)
    except ResponseFileError as error:
        return Skip(RESPONSE_FILE, str(error))


def _classify(tokens: list[str], cwd: str, cxx_driver: bool) -> Invocation | Skip:
    """One pass over the arguments (`_Scan` keeps what they said), then the verdict."""
    scan = _Scan(cxx_driver)
    i = 0
    while i < len(tokens):
        token = tokens[i]
        i += 1
        if token.startswith("@") and len(token) > 1:
            # Spliced in place, so an @file inside it is expanded in turn; the count
            # bounds a file that includes itself.
            scan.rsp_expansions += 1
            if scan.rsp_expansions > MAX_RESPONSE_FILES:
                raise ResponseFileError(f"more than {MAX_RESPONSE_FILES} response files "
                                        "(one includes itself?)")
            tokens[i - 1:i] = read_response_file(token[1:], cwd)
            i -= 1
            continue
        if not token.startswith("-") or token == "-":
            scan.positional(token)
            continue
        entry = lookup(token)
        if entry is None:
            scan.flag(token)
            continue
        name, bits, role = entry
        value = None
        if token == name and bits & SEPARATE:
            if i >= len(tokens):
                return Skip(MISSING_ARGUMENT, f"{token} needs a value")
            value = tokens[i]
            i += 1
        elif token != name and bits & JOINED:
            value = token[len(name):]
        scan.option(token, name, bits, role, value)
    return _verdict(scan, cwd)


class _Scan:
    """What the arguments said, as `_classify` reads them one at a time.  A plain class
    with slots: this runs in every compile, where dataclasses cost an import."""
    __slots__ = ("cxx_driver", "tagged", "sources", "skipped", "inputs", "link_inputs",
                 "output", "forced_language", "stage", "dependency_only", "dependency_file",
                 "opt_level", "arch_count", "unsupported", "rsp_expansions", "saw_query",
                 "saw_verbose", "syntax_only")

    def __init__(self, cxx_driver: bool) -> None:
        self.cxx_driver = cxx_driver
        self.tagged: list[Arg] = []
        self.sources: list[Source] = []
        self.skipped: list[Skip] = []
        self.inputs: list[str] = []
        self.link_inputs: list[str] = []
        self.output: str | None = None
        self.forced_language: str | None = None
        self.stage = ""              # "", "-c", "-S", "-E"
        self.dependency_only = self.dependency_file = False
        self.opt_level = "-O0"
        self.arch_count = self.rsp_expansions = 0
        self.unsupported = ""
        self.saw_query = self.saw_verbose = self.syntax_only = False

    def add(self, role: str, *toks: str) -> None:
        self.tagged.append(Arg(tuple(toks), role))

    def option(self, token: str, name: str, bits: int, role: str, value: str | None) -> None:
        """An option of the table (`name`, with `value` where it takes one)."""
        if name == "-o":
            self.output = value
        elif name == "-x":
            self.forced_language = None if value == "none" else value
        elif name == "-Wp," and any(p.startswith("-M") for p in token[4:].split(",")):
            self.dependency_file, role = True, R_DEPENDENCY
        elif name == "-arch":
            self.arch_count += 1
        elif name == "-Xclang" and value is not None:
            reason = _unsupported_flag(value)
            if value in ("-emit-llvm", "-emit-llvm-bc"):
                reason = EMIT_LLVM
            self.unsupported = self.unsupported or reason
        if bits & STAGE and STAGE_ORDER[token] > STAGE_ORDER[self.stage]:
            self.stage = token
        self.dependency_only = self.dependency_only or bool(bits & DEPENDENCY_ONLY_BIT)
        self.dependency_file = self.dependency_file or bool(bits & DEPENDENCY_FILE)
        self.saw_query = self.saw_query or bool(bits & QUERY_BIT)
        self.saw_verbose = self.saw_verbose or bool(bits & VERBOSE_BIT)
        self.syntax_only = self.syntax_only or bool(bits & SYNTAX_ONLY_BIT)
        self.add(role, token, *(() if value is None or token != name else (value,)))

    def flag(self, token: str) -> None:
        """A flag the table does not hold: an optimization or code-generation flag."""
        if token.startswith("-O"):
            self.opt_level = token
        self.unsupported = self.unsupported or _unsupported_flag(token)
        if token.startswith("-arch="):
            self.arch_count += 1
        self.add(_optimization_role(token), token)

    def positional(self, token: str) -> None:
        """A source (by its language), a linker input, or `-` (standard input)."""
        self.inputs.append(token)
        if token == "-":
            self.unsupported = self.unsupported or STDIN_INPUT
            self.add(R_SOURCE, token)
            return
        language = _language_of(token, self.forced_language)
        if self.cxx_driver and self.forced_language is None:
            language = CXX_PROMOTED.get(language, language)
        if language == "":
            self.link_inputs.append(token)
            self.add(R_LINK_INPUT, token)
            return
        self.add(R_SOURCE, token)
        if language in CAPTURED_LANGUAGES:
            self.sources.append(Source(token, language, len(self.tagged) - 1))
        else:
            reason = LANGUAGE_SKIP_REASON.get(language, UNSUPPORTED_LANGUAGE)
            self.skipped.append(Skip(reason, f"{token}: language {language}", (token,)))


def _verdict(scan: _Scan, cwd: str) -> Invocation | Skip:
    """What the call does, or the named reason it is not recorded, in the order the
    reasons win (a query before anything; a probe before an unsupported flag)."""
    all_sources = tuple(s.path for s in scan.sources) + tuple(
        p for s in scan.skipped for p in s.sources)
    early = _skipped_before_sources(scan, cwd, all_sources)
    if early is not None:
        return early
    if not scan.sources and scan.skipped:
        if all(s.reason == ASSEMBLER_SOURCE for s in scan.skipped):
            return Skip(ASSEMBLER_SOURCE, "", all_sources)
        if all(s.reason == PCH for s in scan.skipped) and not scan.link_inputs:
            return Skip(PCH, "", all_sources)     # with -c or without: clang stops at the PCH
        if scan.stage == "-c":
            return scan.skipped[0]
    if scan.stage == "-c":
        mode = COMPILE
        if len(all_sources) > 1 and scan.output is not None:
            return Skip(MISSING_ARGUMENT, "-o with -c and several sources", all_sources)
    elif scan.sources or scan.skipped:
        mode = COMPILE_AND_LINK
    else:
        mode = LINK
    return Invocation(mode=mode, args=tuple(scan.tagged), sources=tuple(scan.sources),
                      skipped_sources=tuple(scan.skipped), output=scan.output,
                      link_inputs=tuple(scan.link_inputs), opt_level=scan.opt_level,
                      used_response_file=scan.rsp_expansions > 0)


def _skipped_before_sources(scan: _Scan, cwd: str, all_sources: tuple[str, ...]
                            ) -> Skip | None:
    """A call that is not a compile to record whatever its sources: a query, a
    preprocess, a configure probe, an unsupported flag or output."""
    if scan.saw_query:
        return Skip(QUERY)
    if scan.saw_verbose:
        return Skip(VERBOSE)
    if not scan.inputs:
        return Skip(QUERY, "no input files")
    if scan.stage == "-E":
        return Skip(PREPROCESS)
    if scan.dependency_only and not scan.dependency_file:
        return Skip(DEPENDENCY_ONLY)
    if scan.syntax_only:
        return Skip(SYNTAX_ONLY)
    if scan.stage == "-S":
        return Skip(ASSEMBLY_OUTPUT)
    paths = list(all_sources) + ([scan.output] if scan.output else []) + [cwd + "/"]
    if any(_is_probe(p) for p in paths):
        return Skip(PROBE)
    if scan.unsupported:
        return Skip(scan.unsupported, "", all_sources)
    if scan.output == "-":
        return Skip(STDOUT_OUTPUT, "", all_sources)
    if scan.arch_count > 1:
        return Skip(MULTIPLE_ARCH, "", all_sources)
    return None
