"""Flag sets and the allowlist every flag passes before autopass runs a compiler with it.

Flags come from the user (`autopass try`), from strategies and LLM agents, and from a
flags database that may have been edited by anyone: input, not trusted code.  A token
is accepted only if it matches the allowlist below; everything else (plugins, `-Xclang`,
`-B`, output or include paths, linker or assembler pass-through, response files,
profile paths, unknown `-mllvm` options, whitespace or control characters) is rejected
with the reason.  A denylist would miss the next dangerous option; this cannot.
"""

from __future__ import annotations

from autopass_build.core import decisions
from autopass_build.core.errors import AutopassError

# A unit (its id, or its source relative to the root) -> the flags it gets: a candidate,
# a composition's per-unit flags, what replay builds.
UnitFlags = dict[str, tuple[str, ...]]
OPT_LEVELS = frozenset({"-O0", "-O1", "-O2", "-O3", "-Os", "-Oz"})
# -f<name> and -fno-<name> for these names.
F_SWITCHES = frozenset("""
unroll-loops vectorize slp-vectorize inline-functions inline-hint-functions inline
omit-frame-pointer strict-aliasing fast-math finite-math-only unsafe-math-optimizations
associative-math reciprocal-math signed-zeros trapping-math math-errno jump-tables
merge-all-constants function-sections data-sections optimize-sibling-calls builtin
zero-initialized-in-bss split-machine-functions unique-section-names plt
strict-overflow wrapv delete-null-pointer-checks split-lto-unit exceptions
unwind-tables asynchronous-unwind-tables stack-protector stack-protector-strong
semantic-interposition align-functions
""".split())
# -fno-<name> only: a unit may leave link-time optimization (the whole-program stage adds
# -flto to every unit), never enter it -- a bitcode object the build's own linker cannot
# read would break the build.
F_OFF_ONLY = frozenset({"lto"})
# -f<name>=<value> with a numeric or short word value.
F_VALUED = frozenset({"align-functions", "align-loops", "fp-contract", "vectorize-width"})
# -m<feature> / -mno-<feature>, x86 instruction-set switches.
M_FEATURES = frozenset("""
sse sse2 sse3 ssse3 sse4.1 sse4.2 sse4 avx avx2 fma bmi bmi2 lzcnt popcnt f16c movbe
avx512f avx512bw avx512cd avx512dq avx512vl aes pclmul sha adx
""".split())
M_VALUED = frozenset({"arch", "tune", "prefer-vector-width"})
# -mllvm -<option>=<value> for these middle-end options.
MLLVM_OPTIONS = frozenset("""
inline-threshold inlinehint-threshold inlinecold-threshold hot-callsite-threshold
unroll-threshold unroll-count unroll-max-count unroll-partial-threshold
unroll-runtime unroll-allow-partial unroll-max-upperbound
force-vector-width force-vector-interleave vectorizer-maximize-bandwidth
enable-loop-distribute enable-loopinterchange enable-unroll-and-jam enable-loop-flatten
enable-interleaved-mem-accesses enable-masked-interleaved-mem-accesses
slp-threshold max-interleave-group-factor extra-vectorizer-passes
licm-versioning-invariant-threshold enable-gvn-hoist enable-gvn-sink
jump-threading-threshold max-uses-for-sinking align-all-functions
align-all-nofallthru-blocks align-all-blocks
""".split())


# Flags that act in the middle or back end only: replaying the unit's IR with them gives
# the same object as compiling its source with them (measured: docs/decisions.md, "Replay =
# apply").  Every other flag changes what the front end emits (`-Os` sets optsize,
# `-fno-unroll-loops` attaches loop metadata, `-ffast-math` sets per-instruction flags,
# `-march` sets function attributes), so a unit given one is recompiled from source.
MIDDLE_END_FLAGS = frozenset({
    "-funroll-loops", "-fvectorize", "-fno-vectorize", "-fslp-vectorize",
    "-fno-slp-vectorize", "-ffunction-sections", "-fno-function-sections",
    "-fdata-sections", "-fno-data-sections", "-fsplit-machine-functions",
    # the object as machine code instead of LTO bitcode: the same IR, compiled further
    "-fno-lto",
})
# -O levels replay from IR only between these (the IR was emitted at one of them).
IR_COMPATIBLE_LEVELS = frozenset({"-O2", "-O3"})
# Flags a unit compiled against a precompiled header can take.  clang refuses a PCH whose
# predefined macros or target differ from the compile's: -Os defines __OPTIMIZE_SIZE__,
# -march and -mtune change the target CPU, and the compile fails ("... was disabled in
# PCH file but is currently enabled"; measured with clang 19 on CMake's PCH of yaml-cpp).
# These change neither (each compiled against that PCH); so do -mllvm options and -O
# levels of the recorded one's kind (`pch_conflict`).
PCH_SAFE_FLAGS = MIDDLE_END_FLAGS | frozenset({
    "-fno-unroll-loops", "-finline-functions", "-fno-inline-functions",
    "-ffp-contract=off", "-ffp-contract=on", "-ffp-contract=fast",
})
_SIZE_LEVELS = frozenset({"-Os", "-Oz"})


def uses_precompiled_header(argv: list[str]) -> bool:
    """Whether a recorded compile includes a precompiled header (`-include-pch`, also as
    CMake passes it: `-Xclang -include-pch`)."""
    return any(t == "-include-pch" or t.startswith("-include-pch=") for t in argv)


