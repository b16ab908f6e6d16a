"""`autopass db`: show, check, status, diff or prune the flags database."""

from __future__ import annotations

import argparse
import os

from autopass_build.cli.apply import db_paths
from autopass_build.cli.common import CliError
from autopass_build.core import decisions, flags_db
from autopass_build.core.apply_terms import ApplyPolicy
from autopass_build.core.names import FLAGS_DB_SCHEMA
from autopass_build.core.plural import counted
from autopass_build.core.stage_flags import LINK_KNOBS, lto_mode


def add_parsers(sub) -> None:
    p = sub.add_parser("db", help="show, check, status, diff or prune the flags database",
                       description="show: every entry with its gain; status: how much of "
                       "the result applies to today's source (entries, the PGO profile's "
                       "functions, BOLT) and one recommendation: nothing, retrain or "
                       "re-tune (it compiles each recorded unit's current source with the "
                       "profile, front end only); check: which entries "
                       "would not apply now (stale source, other compiler, rejected flags, "
                       "a CPU without what --native used) and which shipped profiles (PGO, "
                       "BOLT) cannot be used, exit 1 if any; diff A B: entries added, "
                       "removed or changed between two databases; prune: drop the entries "
                       "check reports.")
    p.add_argument("action", choices=("show", "check", "status", "diff", "prune"))
    p.add_argument("files", nargs="*", metavar="FILE", help="diff: the two databases; show, check, prune: the database (as --db)")
    p.add_argument("--db", metavar="FILE", help="default: the one tune writes "
                   "([tune].flags_db of autopass.toml), else ./autopass.flags.json")
    p.add_argument("--root", metavar="DIR", help="default: the database's folder")
    p.add_argument("--binary", metavar="FILE",
                   help="status: today's program, built without BOLT, to match the BOLT "
                        "profile against (default: the target in the tree, if BOLT has not "
                        "rewritten it)")
    p.set_defaults(func=cmd_db)


def cmd_db(args: argparse.Namespace) -> int:
    from autopass_build.capture.apply import applier

    if args.action == "diff":
        return _diff(args.files)
    if args.files:    # `db show other.json`: showed ./autopass.flags.json instead
        if len(args.files) > 1 or args.db:
            raise CliError(f"db {args.action} reads one database: give it as FILE or as "
                           "--db FILE, not both (diff compares two)")
        args.db = args.files[0]
    path, root = db_paths(args)
    db, why = applier.load(path)
    if db is None:
        raise CliError(why or f"{path} does not exist; `autopass tune` writes it")
    problems = {}
    notes: list[str] = []      # entries that apply, but not where they say
    compiler = _compiler_id()
    for source in sorted(db.entries):
        decision = applier.decide(db, os.path.join(root, source), root, compiler,
                                   ApplyPolicy.WARN)
        if db.entries[source].problem:
            problems[source] = f"{source}: entry rejected ({db.entries[source].problem})"
        elif decision.warning:
            problems[source] = decision.warning
        elif not os.path.isfile(os.path.join(root, source)):
            moved = _moved_to(root, source, db.entries[source].source_hash)
            if moved:
                notes.append(f"{source}: moved to {moved} (the same source): its entry "
                             "applies there")
            else:
                problems[source] = (f"{source}: no such file under {root} (renamed or "
                                    "removed since tuning?): the entry matches no source")
    unusable = _unusable_profiles(db, path)
    if args.action == "status":
        return _status(db, path, root, len(problems), unusable, args.binary, notes)
    if args.action == "show":
        _show(db, problems)
        for line in notes:
            print(f"  {line}")
        for why in unusable:
            print(f"  not applied: {why}")
    elif args.action == "check":
        for line in notes + list(problems.values()) + unusable:
            print(line)
        print(f"{len(db.entries) - len(problems)}/{len(db.entries)} entries apply"
              + (f"; {counted(len(unusable), 'shipped profile')} cannot be used"
                 if unusable else ""))
        return 1 if problems or unusable else 0
    else:
        for source in problems:
            db.entries.pop(source, None)
        try:
            flags_db.save(path, db)
        except OSError as error:
            raise CliError(f"cannot write {path}: {error.strerror}; nothing was pruned")
        print(f"pruned {len(problems)} entries; {len(db.entries)} left")
        for why in unusable:    # a profile is the stages' evidence: tune makes it again
            print(f"not pruned: {why}")
    return 0


