"""What each whole-program stage adds to a build, computed in one place: the tuner
measures these flags and apply mode rebuilds them from the stage names a flags database
lists (never from flags stored in it).  Runs in apply mode's compiles: no imports beyond
core.

    pgo      every unit with -fprofile-use=<profile> (IR-level instrumentation, below)
    lto      every unit as LLVM bitcode (-flto), linked by lld at -O3 if a unit is -O3, else -O2
             (as lenient as GNU ld with a version script naming absent symbols);
             the objects are "fat" (-ffat-lto-objects: machine code too, the bitcode in a
             section) so that the build's own `ar`, `nm` and linkers of any LLVM version
             still read them, and lld is told to use the bitcode (--fat-lto-objects)
    thinlto  the same with -flto=thin
    cspgo    context-sensitive PGO on top of pgo: the profile then holds a second part,
             counted after inlining on the build it is used with; under (Thin)LTO that
             happens in the link's own pipeline, so the link gets -fprofile-use too
    layout   on top of pgo: machine-function splitting (each function's cold blocks to
             .text.split, out of the hot path's cache lines and pages) and the linker
             keeping .text.hot/.text.unlikely/.text.split grouped; lld orders functions
             by the profile's call graph on its own (--call-graph-profile-sort)
    direct   calls inside each project shared library bound to the library's own
             functions: -fno-semantic-interposition on every unit, -Bsymbolic-functions
             at each link (the target's, and the project libraries it loads)
    exttsp   under (Thin)LTO: the link's code generation orders each function's basic
             blocks by the ext-TSP model from the profile's counts (BOLT's model, done by
             the compiler: -mllvm -enable-ext-tsp-block-placement at the link)
    inline   under (Thin)LTO: the link's inliner with a threshold of 500 (-O3's is 250)
    bandwidth  under (Thin)LTO: the link's loop vectorizer picks the vector width by the
             narrowest type in a loop, not the widest (-vectorizer-maximize-bandwidth)
    bolt     the link with -Wl,--emit-relocs; the linked binary is then rewritten by BOLT
             with the profile shipped beside the database (core/bolt_commands.py)
    native   every unit with -march=native -ffp-contract=off (only with `tune --native`:
             the build then runs on this CPU family only)
"""

from __future__ import annotations

from autopass_build.core.records import Record

PGO, CSPGO, LTO, THINLTO, DIRECT, LAYOUT, BOLT, NATIVE = (
    "pgo", "cspgo", "lto", "thinlto", "direct", "layout", "bolt", "native")
EXTTSP, INLINE, BANDWIDTH = "exttsp", "inline", "bandwidth"
# This CPU's instruction set, keeping floating-point results: on a CPU with FMA,
# -march=native alone lets clang fuse `a * b + c` (-ffp-contract=on is its default),
# which rounds once instead of twice, so an FP program's output changes (LAME: another
# MP3 from -march=native, the same bytes with -ffp-contract=off).  Under LTO the choice
# travels in each function's target attributes, so the link's code generation keeps it.
NATIVE_FLAGS = ("-march=native", "-ffp-contract=off")
# PGO's instrumented build (the tuner's, and `apply --train`'s first build), at the IR
# level: the counters are placed in the optimizer's view of each function (after the
# pre-inliner), not the front end's.  On a held-out C++ application whose code is in a
# shared library, PGO + ThinLTO trained at the front end (-fprofile-instr-generate)
# executed 3.3 % more instructions than the same recipe at the IR level.  The same flag
# compiles alike from a unit's recorded IR and from its source, so a PGO build replays
# from the store (core/flags.replayable_from_ir).  libtool
# links a C++ shared library with -nostdlib and a `-lc` of its own, read before the
# profile runtime that clang appends: the runtime's atexit (glibc keeps it, hidden, in
# libc_nonshared.a) stayed undefined in the library, and the program's link failed
# ("hidden symbol `atexit' ... is referenced by DSO": hunspell).  Asked for up front, it
# is taken from `-lc` wherever that comes.
INSTRUMENT = "-fprofile-generate"
INSTRUMENT_LINK_FLAGS = (INSTRUMENT, "-Wl,-u,atexit")
USE = "-fprofile-use="     # reads a front-end profile (an older database's) as well
# CS-PGO's instrumented build: the pgo build's flags with these added, to every compile
# and link (under LTO the counters are placed at the link, after its inlining).
CS_INSTRUMENT = "-fcs-profile-generate"
CS_INSTRUMENT_FLAGS = (CS_INSTRUMENT, "-Wl,-u,atexit")
BOLT_LINK_FLAGS = ("-Wl,--emit-relocs",)   # BOLT moves code: it needs the relocations
# The direct step.  A shared library's exported function may be replaced at run time by
# one of the same name elsewhere (ELF interposition), so a call to it from inside its
# own library goes through the PLT, an indirect jump, and is never inlined by a
# compiler that honours that (clang inlines, but keeps the PLT call where it does not).
# C++ libraries export every function by default: each call between their functions
# pays it.  -fno-semantic-interposition lets the compiler call a function of its own
# unit directly (and full LTO, the whole library); -Bsymbolic-functions has the linker
# bind every call to a function the library defines to that definition (ThinLTO, and
# calls between units without LTO).  Neither changes what the library exports; a
# program that replaces a library's function and expects the library's own calls to
# reach the replacement would see a difference, which the output check is there for
# (Ubuntu links every package's libraries with -Bsymbolic-functions).
DIRECT_UNIT_FLAGS = ("-fno-semantic-interposition",)
DIRECT_LINK_FLAGS = ("-Wl,-Bsymbolic-functions",)
# The layout step: splitting is code generation's, so under (Thin)LTO the link does it.
SPLIT = "-fsplit-machine-functions"
GROUPED_TEXT = "-Wl,-z,keep-text-section-prefix"
# The link-level knobs: options of the link's own optimization and code generation under
# (Thin)LTO, where every unit's code is made again and a unit's own -mllvm options no
# longer reach it.  Whole-program choices, each measured on top of the build so far.
# On Lua (IR PGO + full LTO) the last two ran 0.8 % and 1.4 % fewer instructions.
LINK_KNOBS = {EXTTSP: "-enable-ext-tsp-block-placement", INLINE: "-inline-threshold=500",
              BANDWIDTH: "-vectorizer-maximize-bandwidth"}
