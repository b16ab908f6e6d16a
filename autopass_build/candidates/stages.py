"""Whole-program stages: what each adds to the build, and whether it can run here.

A composition of stages (PGO, full LTO, ThinLTO) is a build like any candidate: per-unit
flags plus link flags, replayed from the store and measured against the recorded build.
BOLT comes after the link: it rewrites the binary with a profile of that exact binary
(candidates/bolt.py), so it is measured last, on the build the run settled on.
The flags each stage adds are core/stage_flags.py's table, the one place they are
computed (never from a database or an LLM), so apply mode rebuilds them from the stage
names a database lists; this module decides which compositions can run here and in what
order.  PGO's profile is trained by candidates/pgo.py; native is tried only with `tune
--native`, on top of the link-time composition chosen (before the search); CS-PGO, like
BOLT, on top of the build the run settled on (a context-sensitive profile is counted after
inlining, so it describes one build).

LTO units compile from source (not from the stored IR): the front end's -flto output is
what apply mode builds, so what is measured is what ships.  Another binary of the build
that links the same objects (a library in two programs) gets the LTO link in apply mode
too: the wrapper sees bitcode among its inputs.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import Enum

from autopass_build.core import bolt_commands as bolt
from autopass_build.core import stage_flags, toolchain
from autopass_build.core.names import STAGES
from autopass_build.core.stage_flags import StageFlags
from autopass_build.store.targets import Target


class Stage(str, Enum):
    PGO = stage_flags.PGO
    CSPGO = stage_flags.CSPGO
    LTO = stage_flags.LTO
    THINLTO = stage_flags.THINLTO
    DIRECT = stage_flags.DIRECT
    LAYOUT = stage_flags.LAYOUT
    EXTTSP = stage_flags.EXTTSP
    INLINE = stage_flags.INLINE
    BANDWIDTH = stage_flags.BANDWIDTH
    BOLT = stage_flags.BOLT
    NATIVE = stage_flags.NATIVE

    def __str__(self) -> str:
        return self.value


# Compositions in the order a run measures them while its stage budget (and its share of
# --time) lasts: the likeliest to be the fastest first.  PGO + full LTO (on an
# interpreter 1.17x over -O3, PGO 1.09x, LTO 1.09x), then its closest rival, PGO +
# ThinLTO: the two are a coin toss on Lua and the best by hand on SQLite, whose builds
# are slow enough that `--time 10m` measured two compositions, PGO + LTO and LTO alone,
# which PGO + LTO contains.  The single stages come after: they win only where PGO or
# LTO hurts a program.
COMPOSITIONS: tuple[tuple[Stage, ...], ...] = (
    (Stage.PGO, Stage.LTO), (Stage.PGO, Stage.THINLTO), (Stage.LTO,), (Stage.PGO,),
    (Stage.THINLTO,),
)


def lto_of(tokens: Iterable[str]) -> Stage | None:
    """The LTO stage a compile with `tokens` builds (core/stage_flags.lto_of; None:
    none)."""
    mode = stage_flags.lto_of(tokens)
    return Stage(mode) if mode else None


def thin_bitcode(argv: list[str], flags: tuple[str, ...]) -> bool:
    """Whether a unit compiled by `argv` with `flags` appended writes ThinLTO bitcode.
    A compile of such a unit's IR is not the compile of its source that apply mode
    runs: it keeps the names of local values, which change the module's hash, hence the
    names ThinLTO gives the functions it promotes, and the linked code (glslang: a BOLT
    profile of the one did not fit the other)."""
    return lto_of((*argv, *flags)) == Stage.THINLTO


def recorded_lto(argvs: list[list[str]]) -> Stage | None:
    """The LTO stage the recorded build has of its own, given its units' arguments: a
    CMake Release build with INTERPROCEDURAL_OPTIMIZATION compiles every unit with
    -flto=thin.  None when it has none, or when its units do not agree."""
    modes = {lto_of(argv) for argv in argvs}
    return modes.pop() if len(modes) == 1 else None


def effective(composition: tuple[Stage, ...], recorded: Stage | None) -> tuple[Stage, ...]:
    """What `composition` builds on a recorded build that is LTO already: without an
    LTO stage of its own, the recorded one stays (pgo on a ThinLTO build is
    pgo+thinlto)."""
    if recorded is None or any(s in (Stage.LTO, Stage.THINLTO) for s in composition):
        return composition
    return tuple(s for s in Stage if s in composition or s == recorded)


def parse(names: str | list[str] | tuple[str, ...]) -> tuple[Stage, ...]:
    """`"pgo,lto"` or `["pgo", "lto"]` as stages; ValueError naming a stage that is not one."""
    items = names.split(",") if isinstance(names, str) else list(names)
    stages = []
    for item in (i.strip() for i in items if i.strip()):
        if item == Stage.NATIVE:
            raise ValueError("the native stage is tried with --native ([tune].native = "
                             "true), not listed among the stages")
        try:
            stages.append(Stage(item))
        except ValueError:
            raise ValueError(f"no stage {item!r}; stages: {', '.join(STAGES)} (none: an "
                             "empty list, or tune --no-stages)") from None
    return tuple(dict.fromkeys(stages))


def name(composition: tuple[Stage, ...]) -> str:
    """A composition as journals and users name it: "pgo+lto" ("none": no stage)."""
    return "+".join(s.value for s in composition) or "none"


def of_name(text: str) -> tuple[Stage, ...]:
    """A composition's name ("pgo+lto"; "" or "none": none) as its stages, the one place
    a name is taken apart; a part that names no stage (a later version's journal) is
    left out."""
    known = {s.value: s for s in Stage}
    return tuple(known[part] for part in text.split("+") if part in known)


# The steps measured on top of a build, each A/B'd against that build without it (not
# against the recorded build), in the order they are taken, with the words a user reads
ON_TOP = {Stage.NATIVE: "-march=native", Stage.DIRECT: "direct calls", Stage.CSPGO: "CS-PGO",
          Stage.LAYOUT: "layout", Stage.EXTTSP: "ext-TSP block order at the link",
          Stage.INLINE: "the link's inliner at 500", Stage.BANDWIDTH: "the link's vectorizer "
          "by bandwidth", Stage.BOLT: "BOLT"}
# The link-level knobs (core/stage_flags.LINK_KNOBS, in its order): options of the link's
# own code generation, so only where the composition links across units.
LINK_KNOBS = tuple(Stage(knob) for knob in stage_flags.LINK_KNOBS)
# The steps after the per-file search, in the order they are measured, each on the build
# so far (tuning/steps_on_top.py); BOLT last, as it rewrites the binary that is linked.
AFTER_SEARCH = (Stage.DIRECT, Stage.CSPGO, Stage.LAYOUT, *LINK_KNOBS, Stage.BOLT)


def step_on_top(composition: tuple[Stage, ...]) -> Stage | None:
    """The step `composition` was measured for against the build without it; None for a
    link-time composition (PGO, LTO, ThinLTO), measured against the recorded build."""
    return composition[-1] if composition and composition[-1] in ON_TOP else None


def link_time(composition: tuple[Stage, ...]) -> bool:
    """Whether `composition` holds no step on top (it is measured against the
    recording)."""
    return not any(s in ON_TOP for s in composition)


def lld() -> str | None:
    """ld.lld of the LLVM the compiler comes from."""
    return toolchain.find_tool("ld.lld")


def unavailable(stage: Stage, target: Target) -> str:
    """Why `stage` cannot run for `target` here ("" when it can)."""
    if stage in (Stage.LTO, Stage.THINLTO):
        if lld() is None:
            return (f"lld not found (sudo apt-get install lld-{toolchain.DEFAULT_LLVM_VERSION})")
        if target.kind != "executable":
            return f"{target.output_rel} is a {target.kind}; LTO is tuned on executables"
    if stage == Stage.BOLT:
        if target.kind != "executable":
            return f"{target.output_rel} is a {target.kind}; BOLT is tuned on executables"
        if target.strips:
            return (f"{target.output_rel} is linked with -s (no symbol table), which BOLT "
                    "needs; drop -s (or -Wl,-s) from its link to let autopass try BOLT")
        if bolt.statically_linked(target.output):
            return (f"{target.output_rel} is linked statically (-static), and BOLT "
                    "instruments only dynamically linked programs")
        return bolt.missing()
    if stage in (Stage.CSPGO, Stage.LAYOUT, Stage.DIRECT, *LINK_KNOBS) \
            and target.kind != "executable":
        return f"{target.output_rel} is a {target.kind}; {stage} is tuned on executables"
    if stage in (Stage.PGO, Stage.CSPGO) and toolchain.find_tool("llvm-profdata") is None:
        return (f"llvm-profdata not found (sudo apt-get install "
                f"llvm-{toolchain.DEFAULT_LLVM_VERSION})")
    return ""


def flags(composition: tuple[Stage, ...], opt_level: str, profile_flag: str = "") -> StageFlags:
    """The flags of `composition` (core/stage_flags.py computes them for apply mode too)."""
    return stage_flags.flags(tuple(s.value for s in composition), opt_level, profile_flag,
                             lld())
