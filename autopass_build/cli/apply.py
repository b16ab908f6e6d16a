"""`autopass apply -- BUILD`, `verify`, and `db show|check|diff|prune`: using the flags database."""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time

from autopass_build.cli.common import (
    CliError,
    Progress,
    add_config_option,
    add_metric_option,
    add_target_option,
    load_config,
    measures,
    open_store,
)
from autopass_build.core import flags_db, proc
from autopass_build.core.names import (
    APPLY_POLICIES,
    DEFAULT_APPLY_POLICY,
    FLAGS_DB_NAME,
)
from autopass_build.core.plural import counted
from autopass_build.core.stage_flags import lto_mode


def add_parsers(sub) -> None:
    p = sub.add_parser("apply", help="run a build with each file's tuned flags",
                       description="Run BUILD with autopass's wrapper in apply mode.",
                       epilog=APPLY_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--db", metavar="FILE", help="the flags database (default: "
                   "./autopass.flags.json)")
    p.add_argument("--policy", choices=APPLY_POLICIES, default=DEFAULT_APPLY_POLICY,
                   help="what a stale or untrusted entry does (default: %(default)s)")
    p.add_argument("--root", metavar="DIR", help="project root the database's paths are "
                   "relative to (default: the database's folder)")
    p.add_argument("command", nargs=argparse.REMAINDER, metavar="-- BUILD...")
    p.set_defaults(func=cmd_apply)

    p = sub.add_parser("verify", help="two clean tuned builds must be identical; then A/B "
                       "against a plain build", description="Build three times from clean "
                       "with [build].command: plain, then twice with the flags database. The "
                       "tuned binaries must be bit-identical; then the tuned binary is "
                       "measured against the plain one. Exit 1 if they differ.")
    p.add_argument("--store", metavar="DIR", help="the store (for the target's path)")
    add_config_option(p)
    add_target_option(p)
    add_metric_option(p)
    p.add_argument("--no-measure", action="store_true", help="only check reproducibility")
    p.add_argument("--policy", choices=APPLY_POLICIES, default=DEFAULT_APPLY_POLICY,
                   help="what the tuned builds do with what they cannot apply (a stale "
                        "profile, a BOLT fingerprint that does not match): warn (the "
                        "default: built without it, and verify says so), error (verify "
                        "fails), apply-anyway")
    p.set_defaults(func=cmd_verify)

    p = sub.add_parser("db", help="show, check, diff or prune the flags database",
                       description="show: every entry with its gain; check: which entries "
                       "would not apply now (stale source, other compiler, rejected flags, "
                       "a CPU without what --native used) and which shipped profiles (PGO, "
                       "BOLT) cannot be used, exit 1 if any; diff A B: entries added, "
                       "removed or changed between two databases; prune: drop the entries "
                       "check reports.")
    p.add_argument("action", choices=("show", "check", "diff", "prune"))
    p.add_argument("files", nargs="*", metavar="FILE", help="diff: the two databases; show, check, prune: the database (as --db)")
    p.add_argument("--db", metavar="FILE", help="default: ./autopass.flags.json")
    p.add_argument("--root", metavar="DIR", help="default: the database's folder")
    p.set_defaults(func=cmd_db)


APPLY_EPILOG = """\
examples:
  autopass apply -- make -j2
  autopass apply --policy error -- sh -c 'cmake -B build -G Ninja && ninja -C build'
  CC=autopass-cc AUTOPASS_MODE=apply make            # the same, by hand
  cmake -DAUTOPASS_MODE=apply -DCMAKE_PROJECT_TOP_LEVEL_INCLUDES=.../AutoPass.cmake ...

Each compile of a source with an entry in autopass.flags.json gets that entry's flags
appended; everything else compiles exactly as asked.  Entries pass the allowlist again;
a stale entry (source changed), another compiler, a database that cannot be trusted or
read, or flags the compiler rejects give one warning and the default flags (--policy
error fails the compile instead; apply-anyway applies stale entries).
"""


def _paths(args: argparse.Namespace) -> tuple[str, str]:

    db = os.path.abspath(args.db or FLAGS_DB_NAME)
    return db, os.path.abspath(args.root or os.path.dirname(db))


def cmd_apply(args: argparse.Namespace) -> int:
    from autopass_build.capture.build_env import apply_environment, for_debian_packaging
    from autopass_build.capture.server import serving
    from autopass_build.capture.tally import applied_count, compiles_seen

    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        raise CliError("give the build to run: autopass apply -- make -j2")
    db, root = _paths(args)
    if args.root and not os.path.isdir(root):
        raise CliError(f"--root {args.root}: not a folder; give the project root the "
                       "database's paths are relative to")
    usable = None
    if not os.path.isfile(db):
        what = "is a folder, not a flags database" if os.path.isdir(db) else "does not exist"
        print(f"autopass: warning: {db} {what}: building with the default flags",
              file=sys.stderr)
    else:
        from autopass_build.capture import applier

        usable, why = applier.load(db)      # said before the build starts, and a build
        # that compiles nothing hears it too
        if usable is None and why:
            if args.policy == "error":
                raise CliError(why)
            print(f"autopass: warning: {why}: building with the default flags",
                  file=sys.stderr)
    work = tempfile.mkdtemp(prefix="autopass-apply-")
    try:
        env = apply_environment(root, db, args.policy, work)
        packaging = for_debian_packaging(command, env)
        if packaging:
            print(f"autopass: {packaging}", file=sys.stderr)
        started = time.time()
        with serving(env):
            status = proc.run_build(command, env)
        if status == 0 and flags_db.applies_anything(usable):
            _say_what_was_applied(db, applied_count(work), started, compiles_seen(work),
                                  usable, root)
        return status
    except (FileNotFoundError, PermissionError):
        raise CliError(f"build command not found: {command[0]!r}") from None
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _say_what_was_applied(db: str, applied: int, started: float, seen: int,
                          usable: flags_db.FlagsDb | None, root: str) -> None:
    """After a build with a database that has something to apply: how many commands
    took the tuned flags, or, when none did, why: compiles that went through autopass
    but none of the database's sources (its keys match nothing), an up-to-date build, a
    build folder configured before with the compiler's full path."""
    from autopass_build.capture import unseen

    if applied:
        print(f"autopass: {counted(applied, 'command')} (compiles, links) "
              f"took the tuned flags of {db}",
              file=sys.stderr)
    elif seen and usable is not None:
        named = ", ".join(sorted(usable.entries)[:5]) or "none"
        print(f"autopass: warning: no compile or link took the tuned flags: "
              f"{counted(seen, 'compile')} went through autopass, none of a source the "
              f"database names relative to {root} ({named}); check its keys with "
              "`autopass db check`", file=sys.stderr)
    else:
        print(f"autopass: warning: no compile or link took the tuned flags: "
              f"{unseen.advice(os.getcwd(), started, 'apply')}", file=sys.stderr)


@measures("verify")
def cmd_verify(args: argparse.Namespace) -> int:
    from autopass_build.instruments.benchmark import MeasureError
    from autopass_build.instruments.evaluate import EvaluateError, choose_target
    from autopass_build.outputs.verify import VerifyError, verify

    store = open_store(args)
    config = load_config(args)
    db = config.resolve(config.tune.flags_db)
    progress = Progress("verify")
    try:
        target = choose_target(store, args.target or config.run.target)
        result = verify(config, target.output, db, os.path.dirname(store.dir), progress,
                        measure=not args.no_measure, libraries=tuple(target.loaded_libraries),
                        library_folders=tuple(target.prebuilt_library_folders(
                            os.path.dirname(store.dir))), scratch=store.dir,
                        policy=args.policy)
    except (EvaluateError, MeasureError, VerifyError) as error:
        progress(None)
        raise CliError(str(error))
    progress(None)
    libraries = ("the project shared library" if result.libraries == 1
                 else f"the {result.libraries} project shared libraries")
    with_libraries = f" (with {libraries} it loads)" if result.libraries else ""
    tuned = "tuned" if not result.not_applied else "partly tuned"
    print(f"{target.output_rel}{with_libraries}: two clean {tuned} builds are "
          f"{'bit-identical' if result.identical else 'DIFFERENT (not reproducible)'}")
    if result.why_different:
        print(f"  {result.why_different}")
    if result.not_applied:
        print(f"the builds lack what of {os.path.relpath(db)} could not be applied "
              "(measured as built, not as tuned):")
        for why in result.not_applied:
            print(f"  {why}")
    c = result.comparison
    if c is not None and c.estimate:
        print(f"{tuned} vs plain ({config.measure.metric}): {c.estimate.describe_speedup()} "
              f"-> {c.verdict or 'unclear'}")
    elif c is not None:
        print(f"{tuned} vs plain: {c.outcome} {c.detail}")
    return 0 if result.identical else 1


def cmd_db(args: argparse.Namespace) -> int:
    from autopass_build.capture import applier

    if args.action == "diff":
        return _diff(args.files)
    if args.files:    # `db show other.json`: showed ./autopass.flags.json instead
        if len(args.files) > 1 or args.db:
            raise CliError(f"db {args.action} reads one database: give it as FILE or as "
                           "--db FILE, not both (diff compares two)")
        args.db = args.files[0]
    path, root = _paths(args)
    db, why = applier.load(path)
    if db is None:
        raise CliError(why or f"{path} does not exist; `autopass tune` writes it")
    problems = {}
    compiler = _compiler_id()
    for source in sorted(db.entries):
        decision = applier.decide(db, os.path.join(root, source), root, compiler, "warn")
        if db.entries[source].problem:
            problems[source] = f"{source}: entry rejected ({db.entries[source].problem})"
        elif decision.warning:
            problems[source] = decision.warning
        elif not os.path.isfile(os.path.join(root, source)):
            problems[source] = (f"{source}: no such file under {root} (renamed or removed "
                                "since tuning?): the entry matches no source")
    unusable = _unusable_profiles(db, path)
    if args.action == "show":
        _show(db, problems)
        for why in unusable:
            print(f"  not applied: {why}")
    elif args.action == "check":
        for warning in list(problems.values()) + unusable:
            print(warning)
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


def _unusable_profiles(db: flags_db.FlagsDb, path: str) -> list[str]:
    """Why each profile the database ships (PGO's, BOLT's for the program and for each
    library) cannot be used as it is beside `path`: apply mode would build without it."""
    from autopass_build.capture.applier import shipped_file

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
    from autopass_build.capture import applier

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
    from autopass_build.capture.applier import compiler_id
    from autopass_build.core import toolchain

    clang = toolchain.find_tool("clang")
    return compiler_id(clang) if clang else ""


def _flags_text(flags: tuple[str, ...], limit: int = 200) -> str:
    text = " ".join(flags)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(flags)} flags)"


