"""`autopass record`, `units`, `targets`, `init`, `doctor`: capturing a build and looking at what was captured."""

from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

from autopass_build import config as configuration
from autopass_build.capture import unseen
from autopass_build.capture.build_env import (
    for_debian_packaging,
    record_environment,
    wrapper_dir,
)
from autopass_build.capture.compiler_args import fixes
from autopass_build.capture.server import serving
from autopass_build.cli.common import (
    CliError,
    add_config_option,
    add_store_option,
    open_store,
    root_of,
    shown_path,
    store_dir,
)
from autopass_build.core import proc, toolchain
from autopass_build.core.clean_command import clean_command, make_dry_run
from autopass_build.core.files import hash_json, write_atomic
from autopass_build.core.names import ENV_RECORD_SESSION, STORE_DIRNAME
from autopass_build.core.plural import counted
from autopass_build.store.index import DamagedIndex, Store, StoreError, UnitRecord
from autopass_build.store.targets import executables_text, probes, resolve


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

    p = sub.add_parser("units", help="list captured units and skipped commands with reasons")
    add_store_option(p)
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_units)

    p = sub.add_parser("targets", help="list linked binaries and the units each is made of")
    add_store_option(p)
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_targets)

    p = sub.add_parser("init", help="write a commented autopass.toml to start from",
                       description="Write autopass.toml in the folder that holds the store, every key "
                       "commented: [build].command (the command `autopass record --` ran), "
                       "[build].clean guessed from it (make, ninja, cmake --build, meson "
                       "compile, scons, waf; `verify` builds from scratch with it), and the "
                       "recorded executables to choose [run].target from, the likely "
                       "benchmark first.  Then set [run].command to your benchmark and run "
                       "`autopass profile`.")
    add_store_option(p)
    p.add_argument("--build", default=None,
                   help="the build command to write in (default: the one `autopass record "
                        "--` ran here, else 'make -j2')")
    p.add_argument("--force", action="store_true",
                   help="replace an existing autopass.toml (the old one is kept as "
                        "autopass.toml.bak)")
    p.set_defaults(func=cmd_init)

    p = sub.add_parser("doctor", help="find clang/opt/llvm-profdata and say how to fix gaps")
    p.add_argument("--llvm-version", type=int, default=toolchain.DEFAULT_LLVM_VERSION,
                   metavar="N", help="LLVM major version to look for (default: %(default)s)")
    p.set_defaults(func=cmd_doctor)


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
        command, folder = _configured_build(args)
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


def _configured_build(args: argparse.Namespace) -> tuple[list[str], str]:
    """`autopass record` with no command: [build].command of autopass.toml, and the
    folder it runs in ([build].root)."""
    try:
        config = configuration.load(args.config)
    except configuration.ConfigError as error:
        raise CliError(f"nothing to build, and {error}")
    if not config.build.command:
        raise CliError("nothing to build: give the build command after `--`, e.g. "
                       "`autopass record -- make -j2`, or set [build].command in "
                       f"{configuration.CONFIG_NAME}")
    print(f"autopass: building with [build].command of {config.path}", file=sys.stderr)
    return list(config.build.command), config.resolve(config.build.root)


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


def _loose_units_note(store: Store, root: str, units: list[UnitRecord]) -> str:
    """What to say of the units no recorded link uses ("" when there are none).  A
    second compile of a source whose other compile is linked is the common case (libtool
    archives opus's plain objects into libopus.a, which nothing here links, beside the
    PIC ones of libopus.so): said apart from units whose program may have been linked
    past the wrapper."""
    linked = {uid for t in resolve(store, root) for uid in t.runtime_units()}
    linked_sources = {u.source for u in units if u.id in linked}
    loose = [u for u in units if u.id not in linked]
    twins = [u for u in loose if u.source in linked_sources]
    other = [shown_path(u.source_rel) for u in loose if u.source not in linked_sources]
    lines = []
    if twins:
        lines.append(f"{len(twins)} units compile a source again whose other compile is "
                     "linked (libtool's static-library objects beside its shared "
                     "library's, for one): only the linked compile is tuned")
    if other:
        lines.append(f"{len(other)} units are in no recorded link ({', '.join(other[:5])}"
                     f"{', ...' if len(other) > 5 else ''}): no program this build linked "
                     "through autopass uses them, so they cannot be tuned or given "
                     "whole-program stages. Either nothing links them in this build (a test "
                     "library that only `make check` links: fine), or their program was "
                     "linked without the wrapper: link through $(CC) under `autopass record`")
    return "\n".join(lines)