def _moved_to(root: str, source: str, source_hash: str) -> str:
    """Where under `root` the source an entry names moved to: a file of the same name
    and the same content (as apply mode matches it by content, applier.moved_from);
    "" when there is none.  Hidden folders (.git, the store) are not searched."""
    from autopass_build.core.files import hash_file

    name = os.path.basename(source)
    for folder, subfolders, files in os.walk(root):
        subfolders[:] = sorted(d for d in subfolders if not d.startswith("."))
        if name in files:
            found = os.path.join(folder, name)
            try:
                if hash_file(found) == source_hash:
                    return os.path.relpath(found, root)
            except OSError:
                continue
    return ""


def _status(db: flags_db.FlagsDb, path: str, root: str, not_applying: int,
            unusable: list[str], binary: str | None = None,
            notes: list[str] | None = None) -> int:
    """`db status`: each part of the database and how much of it applies to today's
    source, then the recommendation (outputs/status.py)."""
    from autopass_build.capture.apply.applied_profiles import shipped_file
    from autopass_build.capture.record.spool import find_store_dir
    from autopass_build.outputs import status
    from autopass_build.store.index import Store
    from autopass_build.store.targets import resolve

    stages = db.target.stages if db.target else ()
    print(f"stages: {'+'.join(stages) or 'none'}")
    print(f"per-file entries: {len(db.entries) - not_applying}/{len(db.entries)} apply"
          + (" (`autopass db check` says why not)" if not_applying else ""))
    for line in notes or []:
        print(f"  {line}")
    profile, profile_why = shipped_file(db.profile, path, "PGO profile", "the build was "
                                        "tuned with") if db.profile else ("", "")
    match = None
    folder = find_store_dir(root)
    if profile and folder:
        store = Store.open_existing(folder)
        targets = [t for t in resolve(store, root)
                   if db.target and t.output_rel == db.target.output]
        wanted = set(targets[0].runtime_units()) if targets else None
        units = [u for u in store.units() if wanted is None or u.id in wanted]
        print(f"PGO profile: checking {counted(len(units), 'unit')} against it ...",
              flush=True)
        match = status.profile_match(units, profile)
        print(f"PGO profile: {match.text()}")
    elif db.profile:
        print("PGO profile: " + (f"not usable: {profile_why}" if not profile else
                                 "no recording here to check it against (autopass record)"))
    bolt_why = next((why for why in unusable if "BOLT" in why), "")
    bolt = None
    if db.target and db.target.bolt:
        print("BOLT: " + (bolt_why or "applied as trained while the program's code is the "
                                     "one it was trained on (apply checks it at the link)"
                                     + ("; to a changed program by stale-profile inference "
                                        "(its YAML profile ships)" if db.target.bolt_stale
                                        else "; not at all to a changed program")))
        if not bolt_why:
            bolt = _bolt_match(db.target, path, binary or os.path.join(root, db.target.output),
                               explicit=binary is not None)
    carried = {source: decisions.of_flags(entry.flags) for source, entry in db.entries.items()}
    if any(carried.values()) and folder:
        matched = status.decisions_match(Store.open_existing(folder), root, carried)
        print(f"decisions carried in the IR: {matched.text()}")
    advice, why = status.advice(len(db.entries), not_applying, match, unusable, bolt)
    print(f"recommendation: {advice}: {why}")
    return 0 if advice == status.Advice.NOTHING else 1