def _show(db, problems: dict[str, str]) -> None:
    print(f"{db.toolchain.get('compiler', '?')}; {counted(len(db.entries), 'entry', 'entries')}"
          + (f"; PGO profile {db.profile.path}" if db.profile else ""))
    if db.target:
        lto = (f"LTO link at {db.target.opt_level}; "
               if lto_mode(tuple(db.target.stages)) else "")
        print(f"  {db.target.output}: stages {'+'.join(db.target.stages) or 'none'} "
              f"({lto}units: {', '.join(db.target.units)})"[:400])
        if db.target.bolt:
            print(f"  {db.target.output}: BOLT profile {db.target.bolt.path}, for the binary "
                  f"whose code hashes to {db.target.bolt_binary[:16]}")
        for library in db.target.bolt_libraries:
            print(f"  {library.output}: BOLT profile {library.profile.path}, for the library "
                  f"whose code hashes to {library.binary[:16]}")
    if db.cpu:
        print(f"  tuned on {db.cpu.model}" + (f" ({len(db.cpu.isa)} instruction-set "
              "extensions; a CPU without one of them builds without -march=native)"
              if db.cpu.isa else ""))
    for sources, entry in _measured_together(db.entries):
        unapplied = [s for s in sources if s in problems]
        which = f"{', '.join(unapplied)}; " if unapplied != sources else ""
        mark = f"  (not applied: {which}see `autopass db check`)" if unapplied else ""
        print(f"  {', '.join(sources)}: {_flags_text(entry.flags)}{mark}")
        gain = entry.gain
        if gain:
            print(f"      {gain.metric}: {gain.ratio:.4f}x [{gain.low:.4f}, {gain.high:.4f}]; "
                  f"{entry.why[:300]}")


def _measured_together(entries: dict[str, flags_db.Entry]
                       ) -> list[tuple[list[str], flags_db.Entry]]:
    """Entries by the one measurement they share: the sources of one compile command
    (tuned as one) get the same flags, gain and reason, shown once for all of them."""
    groups: dict[tuple, tuple[list[str], flags_db.Entry]] = {}
    for source, entry in sorted(entries.items()):
        gain = entry.gain
        key = (entry.flags, entry.why, entry.run,
               (gain.metric, gain.ratio, gain.low, gain.high) if gain else None)
        groups.setdefault(key, ([], entry))[0].append(source)
    return list(groups.values())
