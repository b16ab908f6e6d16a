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
    configured_build,
    flags_db_path,
    load_config,
    measures,
    open_store,
)
from autopass_build.core import flags_db, proc
from autopass_build.core.apply_terms import APPLY_POLICIES, DEFAULT_APPLY_POLICY, ApplyPolicy
from autopass_build.core.plural import counted


def add_parsers(sub) -> None:
    p = sub.add_parser("apply", help="run a build with each file's tuned flags",
                       description="Run BUILD with autopass's wrapper in apply mode.",
                       epilog=APPLY_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--db", metavar="FILE", help="the flags database (default: the one "
                   "tune writes, [tune].flags_db of autopass.toml, else ./autopass.flags.json)")
    p.add_argument("--policy", choices=APPLY_POLICIES, default=DEFAULT_APPLY_POLICY.value,
                   help="what a stale or untrusted entry does (default: %(default)s)")
    p.add_argument("--root", metavar="DIR", help="project root the database's paths are "
                   "relative to (default: the database's folder)")
    p.add_argument("--train", action="store_true",
                   help="retrain the database's PGO and BOLT profiles on today's source, "
                        "inside the build: an instrumented build, the training run "
                        "([run].train, else the benchmark of autopass.toml), the build "
                        "with the fresh profile, then BOLT trained on the linked target. "
                        "BUILD must build from a clean tree; it runs twice. What it was "
                        "made with lands beside the database as autopass.trained.*. "
                        "Both builds compile through ccache in $AUTOPASS_TRAIN_CACHE "
                        "(default ~/.cache/autopass/train-ccache; off: none): the "
                        "instrumented one compiles only what changed since the last")
    add_config_option(p)
    p.add_argument("command", nargs=argparse.REMAINDER, metavar="-- BUILD...",
                   help="the build command (default: [build].command of autopass.toml, "
                        "run in [build].root)")
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
    p.add_argument("--policy", choices=APPLY_POLICIES, default=DEFAULT_APPLY_POLICY.value,
                   help="what the tuned builds do with what they cannot apply (a stale "
                        "profile, a BOLT fingerprint that does not match): warn (the "
                        "default: built without it, and verify says so), error (verify "
                        "fails), apply-anyway")
    p.add_argument("--cluster", metavar="ADDRESS",
                   help="run the three builds and the measurement on one measuring node "
                        "of the Ray cluster at ADDRESS, of the CPU group you ship for "
                        "([cluster].target; docs/cluster.md), in the project at the "
                        "same path there or shipped to it ([cluster].ship); default: "
                        "[cluster].address, else this machine (--cluster '' runs it here)")
    p.set_defaults(func=cmd_verify)


APPLY_EPILOG = """\
examples:
  autopass apply                                     # [build].command of autopass.toml
  autopass apply -- make -j2
  autopass apply --policy error -- sh -c 'cmake -B build -G Ninja && ninja -C build'
  CC=autopass-cc AUTOPASS_MODE=apply make            # the same, by hand
  cmake -DAUTOPASS_MODE=apply -DCMAKE_PROJECT_TOP_LEVEL_INCLUDES=.../AutoPass.cmake ...
  make clean && autopass apply --train -- make -j2   # release build: fresh profiles

Each compile of a source with an entry in autopass.flags.json gets that entry's flags
appended; everything else compiles exactly as asked.  Entries pass the allowlist again;
a stale entry (source changed), another compiler, a database that cannot be trusted or
read, or flags the compiler rejects give one warning and the default flags (--policy
error fails the compile instead; apply-anyway applies stale entries).
"""


def db_paths(args: argparse.Namespace) -> tuple[str, str]:
    """(the flags database, the project root its paths are relative to)."""
    db = flags_db_path(args)
    return db, os.path.abspath(args.root or os.path.dirname(db))


def cmd_apply(args: argparse.Namespace) -> int:
    from autopass_build.capture.apply.tally import applied_count, compiles_seen
    from autopass_build.capture.build_env import apply_environment, for_debian_packaging
    from autopass_build.capture.server import serving

    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    db, root = db_paths(args)
    if not command:              # as `autopass record` with none: the build it recorded
        command, folder = configured_build(args, "apply")
        os.chdir(folder)         # the paths above are absolute already
    if args.root and not os.path.isdir(root):
        raise CliError(f"--root {args.root}: not a folder; give the project root the "
                       "database's paths are relative to")
    if args.train:
        return _apply_training(args, command, db, root)
    from autopass_build.outputs.retrain import said_leftovers

    said_leftovers(os.path.dirname(db), lambda line: print(f"autopass: {line}",
                                                           file=sys.stderr))
    usable = None
    if not os.path.isfile(db):
        what = "is a folder, not a flags database" if os.path.isdir(db) else "does not exist"
        print(f"autopass: warning: {db} {what}: building with the default flags",
              file=sys.stderr)
    else:
        from autopass_build.capture.apply import applier

        usable, why = applier.load(db)      # said before the build starts, and a build
        # that compiles nothing hears it too
        if usable is None and why:
            if ApplyPolicy(args.policy) is ApplyPolicy.ERROR:
                raise CliError(why)
            print(f"autopass: warning: {why}: building with the default flags",
                  file=sys.stderr)
    work = tempfile.mkdtemp(prefix="autopass-apply-")
    try:
        env = apply_environment(root, db, ApplyPolicy(args.policy), work)
        packaging = for_debian_packaging(command, env)
        if packaging:
            print(f"autopass: {packaging}", file=sys.stderr)
        started = time.time()
        with serving(env):
            status = proc.run_build(command, env)
        if status != 0:
            print(f"autopass: the build command exited with {status}", file=sys.stderr)
        if status == 0 and flags_db.applies_anything(usable):
            _say_what_was_applied(db, applied_count(work), started, compiles_seen(work),
                                  usable, root)
            from autopass_build.capture.apply.tally import not_applied
            from autopass_build.outputs.status import decay_line

            decay = decay_line(not_applied(work))
            if decay:
                print(f"autopass: {decay}", file=sys.stderr)
        return status
    except (FileNotFoundError, PermissionError):
        raise CliError(f"build command not found: {command[0]!r}") from None
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _apply_training(args: argparse.Namespace, command: list[str], db: str, root: str) -> int:
    """`apply --train`: outputs/retrain.py's builds, then what they were made with."""
    from autopass_build.core.flags_db import FlagsDbError
    from autopass_build.measuring.benchmark import Benchmark, MeasureError
    from autopass_build.outputs.retrain import Retrainer, RetrainError
    from autopass_build.outputs.retrain_builds import Stopped

    if not os.path.isfile(db):
        raise CliError(f"{db}: no flags database to retrain; give it with --db, or tune "
                       "first (autopass tune)")
    config = load_config(args)
    progress = Progress("autopass apply --train")
    try:
        retrainer = Retrainer(command, db, root, ApplyPolicy(args.policy),
                              Benchmark.from_config(config),
                              progress)
        result = retrainer.run()
    except (FlagsDbError, MeasureError, RetrainError) as error:
        progress(None)
        raise CliError(str(error))
    except Stopped as stopped:
        progress(None)
        return stopped.status
    except (FileNotFoundError, PermissionError):
        raise CliError(f"build command not found: {command[0]!r}") from None
    progress(None)
    for note in result.notes:
        print(f"autopass: note: {note}", file=sys.stderr)
    if result.status == 0:
        print(f"autopass: {retrain_summary(result)}", file=sys.stderr)
    return result.status


def retrain_summary(result) -> str:
    """One line: what each profile is, what it was built with, and what it cost."""
    parts = [f"{name} {'retrained' if how == 'trained' else 'NOT retrained: ' + how}"
             for name, how in (("PGO", result.pgo), ("BOLT", result.bolt)) if how]
    costs = ", ".join(f"{what} {seconds:.{1 if seconds < 10 else 0}f} s"
                      for what, seconds in result.seconds.items())
    made = (f"; built with {os.path.relpath(result.database)}" if result.database else "")
    cached = ("; compiles from the cache: " + ", ".join(
        f"{'instrumented' if phase == 'instrument' else phase} {hit} of {total}"
        for phase, (hit, total) in result.cached.items())) if result.cached else ""
    if result.uncached:
        cached = f"; {result.uncached}"
    return f"{'; '.join(parts)}{made}{cached} ({costs})"


def _say_what_was_applied(db: str, applied: int, started: float, seen: int,
                          usable: flags_db.FlagsDb | None, root: str) -> None:
    """After a build with a database that has something to apply: how many commands
    took the tuned flags, or, when none did, why: compiles that went through autopass
    but none of the database's sources (its keys match nothing), an up-to-date build, a
    build folder configured before with the compiler's full path."""
    from autopass_build.capture.record import unseen

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


def _on_cluster(address: str, config, store_dir: str, progress: Progress, job):
    """`job(progress)` on a measuring node of the target group (cluster/on_target.py),
    the project shipped to it as [cluster].ship says."""
    from autopass_build.cluster.connect import ClusterError
    from autopass_build.cluster.on_target import run_on_target

    try:
        return run_on_target(address, config.cluster.target, store_dir, progress, job,
                             config.cluster.ship)
    except ClusterError as error:
        progress(None)
        raise CliError(str(error)) from None


@measures("verify")
def cmd_verify(args: argparse.Namespace) -> int:
    from autopass_build.candidates.evaluate import EvaluateError, choose_target
    from autopass_build.measuring.benchmark import MeasureError
    from autopass_build.outputs.verify import VerifyError, VerifyJob

    store = open_store(args)
    config = load_config(args)
    db = config.resolve(config.tune.flags_db)
    progress = Progress("verify")
    address = config.cluster.address if args.cluster is None else args.cluster
    root = os.path.dirname(store.dir)
    try:
        target = choose_target(store, args.target or config.run.target)
        job = VerifyJob(config, target.output, db, root, measure=not args.no_measure,
                        libraries=tuple(target.loaded_libraries),
                        library_folders=tuple(target.prebuilt_library_folders(root)),
                        scratch=store.dir, policy=ApplyPolicy(args.policy))
        result = (_on_cluster(address, config, store.dir, progress, job) if address.strip()
                  else job(progress))
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
        from autopass_build.outputs.status import decay_line

        decay = decay_line(list(result.not_applied))
        if decay:
            print(decay)
    c = result.comparison
    if c is not None and c.estimate:
        print(f"{tuned} vs plain ({config.measure.metric}): {c.estimate.describe_speedup()} "
              f"-> {c.verdict or 'unclear'}")
    elif c is not None:
        print(f"{tuned} vs plain: {c.outcome} {c.detail}")
    return 0 if result.identical else 1
