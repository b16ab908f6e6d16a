"""Apply mode: the flags database's entry for this compile's source, checked, or why not.

Runs inside the wrapper (once per compile).  The database is read by its one loader
(`core/flags_db.py`, which says what it refuses) through capture/apply/trusted_db.py, which
refuses an untrusted file and keeps what it parsed per file version, so that a build
does not pay for `json` in every compile.  The database is
input, not trusted code: its flags pass the allowlist again; a
database that cannot be read, has another schema, is writable by others or owned by
someone else gives a warning and the default flags; an entry whose source changed since
it was measured (stale), or whose compiler differs, is skipped with a warning -- unless
the policy says otherwise:

    warn          (default) warning, default flags: the build never breaks over the database
    error         the compile fails with the reason (for release pipelines that insist)
    apply-anyway  stale or other-compiler entries are applied all the same (never flags
                  the allowlist rejects)

The shipped profiles' part of the answer is applied_profiles.py's, BOLT's after a link
applied_bolt.py's; the answer itself is a `ToApply` (to_apply.py).
"""

from __future__ import annotations

import os

from autopass_build.capture.apply.applied_bolt import bolt_decision
from autopass_build.capture.apply.applied_profiles import UNTRAINED_QUIET, profile_decision
from autopass_build.capture.apply.to_apply import ToApply, refuse
from autopass_build.capture.apply.trusted_db import load
from autopass_build.capture.record.spool import COMPILERS, TMP, Spool
from autopass_build.core import decisions, flags_db
from autopass_build.core.apply_terms import ApplyPolicy, TrainPhase
from autopass_build.core.files import (
    hash_file,
    relative_to,
    user_cache_dir,
)
from autopass_build.core.flags_db import FlagsDb
from autopass_build.core.names import FLAGS_DB_NAME
from autopass_build.core.stage_flags import (
    BOLT,
    CS_INSTRUMENT,
    CS_INSTRUMENT_FLAGS,
    DIRECT,
    INSTRUMENT,
    INSTRUMENT_LINK_FLAGS,
    LAYOUT,
    LTO,
    NATIVE,
    PGO,
    THINLTO,
    StageFlags,
    lto_mode,
)
from autopass_build.core.stage_flags import flags as stage_flags


def db_path(root: str, explicit: str | None) -> str:
    return os.path.abspath(explicit) if explicit else os.path.join(root, FLAGS_DB_NAME)


def decide_call(parsed, cwd: str, root: str, db_file: str | None, policy: ApplyPolicy,
                compiler_path: str, train_phase: TrainPhase = TrainPhase.NONE
                ) -> ToApply | None:
    """The ToApply for one classified compiler call, or None: nothing to add (not a
    compile or a link, no database, no entry, no stage).  `train_phase`: `apply
    --train`'s build, NONE for a plain apply."""
    from autopass_build.capture.compiler_args import (
        COMPILE,
        COMPILE_AND_LINK,
        LINK,
        Invocation,
    )

    if not isinstance(parsed, Invocation) or parsed.mode not in (COMPILE, COMPILE_AND_LINK,
                                                                 LINK):
        return None
    if train_phase is TrainPhase.INSTRUMENT:
        return instrumented(parsed.mode)
    decision = _from_database(parsed, cwd, root, db_file, policy, compiler_path, train_phase)
    if train_phase is TrainPhase.CS_INSTRUMENT:   # the database's build, counted after inlining
        return cs_instrumented(decision, parsed.mode)
    return decision


def cs_instrumented(decision: ToApply | None, mode: str) -> ToApply:
    """`apply --train`'s second build for CS-PGO: the database's build (with the
    profile the first build trained) plus the context-sensitive instrumentation, on
    every compile and every link."""
    from autopass_build.capture.compiler_args import COMPILE, LINK

    extra = {LINK: CS_INSTRUMENT_FLAGS, COMPILE: (CS_INSTRUMENT,)}.get(mode, CS_INSTRUMENT_FLAGS)
    decision = decision or ToApply()
    return ToApply(decision.flags + extra, decision.warning, decision.error,
                    decision.profiled, decision.bolt)