def _bolt_match(target: flags_db.TargetStages, path: str, binary: str, explicit: bool):
    """llvm-bolt's own report of how the shipped YAML profile meets today's program
    (None, with a line, when there is no program to read or no YAML profile)."""
    from autopass_build.capture.apply.applied_profiles import shipped_file
    from autopass_build.core import bolt_commands as bolt
    from autopass_build.outputs import status

    if not os.path.isfile(binary):
        if explicit:
            raise CliError(f"--binary {binary}: no such file; give today's program, built "
                           "without BOLT")
        print(f"BOLT: build {target.output} to have it matched against the profile "
              "(or give --binary)")
        return None
    try:
        if bolt.code_fingerprint(binary) == target.bolt_binary:
            print(f"BOLT: {os.path.relpath(binary)} is the program it was trained on: all "
                  "of it applies")
            return None
        if bolt.rewritten(binary):
            print(f"BOLT: {os.path.relpath(binary)} was rewritten by BOLT already (an apply "
                  "build); to match the profile against today's code, give --binary a "
                  "build of it without BOLT")
            return None
        yaml, why = shipped_file(target.bolt_stale, path, "YAML BOLT profile", "") \
            if target.bolt_stale else ("", "no YAML profile ships to match it with")
        if not yaml:
            print(f"BOLT: {os.path.relpath(binary)} is not the program it was trained on; "
                  f"{why}")
            return None
        print(f"BOLT: matching {os.path.relpath(binary)} against the profile ...", flush=True)
        match = status.bolt_match(bolt.stale_report(binary, yaml))
    except bolt.BoltError as error:
        print(f"BOLT: {error}")
        return None
    print("BOLT: " + (match.text() if match else "llvm-bolt reported no profiled function"))
    return match


def _unusable_profiles(db: flags_db.FlagsDb, path: str) -> list[str]:
    """Why each profile the database ships (PGO's, BOLT's for the program and for each
    library) cannot be used as it is beside `path`: apply mode would build without it."""
    from autopass_build.capture.apply.applied_profiles import shipped_file

    retune = "the build was tuned with: re-run autopass tune"
    shipped = [(db.profile, "PGO profile")]
    if db.target:
        shipped += [(db.target.bolt, "BOLT profile")] if db.target.bolt else []
        shipped += [(library.profile, f"BOLT profile of {library.output}")
                    for library in db.target.bolt_libraries]
    unusable = []
    for ref, what in shipped:
        why = shipped_file(ref, path, what, retune)[1] if ref is not None else ""
        if why:
            unusable.append(why)
    return unusable


def _diff(files: list[str]) -> int:
    """Entries added (+), removed (-) and changed (~) from A to B; exit 1 if any differ."""
    from autopass_build.capture.apply import applier

    if len(files) != 2:
        raise CliError("give two databases: autopass db diff OLD.json NEW.json")
    loaded = []
    for path in files:
        db, why = applier.load(path)
        if db is None:
            raise CliError(why or f"{path} does not exist")
        loaded.append(db.entries)
    old, new = loaded
    changes = 0
    for source in sorted(set(old) | set(new)):
        a, b = old.get(source), new.get(source)
        if a is not None and b is not None and (a.flags, a.source_hash, a.gain) == (
                b.flags, b.source_hash, b.gain):   # what a review cares about
            continue
        changes += 1
        if a is None or b is None:
            entry, mark = (b, "+") if a is None else (a, "-")
            assert entry is not None
            print(f"{mark} {source}: {_flags_text(entry.flags)}")
        elif a.flags != b.flags:
            print(f"~ {source}: {_flags_text(a.flags)} -> {_flags_text(b.flags)}")
        else:
            print(f"~ {source}: same flags, new measurement or source")
    print(f"{changes} {'entry differs' if changes == 1 else 'entries differ'}")
    return 1 if changes else 0