LTO_LEVELS = ("-O2", "-O3")          # the link's LTO codegen level: the units' own
# libtool builds export lists with the system's `nm` and archives with its `ar`: with a
# bitcode-only object (jq) they read nothing (an older LLVM plugin, or none), the export
# list is empty and the link fails -- and a plain link, the fallback, cannot read bitcode.
FAT = "-ffat-lto-objects"
# The build linked with GNU ld, which lets a version script name symbols the library does
# not define; lld refuses by default (libxml2's libxml2.syms lists functions its
# configure left out: the LTO link of libxml2.so failed).  The stages switch the linker,
# not the build's rules.
LENIENT_VERSION_SCRIPTS = "-Wl,--undefined-version"
# The link options that drop the symbol table (mujs's release build links with -Wl,-s).
# lld refuses them beside --emit-relocs, and without symbols neither perf nor BOLT can
# tell one function from another.
STRIP_ALL = frozenset({"-s", "--strip-all"})


class StageFlags(Record):
    """What a composition adds: flags for every unit of the target, and for its link."""
    __slots__ = ("unit_flags", "link_flags")
    unit_flags: tuple[str, ...]
    link_flags: tuple[str, ...]


def profile_use(path: str) -> str:
    """The flag that builds with the PGO profile at `path`."""
    return USE + path


def lto_level(opt_levels: set[str] | frozenset[str]) -> str:
    """The LTO link's codegen level for units compiled at `opt_levels`: -O3 if any unit
    asked for it, else -O2 (-O1/-Os units are clamped up, as `flags` does)."""
    return "-O3" if "-O3" in opt_levels else "-O2"


# Which LTO a compile or link builds: its last LTO option, by this one table (every
# question "is this LTO, and which" is answered here).  -flto=auto and -flto=jobserver
# are gcc's spellings, which clang takes as full LTO.
LTO_OPTIONS = {"-flto": LTO, "-flto=full": LTO, "-flto=auto": LTO, "-flto=jobserver": LTO,
               "-flto=thin": THINLTO, "-fno-lto": "", "-flto=none": ""}


def lto_of(tokens) -> str:
    """LTO, THINLTO or "" (none): what a command with `tokens` builds."""
    mode = ""
    for token in tokens:
        if token in LTO_OPTIONS:
            mode = LTO_OPTIONS[token]
    return mode


def lto_mode(stages: tuple[str, ...]) -> str:
    """The -flto flag of a composition ("" when it has no LTO stage)."""
    return "-flto" if LTO in stages else "-flto=thin" if THINLTO in stages else ""


def flags(stages: tuple[str, ...], opt_level: str, profile_flag: str = "",
          lld: str | None = None) -> StageFlags:
    """The flags of `stages` for units compiled at `opt_level` (clamped to -O2/-O3 for
    the LTO link's codegen); `profile_flag` is PGO's -fprofile-use=, `lld` the
    linker's path (else clang's -fuse-ld=lld finds it)."""
    unit: list[str] = []
    link: list[str] = []
    if PGO in stages and profile_flag:
        unit.append(profile_flag)
    if NATIVE in stages:
        unit += NATIVE_FLAGS
    lto = lto_mode(stages)
    if lto:
        level = opt_level if opt_level in LTO_LEVELS else "-O2"
        unit += [lto, FAT]
        link += [lto, FAT, f"--ld-path={lld}" if lld else "-fuse-ld=lld",
                 "-Wl,--fat-lto-objects", LENIENT_VERSION_SCRIPTS, level]
        if CSPGO in stages and profile_flag:
            link.append(profile_flag)   # the profile's context-sensitive part: used there
        link += [f"-Wl,-mllvm,{LINK_KNOBS[s]}" for s in stages if s in LINK_KNOBS]
    if DIRECT in stages:
        unit += DIRECT_UNIT_FLAGS
        link += DIRECT_LINK_FLAGS
    if LAYOUT in stages:
        unit.append(SPLIT)
        link += [GROUPED_TEXT] + ([SPLIT] if lto else [])
    if BOLT in stages:
        link += BOLT_LINK_FLAGS
    return StageFlags(tuple(unit), tuple(link))


def without_strip_all(tokens: tuple[str, ...]) -> tuple[str, ...]:
    """One link argument without its symbol-stripping part: `-s`, `-Wl,-s` and
    `-Xlinker --strip-all` become (), `-Wl,-s,-O1` becomes `-Wl,-O1`; anything else
    comes back as it was."""
    if len(tokens) == 1 and tokens[0] in STRIP_ALL:
        return ()
    if len(tokens) == 2 and tokens[0] == "-Xlinker" and tokens[1] in STRIP_ALL:
        return ()
    if len(tokens) == 1 and tokens[0].startswith("-Wl,"):
        kept = [part for part in tokens[0][4:].split(",") if part not in STRIP_ALL]
        return ("-Wl," + ",".join(kept),) if kept else ()
    return tokens


def strips_all(argv: list[str] | tuple[str, ...]) -> bool:
    """Whether a link command drops the symbol table (see STRIP_ALL)."""
    return any(without_strip_all((arg,)) != (arg,) for arg in argv)   # -Xlinker -s: "-s"