def _from_database(parsed, cwd: str, root: str, db_file: str | None, policy: ApplyPolicy,
                   compiler_path: str, train_phase: TrainPhase) -> ToApply | None:
    """decide_call's answer from the database (see there)."""
    from autopass_build.capture.compiler_args import COMPILE, COMPILE_AND_LINK, LINK

    path = db_path(root, db_file)
    db, why = load(path)
    if db is None:   # said by each compile; a link adds nothing to a refused database
        refused = why and parsed.mode != LINK
        return ToApply((), why, policy is ApplyPolicy.ERROR) if refused else None
    other = another_compiler(db, compiler_path)
    if other and flags_db.applies_anything(db) and policy is not ApplyPolicy.APPLY_ANYWAY:
        return refuse(other, policy)       # the same words for every compile: said once
    profile = profile_decision(db, path, policy)
    stage, stage_warning = stage_decision(db, policy, profile.flags[0] if profile.flags else "")
    link = ToApply()
    # Only LTO, layout and BOLT change a link (native is the compiles' alone): no other
    # link reads its inputs to look for bitcode.
    target = db.target
    if parsed.mode != COMPILE and target is not None and (stage or stage_warning) and (
            lto_mode(target.stages) or {BOLT, LAYOUT, DIRECT} & set(target.stages)):
        output = os.path.normpath(os.path.join(cwd, parsed.link_output() or "a.out"))
        output_rel = relative_to(output, root)
        is_target = output_rel == target.output
        library = target.bolt_library(output_rel) if BOLT in target.stages else None
        from autopass_build.capture.apply.bitcode import links_bitcode
        loaded = output_rel in target.libraries    # the direct stage's
        if is_target or library or loaded or links_bitcode(parsed, cwd):
            # The target, a library BOLT rewrites or the target loads (direct calls), or
            # another binary of the build that links its bitcode units (a library's
            # objects in two programs): each needs the stages' link (LTO's, BOLT's
            # relocations, -Bsymbolic-functions).
            link = ToApply(stage.link_flags if stage else (), stage_warning)
        plan = (flags_db.BoltLibrary(target.output, target.bolt, target.bolt_binary)
                if is_target and BOLT in target.stages else library)
        if train_phase in (TrainPhase.FINAL, TrainPhase.CS_INSTRUMENT):
            plan = None     # `apply --train` trains BOLT on the linked target itself
        if plan is not None:
            stale = target.bolt_stale if plan.output == target.output else None
            link = bolt_decision(plan, path, output, link, policy, stale)
            if link.error:
                return link
    if parsed.mode == LINK:
        return link if link.flags or link.warning else None
    sources = [relative_to(os.path.normpath(os.path.join(cwd, s.path)), root)
               for s in parsed.sources]
    if profile.error:
        return profile
    several = len(sources) != 1 or bool(parsed.skipped_sources)
    ours = (db.target is not None and not parsed.skipped_sources and bool(sources)
            and all(s in db.target.units for s in sources))
    staged = stage.unit_flags if stage and ours else ()
    if stage and staged and parsed.mode == COMPILE_AND_LINK and not link.flags:
        # its own sources become bitcode here: whatever it links needs the LTO link
        link = ToApply(stage.link_flags, link.warning, bolt=link.bolt)
    notes = [profile.warning, stage_warning if ours else "", link.warning]
    if several:
        decision = _one_command(db, sources, bool(parsed.skipped_sources), root,
                                compiler_id(compiler_path), policy, ours, stage is not None)
    else:
        source = os.path.join(root, sources[0])
        key = sources[0] if sources[0] in db.entries else moved_from(db, source, root)
        decision = (decide(db, source, root, compiler_id(compiler_path), policy, key)
                    if key else ToApply())
    # The profile goes to every compile (a static twin of a tuned unit, another program
    # of the build); only for the tuned binary's units does "out of date" mean that the
    # source changed since training: elsewhere a function of the same name is another
    # (jsoncpp's test program has a main() of its own), so clang is told to say nothing.
    trained_on = db.target is None or any(s in db.target.units for s in sources)
    quiet = () if trained_on or not profile.flags else UNTRAINED_QUIET
    merged = ToApply(profile.flags + quiet + staged + decision.flags + link.flags,
                      "; ".join(dict.fromkeys(w for w in notes + [decision.warning] if w)),
                      decision.error, ", ".join(sources) if profile.flags else "", link.bolt)
    return merged if merged.flags or merged.warning else None


def instrumented(mode: str) -> ToApply:
    """`apply --train`'s first build: every compile instrumented for PGO, every link
    with the profile runtime (any binary may link an instrumented object), nothing of
    the database applied (the counts are the front end's, whatever the flags)."""
    from autopass_build.capture.compiler_args import COMPILE, LINK

    unit = () if mode == LINK else (INSTRUMENT,)
    link = () if mode == COMPILE else INSTRUMENT_LINK_FLAGS
    return ToApply(tuple(dict.fromkeys(unit + link)))