def _compiler_id() -> str:
    from autopass_build.capture.apply.applier import compiler_id
    from autopass_build.core import toolchain

    clang = toolchain.find_tool("clang")
    return compiler_id(clang) if clang else ""


def _flags_text(flags: tuple[str, ...], limit: int = 200) -> str:
    text = " ".join(flags)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(flags)} flags)"


def _show(db, problems: dict[str, str]) -> None:
    print(f"{db.toolchain.get('compiler', '?')}; {counted(len(db.entries), 'entry', 'entries')}"
          + (f"; PGO profile {db.profile.path}" if db.profile else ""))
    if db.schema != FLAGS_DB_SCHEMA:
        print(f"  schema {db.schema}, an older autopass's: read as it is (it has none of "
              f"what schema {FLAGS_DB_SCHEMA} adds); the next tune writes schema "
              f"{FLAGS_DB_SCHEMA}")
    if db.target:
        links_across = bool(lto_mode(tuple(db.target.stages)))
        lto = f"LTO link at {db.target.opt_level}; " if links_across else ""
        print(f"  {db.target.output}: stages {'+'.join(db.target.stages) or 'none'} "
              f"({lto}units: {', '.join(db.target.units)})"[:400])
        if db.target.bolt:
            print(f"  {db.target.output}: BOLT profile {db.target.bolt.path}, for the binary "
                  f"whose code hashes to {db.target.bolt_binary[:16]}")
        knobs = [LINK_KNOBS[s] for s in db.target.stages if s in LINK_KNOBS]
        if knobs and links_across:
            print(f"  {db.target.output}: its LTO link with -mllvm {' -mllvm '.join(knobs)} "
                  "(the link-level knobs kept)")
        for library in db.target.libraries:
            print(f"  {library}: linked with -Bsymbolic-functions (the direct stage: its "
                  "calls to its own functions bound inside it)")
        for library in db.target.bolt_libraries:
            print(f"  {library.output}: BOLT profile {library.profile.path}, for the library "
                  f"whose code hashes to {library.binary[:16]}")
        if db.target.rival:
            print(f"  {db.target.output}: a close call over {db.target.rival.stages} "
                  f"({db.target.rival.how}); a re-tune measures the two first"[:400])
    if db.cpu:
        print(f"  tuned on {db.cpu.model}" + (f" ({len(db.cpu.isa)} instruction-set "
              "extensions; a CPU without one of them builds without -march=native)"
              if db.cpu.isa else ""))
    for sources, entry in _measured_together(db.entries):
        unapplied = [s for s in sources if s in problems]
        which = f"{', '.join(unapplied)}; " if unapplied != sources else ""
        mark = f"  (not applied: {which}see `autopass db check`)" if unapplied else ""
        carried = decisions.of_flags(entry.flags)
        flags = decisions.without(entry.flags)
        print(f"  {', '.join(sources)}: {_flags_text(flags) if flags or not carried else ''}"
              f"{mark}")
        for decision in carried:       # decisions carried in the IR, one a line
            print(f"      {decision.text()} (code {decision.hash})")
        gain = entry.gain
        if gain:
            print(f"      {gain.metric}: {gain.ratio:.4f}x [{gain.low:.4f}, {gain.high:.4f}]; "
                  f"{entry.why[:300]}")


def _measured_together(entries: dict[str, flags_db.FlagsEntry]
                       ) -> list[tuple[list[str], flags_db.FlagsEntry]]:
    """Entries by the one measurement they share: the sources of one compile command
    (tuned as one) get the same flags, gain and reason, shown once for all of them."""
    groups: dict[tuple, tuple[list[str], flags_db.FlagsEntry]] = {}
    for source, entry in sorted(entries.items()):
        gain = entry.gain
        key = (entry.flags, entry.why, entry.run,
               (gain.metric, gain.ratio, gain.low, gain.high) if gain else None)
        groups.setdefault(key, ([], entry))[0].append(source)
    return list(groups.values())