def cmd_units(args: argparse.Namespace) -> int:
    store = open_store(args)
    root = root_of(store)
    every, skipped = store.units(), store.skipped()
    probe_ids = probes(store)
    probe_units = [u for u in every if u.id in probe_ids]
    units = [u for u in every if u.id not in probe_ids]
    deleted = sorted({u.source_rel for u in probe_units})
    if args.json:
        json.dump({"root": root,
                   "units": [_unit_json(u, root) for u in units],
                   "skipped": [vars(s) for s in skipped]}, sys.stdout, indent=2)
        print()
        return 0
    if store.waiting:
        print(f"note: {counted(store.waiting, 'record')} of the last build wait in the spool: "
              f"the disk of {store.dir} is full; free space there and run this again")
    if not every and skipped:
        print("no units recorded: every compile was skipped (below)")
    elif not every:
        print("no units recorded yet: run `autopass record -- <build command>`")
    elif units:
        width = max(len(shown_path(u.source_rel)) for u in units)
        print(f"{'SOURCE':<{width}}  LANG  OPT  OBJECT")
        for u in units:
            obj = os.path.relpath(u.output, root) if u.output else "(linked directly)"
            print(f"{shown_path(u.source_rel):<{width}}  {_short_lang(u.language):<4}  "
                  f"{u.opt_level:<3}  {shown_path(obj)}")
        print(counted(len(units), "unit"))
    if deleted:
        print(f"left out: {len(probe_units)} units whose source and object were "
              f"deleted after the build, configure probes ({', '.join(deleted[:5])}"
              f"{', ...' if len(deleted) > 5 else ''})")
    if units:
        note = _loose_units_note(store, root, units)
        if note:
            print(note)
    if skipped:
        print(f"\nskipped ({len(skipped)}):")
        for s in skipped:
            what = shown_path(" ".join(os.path.relpath(p, root) for p in s.sources)
                              or " ".join(s.argv)[:80])
            print(f"  {s.reason:<16} {what}"
                  + (f"  ({shown_path(s.detail)})" if s.detail else ""))
        for reason, fix in fixes([(s.reason, s.detail) for s in skipped]):
            print(f"{reason}: {fix}")
    return 0


def _short_lang(language: str) -> str:
    return {"c++": "c++", "c": "c", "objective-c": "objc", "objective-c++": "objc++"
            }.get(language, language[:4])


def _unit_json(u, root: str) -> dict:
    data = vars(u).copy()
    data["output_rel"] = os.path.relpath(u.output, root) if u.output else None
    return data


def cmd_targets(args: argparse.Namespace) -> int:
    store = open_store(args)
    targets = resolve(store, root_of(store))
    if args.json:
        json.dump([t.to_json() for t in targets], sys.stdout, indent=2)
        print()
        return 0
    if not targets:
        print(_nothing_linked(store))
    for t in targets:
        print(f"{t.output_rel} ({t.kind}): {len(t.units)} units")
        for source in t.unit_sources:
            print(f"  {shown_path(source)}")
        for lib in t.shared_libraries:
            print(f"  shared library {lib}")
        for item in t.unmatched:
            print(f"  not captured: {item}")
    return 0


def _nothing_linked(store: Store) -> str:
    """Why `targets` has nothing to list: no recording yet, or one whose compiles were
    all skipped (with what to change), or one that linked nothing through autopass."""
    skipped, units = store.skipped(), store.units()
    if units:
        return ("no links recorded: the units were compiled but nothing linked them "
                "through autopass (link with $(CC) under `autopass record`)")
    if not skipped:
        return "no links recorded yet: run `autopass record -- <build command>`"
    reasons = sorted({s.reason for s in skipped})
    fixes_found = fixes([(s.reason, s.detail) for s in skipped])
    return (f"no links recorded: every compile was skipped ({', '.join(reasons)}); "
            + (fixes_found[0][1] if fixes_found else "see `autopass units` for why"))