def another_compiler(db: FlagsDb, compiler_path: str) -> str:
    """Why a compiler other than the one the database was tuned with gets none of it
    ("" when it is that one): gcc in a CMake build configured with
    CMAKE_C_COMPILER=gcc, another clang.  Its words do not name the source, so the
    wrapper's server says them once per build."""
    wanted = db.toolchain.get("compiler", "")
    found = compiler_id(compiler_path)
    if not wanted or found == wanted:
        return ""
    this = found or f"{compiler_path} (not clang)"
    return (f"this build compiles with {this}, and {FLAGS_DB_NAME} was tuned with "
            f"{wanted}: its flags and stages are not applied (build with that compiler, "
            "or re-tune with this one; --policy apply-anyway applies them all the same)")


def _one_command(db: FlagsDb, sources: list[str], skipped: bool, root: str, compiler: str,
                 policy: ApplyPolicy, ours: bool, staged: bool) -> ToApply:
    """The flags of a command compiling several sources: one set for all, so the entries'
    when every source has one and they agree (tune writes them so: a source compiled
    with others is measured with its flags on all of them), else none, with a note."""
    entries = [db.entries.get(source) for source in sources]
    first = entries[0] if entries else None
    if skipped or first is None or any(e is None or e.flags != first.flags for e in entries):
        return ToApply((), _several_sources_note(db, sources, ours, staged))
    decisions = [decide(db, os.path.join(root, source), root, compiler, policy)
                 for source in sources]
    return next((d for d in decisions if d.warning), decisions[0])


def _several_sources_note(db: FlagsDb, sources: list[str], ours: bool, staged: bool) -> str:
    """One command compiling several sources gets one set of flags.  The stages' and
    the profile's are the same for every unit of the tuned binary, so they apply when
    all its sources are such units; per-file flags differ by file and cannot."""
    notes = []
    tuned = [s for s in sources if s in db.entries]
    if tuned:
        notes.append(f"{', '.join(tuned)}: tuned flags not applied: the command compiles "
                     "several sources at once, and their entries differ")
    target = db.target
    mixed = [s for s in sources if target is not None and s in target.units]
    if staged and mixed and not ours and target is not None:
        notes.append(f"{', '.join(mixed)}: the stages of {target.output} not applied: "
                     "compiled in one command with sources it is not made of")
    return "; ".join(notes)


def stage_decision(db: FlagsDb, policy: ApplyPolicy = ApplyPolicy.WARN, profile_flag: str = ""
                   ) -> tuple[StageFlags | None, str]:
    """The chosen stages' flags without PGO's profile on the compiles (profile_decision
    adds it there; `profile_flag` is its flag, which a CS-PGO link under LTO takes too);
    with a warning, and without LTO, when lld is not here, and without native, when this
    CPU lacks an extension of the one it was tuned on (unless `policy` is
    apply-anyway): the build goes on without them."""
    target = db.target
    if target is None or not (lto_mode(target.stages)
                              or {BOLT, NATIVE, LAYOUT, DIRECT} & set(target.stages)):
        return None, ""
    from autopass_build.core import toolchain

    stages = tuple(s for s in target.stages if s != PGO)
    lld = toolchain.find_tool("ld.lld") if lto_mode(stages) else None
    warnings = []
    if lto_mode(stages) and lld is None:
        stages = tuple(s for s in stages if s not in (LTO, THINLTO))
        warnings.append(f"the database's LTO stage needs lld (sudo apt-get install "
                        f"lld-{toolchain.DEFAULT_LLVM_VERSION}): building without it")
    missing = _lacking(db) if NATIVE in stages and policy is not ApplyPolicy.APPLY_ANYWAY else ""
    if missing:
        stages = tuple(s for s in stages if s != NATIVE)
        warnings.append(f"the database's native stage was {missing}: building without "
                        "-march=native (--policy apply-anyway builds it all the same)")
    return stage_flags(stages, target.opt_level, profile_flag, lld), "; ".join(warnings)


def _lacking(db: FlagsDb) -> str:
    """How this CPU falls short of the one `db` was tuned with -march=native on ("" when
    it does not)."""
    from autopass_build.core import cpu

    missing = cpu.lacking(db.cpu, cpu.this_cpu())
    return cpu.lacking_text(db.cpu, missing) if db.cpu and missing else ""