def pch_conflict(tokens: tuple[str, ...], recorded_level: str) -> str:
    """Why a unit recorded at `recorded_level` against a precompiled header cannot take
    `tokens` (the header was built without them), or "" when it can."""
    for token in _outside_mllvm(tokens):
        if token in OPT_LEVELS:
            if (token in _SIZE_LEVELS) != (recorded_level in _SIZE_LEVELS) or \
                    (token == "-O0") != (recorded_level == "-O0"):
                return f"{token} changes the predefined macros the header was built with"
        elif token not in PCH_SAFE_FLAGS:
            return f"{token} may change what the header was built for"
    return ""


# Flags under which clang may reorder floating-point arithmetic: a unit's results then
# depend on how it is optimized (inlining, vectorization, a profile), not only on its source.
LOOSE_FP_FLAGS = frozenset({"-ffast-math", "-Ofast", "-funsafe-math-optimizations",
                            "-fassociative-math", "-freciprocal-math", "-ffp-contract=fast"})
_STRICT_FP_FLAGS = frozenset({"-fno-fast-math", "-fno-unsafe-math-optimizations"})


def loose_floating_point(argv: list[str]) -> str:
    """The flag that lets a compile reorder floating-point arithmetic, or ""."""
    loose = ""
    for token in argv:
        if token in LOOSE_FP_FLAGS:
            loose = token
        elif token in _STRICT_FP_FLAGS:
            loose = ""
    return loose


# IR-level PGO acts in the middle end too: its instrumentation and its profile's use are
# passes of the optimization pipeline, keyed to the IR they see (measured: an object
# compiled from the recorded IR with -fprofile-generate or -fprofile-use=P is the source
# compile's, byte for byte).  Only profiles autopass trains reach a replay, and it trains
# at the IR level (core/stage_flags.INSTRUMENT).
IR_PROFILE_FLAGS = ("-fprofile-generate", "-fcs-profile-generate", "-fprofile-use=")


def replayable_from_ir(tokens: tuple[str, ...], recorded_level: str) -> bool:
    """Whether compiling the unit's IR with `tokens` equals compiling its source with them."""
    same_level_kind = recorded_level in IR_COMPATIBLE_LEVELS
    return all(t in MIDDLE_END_FLAGS or (t in IR_COMPATIBLE_LEVELS and same_level_kind)
               or t.startswith(IR_PROFILE_FLAGS) for t in _outside_mllvm(tokens))


def _outside_mllvm(tokens: tuple[str, ...]):
    """The tokens that are not `-mllvm <option>` pairs (-mllvm options act in the middle
    and back end only: they replay from IR and leave a precompiled header valid)."""
    after_mllvm = False
    for token in tokens:
        if after_mllvm:
            after_mllvm = False
        elif token == "-mllvm":
            after_mllvm = True
        else:
            yield token


class FlagError(AutopassError, ValueError):
    pass


def _value_ok(value: str) -> bool:
    return 0 < len(value) <= 32 and all(c.isalnum() or c in "._-+" for c in value)


def check_token(token: str) -> str:
    """"" when `token` is allowed on its own, else the reason it is not."""
    if not token or any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in token):
        return "contains whitespace or control characters"
    if token in OPT_LEVELS:
        return ""
    if token.startswith("-fno-") and (token[5:] in F_SWITCHES or token[5:] in F_OFF_ONLY):
        return ""
    if token.startswith("-flto"):
        return ("link-time optimization is a whole-program stage (tune --stages lto), not a "
                "per-unit flag; a unit may only leave it (-fno-lto)")
    if token.startswith("-f"):
        name, _, value = token[2:].partition("=")
        if (not value and name in F_SWITCHES) or (value and name in F_VALUED and _value_ok(value)):
            return ""
    if token.startswith("-mno-") and token[5:] in M_FEATURES:
        return ""
    if token.startswith("-m") and token != "-mllvm":
        name, _, value = token[2:].partition("=")
        if (not value and name in M_FEATURES) or (value and name in M_VALUED and _value_ok(value)):
            return ""
    return "not in autopass's allowlist of optimization flags"


def check_mllvm(option: str) -> str:
    if not option.startswith("-") or any(c.isspace() or ord(c) < 32 for c in option):
        return "-mllvm needs one option like -inline-threshold=500"
    if option.startswith(decisions.OPTION):    # a decision carried in the IR: its grammar
        why = decisions.check_option(option)
        return f"-mllvm {option[:60]}: {why}" if why else ""
    name, _, value = option.lstrip("-").partition("=")
    if name not in MLLVM_OPTIONS:
        return f"-mllvm {option}: not an allowed LLVM option"
    if value and not _value_ok(value):
        return f"-mllvm {option}: value must be a number or short word"
    return ""


def validate(tokens: list[str] | tuple[str, ...]) -> tuple[str, ...]:
    """The tokens, unchanged, if every one is allowed; else FlagError naming the first bad one."""
    tokens = tuple(tokens)
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if token == "-mllvm":
            if i + 1 >= len(tokens):
                raise FlagError("-mllvm needs an option after it")
            why = check_mllvm(tokens[i + 1])
            i += 2
        else:
            why = check_token(token)
            i += 1
        if why:
            raise FlagError(f"flag {token!r} rejected: {why}")
    return tokens


def parse(text: str) -> tuple[str, ...]:
    """Split a flag string the way a shell would (no expansion), then validate it."""
    import shlex  # here: apply mode (once per compile) validates lists, never text

    try:
        tokens = shlex.split(text)
    except ValueError as error:
        raise FlagError(f"cannot split {text!r} into flags: {error}")
    return validate(tokens)