def cmd_init(args: argparse.Namespace) -> int:
    path = os.path.abspath(configuration.CONFIG_NAME)
    if os.path.exists(path) and not args.force:
        raise CliError(f"{path} exists; edit it, or pass --force to overwrite it")
    target = ""
    build: str | list[str] = args.build or "make -j2"
    folder = store_dir(args)
    executables = []
    guessed = args.build is None
    if os.path.isdir(folder):
        store = Store.open_existing(folder)
        executables = [t for t in resolve(store, os.getcwd()) if t.kind == "executable"]
        target = executables[0].output_rel if len(executables) == 1 else ""
        recorded = store.recorded_build()
        if args.build is None and recorded and _same_folder(recorded.cwd, os.getcwd()):
            build, guessed = _as_configured(recorded.argv), False
    clean = clean_command(build)
    lacking = _clean_target_lacking(clean)
    clean = None if lacking else clean
    kept = _keep_a_copy(path) if args.force and os.path.exists(path) else ""
    try:
        write_atomic(path, configuration.starter_text(build, target, clean).encode())
    except OSError as error:
        raise CliError(f"cannot write {path}: {error.strerror}; run `autopass init` in a "
                       "folder you can write") from None
    if kept:
        print(f"kept the {configuration.CONFIG_NAME} that was here as {kept}")
    said = build if isinstance(build, str) else " ".join(build)
    if guessed:    # gawk: its recorded build failed (doc/ needs files Debian removed)
        said += (", a guess: no build here succeeded under `autopass record`; put the "
                 "command that builds the program in [build].command")
    print(f"wrote {path} (build: {said}; clean: {clean or 'not known'}): set [run].command "
          "to your benchmark, then `autopass profile` (does it run, where does the time go?) "
          "and `autopass tune`")
    if clean is None:
        print(lacking + "set [build].clean in autopass.toml to the command that brings the "
              "tree back to clean: `autopass verify` builds from scratch")
    if len(executables) > 1:
        print("several executables were recorded; set [run].target to the one the "
              "benchmark runs: " + executables_text(executables))
    return 0


def _clean_target_lacking(clean: str | None) -> str:
    """The start of a sentence saying that the guessed `make ... clean` would fail, when
    the makefile the build reads has no `clean` target (asked with `make -n`, which runs
    nothing), else ""."""
    dry = make_dry_run(clean) if clean else None
    if dry is None:
        return ""
    folder, argv = dry
    try:
        done = proc.run_captured(argv, os.path.join(os.getcwd(), folder),
                                 {**os.environ, "LC_ALL": "C"}, timeout=30)
    except OSError:
        return ""
    if done.status == 0 or b"No rule to make target 'clean'" not in done.stderr:
        return ""
    return f"`{clean}` would fail: the makefile has no `clean` target; "


def _keep_a_copy(path: str) -> str:
    """`init --force` replaces the user's config: the old one is kept beside it, under
    the first free name of autopass.toml.bak, .bak.2, ... (nothing the user wrote is
    lost, however often they re-run init)."""
    for n in range(1, 1000):
        copy = f"{path}.bak" + (f".{n}" if n > 1 else "")
        if not os.path.lexists(copy):
            try:
                shutil.copy2(path, copy)
            except OSError as error:
                raise CliError(f"cannot keep a copy of {path} as {copy}: {error.strerror}; "
                               "move it away yourself, then run `autopass init`") from None
            return os.path.basename(copy)
    raise CliError(f"{path}.bak to .bak.999 all exist; remove some, then run `autopass init "
                   "--force`")


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


def _same_folder(a: str, b: str) -> bool:
    return os.path.realpath(a) == os.path.realpath(b)


