"""`autopass record`: run a build with the wrappers capturing it, and say what was captured."""

from __future__ import annotations

import argparse
import collections
import os
import shutil
import sys
import tempfile
import time

from autopass_build.capture.build_env import (
    for_debian_packaging,
    record_environment,
    wrapper_dir,
)
from autopass_build.capture.record import unseen
from autopass_build.capture.record.skip_fixes import fixes
from autopass_build.capture.server import serving
from autopass_build.cli.common import (
    CliError,
    add_config_option,
    configured_build,
)
from autopass_build.core import proc, toolchain
from autopass_build.core.files import hash_json
from autopass_build.core.names import ENV_RECORD_SESSION, STORE_DIRNAME
from autopass_build.core.plural import counted
from autopass_build.store.index import DamagedIndex, Store, StoreError
from autopass_build.store.targets import probes


def add_parsers(sub) -> None:
    p = sub.add_parser("record", help="run a build, capturing each unit's IR and every link",
                       description="Run BUILD with autopass's wrapper as the C and C++ "
                       "compiler (CC/CXX, and cc/gcc/clang/c++/g++ first on PATH). Every "
                       "compile runs exactly as asked; the wrapper also stores the unit's "
                       "pre-optimization LLVM IR, its command line and each link step. "
                       "For CMake, configure a fresh build folder under record, or use "
                       "cmake/AutoPass.cmake.",
                       epilog="example: autopass record -- make -j2\n"
                              "         autopass record -- sh -c 'cmake -B build -G Ninja "
                              "&& ninja -C build'",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--store", metavar="DIR", help=f"store folder (default: ROOT/{STORE_DIRNAME})")
    p.add_argument("--root", metavar="DIR",
                   help="project root; sources are recorded relative to it (default: .)")
    add_config_option(p)
    p.add_argument("command", nargs=argparse.REMAINDER, metavar="-- BUILD...",
                   help="the build command (default: [build].command of autopass.toml)")
    p.set_defaults(func=cmd_record)


def _runnable(program: str, folder: str) -> bool:
    if os.sep in program:
        path = os.path.join(folder, program)
        return os.path.isfile(path) and os.access(path, os.X_OK)
    return shutil.which(program) is not None


def cmd_record(args: argparse.Namespace) -> int:
    command = args.command
    if command and command[0] == "--":
        command = command[1:]
    folder = None
    if not command:
        command, folder = configured_build(args, "record")
    root = os.path.abspath(args.root or os.getcwd())
    if not os.path.isdir(root):
        raise CliError(f"--root {args.root}: not a folder; give the project root that "
                       "sources are recorded relative to")
    store_dir = os.path.abspath(args.store or os.path.join(root, STORE_DIRNAME))
    if not _runnable(command[0], folder or os.getcwd()):   # before a store is made for it
        raise CliError(f"build command not found: {command[0]!r} (not on PATH, or not an "
                       "executable file)")
    store = _create_store(store_dir)
    store.spool.sweep_tmp()       # what wrappers killed mid-compile left behind
    if not toolchain.find_tool("clang", exclude=frozenset({wrapper_dir(store_dir)})):
        raise CliError(toolchain.not_found("clang"))
    env = record_environment(store_dir, root)
    session_dir = tempfile.mkdtemp(prefix="autopass-record-")
    try:
        return _record_build(store, command, folder, env, os.path.join(session_dir, "session"))
    finally:
        shutil.rmtree(session_dir, ignore_errors=True)


def _record_build(store: Store, command: list[str], folder: str | None, env: dict[str, str],
                  session: str) -> int:
    """Run the build with the wrappers recording into `store`, then say what it
    recorded (the wrappers list their records in the `session` file)."""
    env[ENV_RECORD_SESSION] = session
    started = time.time()
    log_before = len(store.log_lines())
    print(f"autopass: recording into {store.dir}", file=sys.stderr)
    packaging = for_debian_packaging(command, env)
    if packaging:
        print(f"autopass: {packaging}", file=sys.stderr)
    try:
        with serving(env):
            status = proc.run_build(command, env, folder)
    except (FileNotFoundError, PermissionError):
        raise CliError(f"build command not found: {command[0]!r} (not on PATH, or not an "
                       "executable file)")
    if status > 128 and status - 128 in proc.FORWARDED_SIGNALS:
        print(f"autopass: interrupted (signal {status - 128}); the build was stopped, "
              "what was recorded so far is kept", file=sys.stderr)
        return status
    try:
        recorded, skipped = _print_record_summary(store, started, log_before,
                                                  _session(session))
    except StoreError as error:   # the build is done either way: its status is ours
        print(f"autopass: the build finished (exit {status}), but the store could not "
              f"keep everything: {error}", file=sys.stderr)
        return status
    if recorded and status == 0:
        try:   # the build that recorded something, for `autopass init`
            store.remember_build(command, folder or os.getcwd())
        except OSError:
            pass
    elif status == 0 and not skipped:
        print(f"autopass: {unseen.advice(folder or os.getcwd(), started)}", file=sys.stderr)
    if status != 0:
        print(f"autopass: the build command exited with {status}", file=sys.stderr)
    return status


def _session(path: str) -> dict[str, set[str]] | None:
    """What this `autopass record`'s build recorded (recorder._in_session): kind ->
    keys, or None when the wrappers wrote no session file (nothing went through them,
    or a wrapper run by hand)."""
    try:
        with open(path) as handle:
            lines = handle.read().split()
    except OSError:
        return None
    found: dict[str, set[str]] = {"unit": set(), "link": set(), "skip": set()}
    for kind, key in zip(lines[::2], lines[1::2]):
        found.setdefault(kind, set()).add(key)
    return found


def _print_record_summary(store: Store, started: float, log_before: int,
                          session: dict[str, set[str]] | None = None) -> tuple[int, int]:
    """Says what this build recorded: (units and links recorded, commands skipped).
    `session`: its own records, where another record into the same store at the same
    time recorded others (else what was recorded since it `started`)."""
    all_units, all_links = store.units(), store.links()
    if session is not None:
        recorded = [u for u in all_units if u.id in session["unit"]]
        skipped = [s for s in store.skipped()
                   if hash_json([s.cwd, s.argv, s.sources]) in session["skip"]]
        links = [link for link in all_links if hash_json([link.output]) in session["link"]]
    else:
        recorded = [u for u in all_units if u.recorded_at >= started]
        skipped = [s for s in store.skipped() if s.recorded_at >= started]
        links = [link for link in all_links if link.recorded_at >= started]
    deleted = probes(store)
    units = [u for u in recorded if u.id not in deleted]   # a probe in meson's /tmp/tmpXXXX
    reasons = collections.Counter(s.reason for s in skipped)
    line = f"autopass: recorded {counted(len(units), 'unit')} and {counted(len(links), 'link')}"
    if len(recorded) > len(units):
        line += (f" (and {counted(len(recorded) - len(units), 'configure probe')}, deleted "
                 "after the build: left out)")
    if reasons:
        line += "; skipped " + ", ".join(f"{n} {r}" for r, n in sorted(reasons.items()))
    if len(all_units) != len(recorded) or len(all_links) != len(links):
        line += (f" (the store now holds {counted(len(all_units), 'unit')}, "
                 f"{counted(len(all_links), 'link')})")
    print(line, file=sys.stderr)
    outside = [u.source for u in units if os.path.isabs(u.source_rel)]
    if outside:
        common = os.path.commonpath(outside + [os.path.dirname(store.dir)])
        print(f"autopass: {len(outside)} sources lie outside the project root "
              f"{os.path.dirname(store.dir)} (an out-of-tree build?): remove {store.dir} "
              f"and record with --root {common}, so that autopass.flags.json names them "
              "relative to it, the same on every machine", file=sys.stderr)
    for reason, fix in fixes([(s.reason, s.detail) for s in skipped]):
        print(f"autopass: {counted(reasons[reason], 'command')} skipped ({reason}) cannot "
              f"be tuned: {fix}", file=sys.stderr)
    failures = store.log_lines()[log_before:]
    if failures:
        print(f"autopass: {counted(len(failures), 'problem')} logged in "
              f"{os.path.join(store.dir, 'autopass.log')}; the build was not affected. "
              f"First: {failures[0]}", file=sys.stderr)
    return len(recorded) + len(links), len(skipped)


def _create_store(store_dir: str) -> Store:
    """The store to record into, made if need be.  A damaged index (overwritten,
    truncated) is set aside, said in one line, and the build recorded into a new one:
    what was recorded before cannot be read anyway, and recording again is the fix."""
    try:
        try:
            return Store.create(store_dir)
        except DamagedIndex as error:
            store = Store(store_dir)
            aside = store.set_aside_index()
            print(f"autopass: {error.what}; kept as {aside}, and this "
                  "build is recorded into a new index", file=sys.stderr)
            return Store.create(store_dir)
    except (OSError, StoreError) as error:
        why = getattr(error, "strerror", None) or str(error)
        raise CliError(f"cannot create the store at {store_dir} ({why}); the build was not "
                       "run: pass --store DIR with a folder you can write") from None