SOURCE_CHANGED = "the source changed since its flags were measured"


def decide(db: FlagsDb, source: str, root: str, compiler_id: str, policy: ApplyPolicy,
           key: str = "") -> ToApply:
    """The flags for `source` (absolute), or none with the reason; `key`: the entry, when
    it names the source where it was before it moved (moved_from)."""
    rel = key or relative_to(source, root)
    entry = db.entries.get(rel)
    if entry is None:
        return ToApply()
    if entry.problem:
        return refuse(f"{rel}: database entry rejected ({entry.problem})", policy)
    stale = []
    try:
        if hash_file(source) != entry.source_hash:
            stale.append(SOURCE_CHANGED)
    except OSError:
        pass  # the compiler will say what is wrong with the source
    wanted = db.toolchain.get("compiler", "")
    if wanted and compiler_id and wanted != compiler_id:
        stale.append(f"it was tuned with {wanted}, this is {compiler_id}")
    if "-march=native" in entry.flags and (missing := _lacking(db)):
        stale.append(f"it was {missing}")
    if stale and policy is not ApplyPolicy.APPLY_ANYWAY:
        kept = decisions.without(entry.flags)
        carried = tuple(t for d in decisions.of_flags(entry.flags) for t in d.flags())
        if carried and stale == [SOURCE_CHANGED] and policy is ApplyPolicy.WARN:
            # each decision names the code it was tuned on: the plugin applies those
            # whose loop or function is unchanged, and says the others
            return ToApply(carried, f"{rel}: tuned flags not applied: {SOURCE_CHANGED}; "
                            "its decisions carried in the IR are applied where their code "
                            "is unchanged" if kept else "")
        return refuse(f"{rel}: entry not applied: {'; '.join(stale)} (re-run autopass tune)",
                       policy)
    return ToApply(entry.flags)


def moved_from(db: FlagsDb, source: str, root: str) -> str:
    """The entry whose source moved to `source` (absolute): an entry naming a file that
    is gone, of the same name, measured on this very content; "" when none.  A move
    keeps the code, so the flags measured on it still hold; a move and an edit are a new
    source.  A file of another name is another source even with the same bytes (a copy,
    a generated twin): `db check` finds a move the same way.  Only a database with such
    entries reads the source, so a usual build pays nothing."""
    gone = _gone_entries(db, root)
    name = os.path.basename(source)
    if not any(moved_name == name for moved_name, _ in gone):
        return ""
    try:
        return gone.get((name, hash_file(source)), "")
    except OSError:
        return ""


_GONE: dict[tuple[int, str], tuple[FlagsDb, dict[tuple[str, str], str]]] = {}


def _gone_entries(db: FlagsDb, root: str) -> dict[tuple[str, str], str]:
    """{(file name, source hash): key} of the entries whose source is not under `root`
    (once per database and root in a process: the server decides a whole build)."""
    cached = _GONE.get((id(db), root))
    if cached is not None and cached[0] is db:
        return cached[1]
    found = {(os.path.basename(key), entry.source_hash): key
             for key, entry in db.entries.items()
             if entry.source_hash and not os.path.exists(os.path.join(root, key))}
    _GONE[(id(db), root)] = (db, found)
    return found


def compiler_id(path: str) -> str:
    """"clang 19.1.7 (x86_64-pc-linux-gnu)": `--version` once per compiler binary, kept
    in the user's cache the way record mode keeps it in the store (and in this
    process, for the server's calls)."""
    from autopass_build.core import toolchain

    try:
        stamp = toolchain.stamp_of(path)
    except OSError:
        return ""
    if stamp not in _IDENTIFIED:
        _IDENTIFIED[stamp] = _identified(path, stamp)
    return _IDENTIFIED[stamp]


_IDENTIFIED: dict[str, str] = {}


def _identified(path: str, stamp: str) -> str:
    from autopass_build.core import toolchain

    cache = Spool(user_cache_dir())
    cached = cache.compiler_text(stamp)
    text = toolchain.version_text(path) if cached is None else cached
    identity = toolchain.parse_version_output(path, text)
    if cached is None and identity is not None:
        try:
            for sub in (TMP, COMPILERS):
                os.makedirs(cache.path(sub), exist_ok=True)
            cache.remember_compiler(stamp, text)
        except OSError:
            pass  # only a cache
    return identity.short() if identity else ""