def _as_configured(argv: list[str]) -> str | list[str]:
    """A recorded argument vector as [build].command says it: `sh -c SCRIPT` as the
    script (a string runs with sh -c), anything else as the vector itself."""
    if len(argv) == 3 and os.path.basename(argv[0]) in ("sh", "bash", "dash") \
            and argv[1] == "-c":
        return argv[2]
    return argv


# Tools a stage needs, not autopass itself: their absence is a note, not a problem.
OPTIONAL_TOOLS = {"ld.lld": ("lld-{v}", "the LTO stages (lto, thinlto) are"),
                  "llvm-bolt": ("bolt-{v}", "the BOLT stage is"),
                  "merge-fdata": ("bolt-{v}", "the BOLT stage is")}


def _doctor_bolt() -> None:
    """BOLT also needs its instrumentation runtime, which the tool list cannot show."""
    from autopass_build.core import bolt

    if bolt.tool() is None or bolt.tool("merge-fdata") is None:
        return   # the tool list's note said so
    why = bolt.missing()
    if why:
        print(f"note: the BOLT stage is skipped: {why}")
    else:
        print(f"  {'bolt runtime':<14} {bolt.runtime_of(bolt.tool() or '')}")


def _doctor_openmp(version: int) -> None:
    """Under autopass, clang compiles a build that says gcc: one that uses OpenMP
    (`-fopenmp`) needs clang's own runtime, or its configure check finds no OpenMP and
    the program builds single-threaded."""
    clang = toolchain.find_tool("clang", version)
    if clang is None:
        return   # the tool list said so
    try:
        found = subprocess.run([clang, "-fopenmp", "-E", "-x", "c", "-o", os.devnull, "-"],
                               input=b"#include <omp.h>\n", capture_output=True,
                               timeout=60).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        found = False
    if not found:
        print("note: clang has no OpenMP (omp.h): a build using -fopenmp finds none under "
              "autopass and builds without it (sudo apt-get install "
              f"libomp-{version}-dev)")


def _doctor_record_plugin(version: int) -> None:
    """Record runs each unit's front end once with its pass plugin, which is built here
    against LLVM's headers; without them it compiles every unit twice."""
    from autopass_build.capture.build_env import record_plugin, wrapper_dir

    built = record_plugin(wrapper_dir(tempfile.gettempdir()))
    if built:
        print(f"  {'record plugin':<14} {built[0]}")
    else:
        print("note: record compiles every unit twice (its IR-saving pass plugin needs "
              f"llvm-config and LLVM's headers: sudo apt-get install llvm-{version}-dev)")


def cmd_doctor(args: argparse.Namespace) -> int:
    version = args.llvm_version
    reports = toolchain.survey(version)
    problems = []
    majors = set()
    for report in reports:
        if report.path is None:
            print(f"  {report.tool:<14} MISSING")
            problems.append(report.tool)
            continue
        ident = report.identity
        if ident is None:
            print(f"  {report.tool:<14} {report.path}  (did not report a version)")
            problems.append(report.tool)
            continue
        majors.add(ident.major)
        target = f"  target {ident.target}" if ident.target else ""
        print(f"  {report.tool:<14} {report.path}  version {ident.version}{target}")
    required_missing = [p for p in problems if p in ("clang", "clang++", "opt")]
    for tool, (package, needed_by) in OPTIONAL_TOOLS.items():
        if tool in problems:
            problems.remove(tool)
            print(f"note: {tool} missing: {needed_by} skipped without it "
                  f"(sudo apt-get install {package.format(v=version)})")
    _doctor_bolt()
    _doctor_openmp(version)
    _doctor_record_plugin(version)
    if len(majors) > 1:
        print(f"error: the tools come from different LLVM versions {sorted(majors)}; "
              "set AUTOPASS_CC, AUTOPASS_CXX, AUTOPASS_OPT, AUTOPASS_PROFDATA to one version")
        return 1
    if problems:
        print(f"{'error' if required_missing else 'warning'}: missing {', '.join(problems)}; "
              + toolchain.INSTALL_HINT.format(v=version))
        return 1 if required_missing else 0
    print(f"ok: LLVM {majors.pop()} toolchain found")
    return 0
