"""The `autopass` command: parses, calls, prints."""

from __future__ import annotations

import argparse
import collections
import json
import os
import signal
import subprocess
import sys
import time

from autopass_build import __version__
from autopass_build import config as configuration
from autopass_build.capture.build_env import record_environment
from autopass_build.core import toolchain
from autopass_build.core.names import STORE_DIRNAME
from autopass_build.store.index import Store, StoreError
from autopass_build.store.targets import resolve

EPILOG = """\
typical session:
  autopass doctor                       check that clang/opt/llvm-profdata {v} are here
  autopass record -- make -j2           build once, capturing every unit's LLVM IR
  autopass units                        what was captured (and what was skipped, and why)
  autopass targets                      which units each binary is made of
  autopass init                         write autopass.toml: the benchmark and its check
  autopass replay --check               does replaying the IR reproduce every object?
  autopass try --flags 'lib/lz.c=-O3 -fno-unroll-loops'
                                        one candidate against the baseline: ratio, interval
  autopass profile                      hot functions of the benchmark and their units
  autopass tune                         search per-file flags (offline rules agent default)
  autopass report --html report.html    what the tuning run did, with its progress plot
  autopass apply -- make -j2            a build with each file's tuned flags
  autopass verify                       two clean tuned builds identical? speedup vs plain
""".format(v=toolchain.DEFAULT_LLVM_VERSION)


class CliError(Exception):
    pass


def _store_dir(args: argparse.Namespace) -> str:
    if args.store:
        return os.path.abspath(args.store)
    from autopass_build.capture.spool import find_store_dir
    return find_store_dir(os.getcwd()) or os.path.abspath(STORE_DIRNAME)


def _open(args: argparse.Namespace) -> Store:
    try:
        return Store.open_existing(_store_dir(args))
    except StoreError as error:
        raise CliError(str(error))


def _root_of(store: Store) -> str:
    return os.path.dirname(store.dir)


# -- record -----------------------------------------------------------------------------
def cmd_record(args: argparse.Namespace) -> int:
    command = args.command
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        raise CliError("nothing to build: give the build command after `--`, e.g. "
                       "`autopass record -- make -j2`")
    root = os.path.abspath(args.root or os.getcwd())
    store_dir = os.path.abspath(args.store or os.path.join(root, STORE_DIRNAME))
    store = Store.create(store_dir)
    if not toolchain.find_tool("clang", exclude=frozenset({os.path.join(store_dir, "bin")})):
        raise CliError("clang not found: " + toolchain.INSTALL_HINT.format(
            v=toolchain.DEFAULT_LLVM_VERSION))
    env = record_environment(store_dir, root)
    started = time.time()
    log_before = len(store.log_lines())
    print(f"autopass: recording into {store_dir}", file=sys.stderr)
    try:
        status = subprocess.call(command, env=env)
    except FileNotFoundError:
        raise CliError(f"build command not found: {command[0]!r}")
    except KeyboardInterrupt:
        print("autopass: interrupted; what was recorded so far is kept", file=sys.stderr)
        return 130
    _print_record_summary(store, started, log_before)
    if status != 0:
        print(f"autopass: the build command exited with {status}", file=sys.stderr)
    return status


def _print_record_summary(store: Store, started: float, log_before: int) -> None:
    all_units, all_links = store.units(), store.links()
    units = [u for u in all_units if u.recorded_at >= started]
    skipped = [s for s in store.skipped() if s.recorded_at >= started]
    links = [link for link in all_links if link.recorded_at >= started]
    reasons = collections.Counter(s.reason for s in skipped)
    line = f"autopass: recorded {len(units)} units and {len(links)} links"
    if reasons:
        line += "; skipped " + ", ".join(f"{n} {r}" for r, n in sorted(reasons.items()))
    if len(all_units) != len(units) or len(all_links) != len(links):
        line += f" (the store now holds {len(all_units)} units, {len(all_links)} links)"
    print(line, file=sys.stderr)
    failures = store.log_lines()[log_before:]
    if failures:
        print(f"autopass: {len(failures)} problems logged in "
              f"{os.path.join(store.dir, 'autopass.log')}; the build was not affected. "
              f"First: {failures[0]}", file=sys.stderr)


# -- units / targets --------------------------------------------------------------------
def cmd_units(args: argparse.Namespace) -> int:
    store = _open(args)
    root = _root_of(store)
    units, skipped = store.units(), store.skipped()
    if args.json:
        json.dump({"root": root,
                   "units": [_unit_json(u, root) for u in units],
                   "skipped": [vars(s) for s in skipped]}, sys.stdout, indent=2)
        print()
        return 0
    if not units:
        print("no units recorded yet: run `autopass record -- <build command>`")
    else:
        width = max(len(u.source_rel) for u in units)
        print(f"{'SOURCE':<{width}}  LANG  OPT  OBJECT")
        for u in units:
            obj = os.path.relpath(u.output, root) if u.output else "(linked directly)"
            print(f"{u.source_rel:<{width}}  {_short_lang(u.language):<4}  "
                  f"{u.opt_level:<3}  {obj}")
        print(f"{len(units)} units")
    if skipped:
        print(f"\nskipped ({len(skipped)}):")
        for s in skipped:
            what = " ".join(os.path.relpath(p, root) for p in s.sources) or " ".join(s.argv)[:80]
            print(f"  {s.reason:<16} {what}" + (f"  ({s.detail})" if s.detail else ""))
    return 0


def _short_lang(language: str) -> str:
    return {"c++": "c++", "c": "c", "objective-c": "objc", "objective-c++": "objc++"
            }.get(language, language[:4])


def _unit_json(u, root: str) -> dict:
    data = vars(u).copy()
    data["output_rel"] = os.path.relpath(u.output, root) if u.output else None
    return data


def cmd_targets(args: argparse.Namespace) -> int:
    store = _open(args)
    targets = resolve(store, _root_of(store))
    if args.json:
        json.dump([t.to_json() for t in targets], sys.stdout, indent=2)
        print()
        return 0
    if not targets:
        print("no links recorded yet: run `autopass record -- <build command>`")
    for t in targets:
        print(f"{t.output_rel} ({t.kind}): {len(t.units)} units")
        for source in t.unit_sources:
            print(f"  {source}")
        for lib in t.shared_libraries:
            print(f"  shared library {lib}")
        for item in t.unmatched:
            print(f"  not captured: {item}")
    return 0


# -- init / replay / try ------------------------------------------------------------------
def cmd_init(args: argparse.Namespace) -> int:
    path = os.path.abspath(configuration.CONFIG_NAME)
    if os.path.exists(path) and not args.force:
        raise CliError(f"{path} exists; edit it, or pass --force to overwrite it")
    target = ""
    store_dir = _store_dir(args)
    if os.path.isdir(store_dir):
        executables = [t for t in resolve(Store.open_existing(store_dir), os.getcwd())
                       if t.kind == "executable"]
        target = executables[0].output_rel if len(executables) == 1 else ""
    with open(path, "w") as handle:
        handle.write(configuration.starter_text(args.build, target))
    print(f"wrote {path}: set [run].command to your benchmark, then `autopass try`")
    return 0


def _load_config(args: argparse.Namespace) -> configuration.Config:
    try:
        config = configuration.load(args.config)
        return configuration.with_overrides(
            config, measure={"metric": getattr(args, "metric", None),
                             "max_pairs": getattr(args, "max_pairs", None),
                             "min_pairs": getattr(args, "min_pairs", None)})
    except configuration.ConfigError as error:
        raise CliError(str(error))


def cmd_replay(args: argparse.Namespace) -> int:
    from autopass_build.instruments import fidelity

    store = _open(args)
    if not args.check:
        raise CliError("say what to do: `autopass replay --check` replays every unit with "
                       "its original flags and compares the objects")
    progress = _progress("replaying")
    results = fidelity.check(store, progress=lambda i, n, u: progress(
        f"{i + 1}/{n} {u.source_rel}", transient=True))
    progress(None)
    checked = [r for r in results if not r.reason.startswith("not checked")]
    bad = [r for r in results if not r.reproduced]
    for r in bad:
        print(f"  not reproduced: {r.unit.source_rel} ({r.reason}); will be recompiled "
              "from source when tuned")
    for r in results:
        if r.reason.startswith("not checked"):
            print(f"  {r.reason.replace('not checked: ', 'not checked: ' + r.unit.source_rel + ': ')}")
    share = (len(checked) - len(bad)) / len(checked) if checked else 1.0
    print(f"{len(checked) - len(bad)}/{len(checked)} units reproduce their recorded object "
          f"from IR ({share:.1%})")
    return 0 if not bad else 1


def cmd_try(args: argparse.Namespace) -> int:
    from autopass_build.instruments.evaluate import (
        EvaluateError,
        Evaluator,
        parse_unit_flags,
    )
    from autopass_build.instruments.measure import MeasureError

    store = _open(args)
    config = _load_config(args)
    if not args.flags:
        raise CliError("give at least one --flags 'SOURCE=FLAGS', e.g. "
                       "--flags 'lib/lz.c=-O3 -fno-unroll-loops' (see `autopass units`)")
    progress = _progress("try")
    try:
        evaluator = Evaluator(store, config, args.target or "")
        flags_by_unit = parse_unit_flags(args.flags, evaluator.units)
        progress(f"replaying the baseline of {evaluator.target.output_rel}")
        evaluator.baseline()
        evaluation = evaluator.evaluate(flags_by_unit, progress)
    except (EvaluateError, MeasureError) as error:
        progress(None)
        raise CliError(str(error))
    progress(None)
    return _print_evaluation(evaluation, config)


def _print_evaluation(evaluation, config: configuration.Config) -> int:
    comparison = evaluation.comparison
    print(f"outcome: {evaluation.outcome}" + (f" ({evaluation.detail})" if evaluation.detail
                                              else ""))
    if comparison and comparison.estimate:
        est = comparison.estimate
        print(f"{config.measure.metric}: candidate/baseline = {est.ratio:.4f}x, "
              f"{est.level:.1%} interval [{est.low:.4f}, {est.high:.4f}], {est.pairs} pairs, "
              f"{comparison.runs} runs")
        print(f"verdict: {comparison.verdict.upper() if comparison.verdict else 'UNCLEAR'}")
    return 0


def _progress(label: str):
    """A one-line progress display on a terminal, plain lines otherwise."""
    tty = sys.stderr.isatty()
    state = {"shown": False, "last": 0.0}

    def show(message: str | None, transient: bool = False) -> None:
        """`transient` messages (per-file steps) are thinned out in logs; others never."""
        if message is None:
            if tty and state["shown"]:
                sys.stderr.write("\r\033[K")
                sys.stderr.flush()
            return
        if tty:
            sys.stderr.write(f"\r\033[K{label}: {message}"[:200])
            state["shown"] = True
        elif not transient or time.monotonic() - state["last"] >= 2.0:
            sys.stderr.write(f"{label}: {message}\n")
            state["last"] = time.monotonic()
        sys.stderr.flush()

    return show


def cmd_profile(args: argparse.Namespace) -> int:
    from autopass_build.instruments.evaluate import EvaluateError, Evaluator
    from autopass_build.instruments.hotspots import ProfileError, profile
    from autopass_build.instruments.measure import MeasureError

    store = _open(args)
    config = _load_config(args)
    try:
        evaluator = Evaluator(store, config, args.target or "")
        print(f"profiling {evaluator.target.output_rel} ...", file=sys.stderr)
        result = profile(evaluator)
    except (EvaluateError, MeasureError, ProfileError) as error:
        raise CliError(str(error))
    if args.json:
        from dataclasses import asdict
        json.dump(asdict(result), sys.stdout, indent=1)
        print()
        return 0
    print(f"{result.target} ({result.method}); hot functions:")
    for f in result.functions[:args.limit]:
        where = ", ".join(f.units) or "(not in a recorded unit: a library or the kernel)"
        print(f"  {f.share:5.1f}%  {f.name:<32} {where}")
    print("units by share:")
    for unit, share in list(result.unit_shares().items())[:args.limit]:
        print(f"  {share:5.1f}%  {unit}")
    return 0


# -- evidence / diff ------------------------------------------------------------------------
def _unit_arg(store: Store, spec: str):
    from autopass_build.instruments.evaluate import match_units

    matches = match_units(spec, store.units())
    if not matches:
        raise CliError(f"no unit {spec!r}; see `autopass units`")
    if len(matches) > 1:  # libtool's PIC and non-PIC twins: the PIC one runs in the .so
        matches.sort(key=lambda u: "-fPIC" not in u.argv)
    return matches[0]


def _flags_arg(text: str | None) -> tuple[str, ...]:
    from autopass_build.core import flags as flagset
    try:
        return flagset.parse(text or "")
    except flagset.FlagError as error:
        raise CliError(str(error))


def cmd_evidence(args: argparse.Namespace) -> int:
    from autopass_build.core.outcome import EvaluationError
    from autopass_build.instruments.evidence import Evidence
    from autopass_build.instruments.hotspots import load as load_profile

    store = _open(args)
    unit = _unit_arg(store, args.unit)
    flags = _flags_arg(args.flags)
    evidence = Evidence(store)
    measured = load_profile(store.dir)
    hot = {f.name: f.share for f in measured.functions} if measured else {}
    try:
        found = evidence.unit_evidence(unit, flags, args.function, hot=hot)
        extra = evidence.function_ir(unit, args.function, flags) if args.function else None
    except EvaluationError as error:
        raise CliError(str(error))
    if args.json:
        json.dump({**found.to_json(), **({"ir": extra} if extra else {})}, sys.stdout, indent=1)
        print()
        return 0
    print(f"{unit.source_rel} with {' '.join(flags) or 'its own flags'}: "
          f"{found.counts['Passed']} passed, {found.counts['Missed']} missed remarks")
    order = sorted(found.remarks, key=lambda f: (-hot.get(f, 0.0), -found.sizes.get(f, 0)))
    for function in order[:args.limit]:
        share = f", {hot[function]:.1f}% of the profile" if function in hot else ""
        print(f"\n{function} ({found.sizes.get(function, 0)} bytes{share})")
        for pass_name, entry in sorted(found.remarks[function].items()):
            for kind in ("missed", "passed"):
                for r in entry[kind][:4]:
                    numbers = " ".join(f"{k}={v:g}" for k, v in r.get("numbers", {}).items()
                                       if k != "Line")
                    print(f"  {kind:<6} {pass_name:<14} {r['at']:<14} {r['message'][:90]}"
                          + (f"  [{numbers}]" if numbers else ""))
    if extra:
        print(f"\n--- IR of {args.function} before optimization ---\n{extra['before']}")
        print(f"\n--- after ---\n{extra['after']}")
    return 0


def cmd_diff(args: argparse.Namespace) -> int:
    from autopass_build.core.outcome import EvaluationError
    from autopass_build.instruments.evidence import Evidence

    store = _open(args)
    unit = _unit_arg(store, args.unit)
    try:
        result = Evidence(store).diff(unit, _flags_arg(args.a), _flags_arg(args.b))
    except EvaluationError as error:
        raise CliError(str(error))
    if args.json:
        json.dump(result, sys.stdout, indent=1)
        print()
        return 0
    print(f"{unit.source_rel}: A = {' '.join(result['a']) or '(own flags)'}, "
          f"B = {' '.join(result['b']) or '(own flags)'}")
    total = result["total_size"]
    print(f"code size: {total['a']} -> {total['b']} bytes")
    for function, change in list(result["size_changes"].items())[:20]:
        print(f"  {function}: {change['a']} -> {change['b']}")
    for label in ("gained", "lost"):
        for function, passes in result[label].items():
            for pass_name, entry in passes.items():
                for kind in ("passed", "missed"):
                    for r in entry[kind][:4]:
                        print(f"{label:<6} {kind:<6} {function}: {pass_name}: {r['message'][:100]}")
    return 0


# -- doctor -----------------------------------------------------------------------------
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


# -- parser -----------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="autopass", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Make a whole C/C++ application faster without touching its source: "
                    "record its build, tune per-file compiler flags, apply them.",
        epilog=EPILOG)
    parser.add_argument("--version", action="version", version=f"autopass {__version__}")
    sub = parser.add_subparsers(dest="subcommand", metavar="COMMAND")

    def store_option(p: argparse.ArgumentParser) -> None:
        p.add_argument("--store", metavar="DIR",
                       help=f"the store folder (default: the nearest {STORE_DIRNAME}/ "
                            "from the current folder upwards)")

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
    p.add_argument("command", nargs=argparse.REMAINDER, metavar="-- BUILD...")
    p.set_defaults(func=cmd_record)

    p = sub.add_parser("units", help="list captured units and skipped commands with reasons")
    store_option(p)
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_units)

    p = sub.add_parser("targets", help="list linked binaries and the units each is made of")
    store_option(p)
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_targets)

    p = sub.add_parser("init", help="write a commented autopass.toml to start from")
    store_option(p)
    p.add_argument("--build", default="make -j2", help="the build command to write in")
    p.add_argument("--force", action="store_true", help="overwrite an existing file")
    p.set_defaults(func=cmd_init)

    p = sub.add_parser("replay", help="replay units from their IR; --check compares objects",
                       description="Replay every recorded unit from its stored IR with its "
                       "original flags and compare the object with the one the build made. "
                       "Units that do not reproduce are listed with the reason and are "
                       "recompiled from source when tuned. Exit status 1 if any differ.")
    store_option(p)
    p.add_argument("--check", action="store_true", help="compare replayed objects with the recorded ones")
    p.set_defaults(func=cmd_replay)

    def config_option(p: argparse.ArgumentParser) -> None:
        p.add_argument("--config", metavar="FILE",
                       help="autopass.toml to use (default: the nearest one upwards)")

    p = sub.add_parser("try", help="measure one flags candidate against the baseline",
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       description="Rebuild the target with the given per-unit flags (only "
                       "changed units are recompiled), check its output against the "
                       "baseline's, and measure both interleaved until the interval of the "
                       "ratio separates from 1 or the pair budget is spent.",
                       epilog="example:\n  autopass try --flags 'lib/lz.c=-O3 -fno-unroll-loops' "
                              "--flags 'lib/sort.c=-mllvm -inline-threshold=500'")
    store_option(p)
    config_option(p)
    p.add_argument("--flags", action="append", default=[], metavar="SOURCE=FLAGS",
                   help="flags for one unit (repeatable); SOURCE as `autopass units` shows it")
    p.add_argument("--target", help="the binary to rebuild (default: [run].target or the only one)")
    p.add_argument("--metric", choices=configuration.METRICS, help="override [measure].metric")
    p.add_argument("--min-pairs", type=int, help="override [measure].min_pairs")
    p.add_argument("--max-pairs", type=int, help="override [measure].max_pairs")
    p.set_defaults(func=cmd_try)

    p = sub.add_parser("profile", help="run the benchmark once: hot functions and their units",
                       description="Sample the benchmark with perf (cpu-clock) or, where perf "
                       "cannot, callgrind; map hot functions to the units that define them; "
                       "store the result in the store for the tuner.")
    store_option(p)
    config_option(p)
    p.add_argument("--target", help="the binary (default: [run].target or the only one)")
    p.add_argument("--limit", type=int, default=15, help="rows shown")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_profile)

    p = sub.add_parser("evidence", help="what the compiler did and missed in one unit",
                       description="Optimization remarks (passed and missed, with inline "
                       "cost/threshold and vectorization factors), code size per function, "
                       "and with --function the IR before and after optimization.")
    store_option(p)
    p.add_argument("unit", help="a unit's source as `autopass units` shows it")
    p.add_argument("--flags", help="extra flags to compile it with (allowlisted), e.g. --flags='-O3'")
    p.add_argument("--function", help="only this function, with its IR")
    p.add_argument("--limit", type=int, default=8, help="functions shown (hot first with a stored profile, else largest)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_evidence)

    p = sub.add_parser("diff", help="remarks and sizes of one unit under two flag sets")
    store_option(p)
    p.add_argument("unit")
    p.add_argument("--a", default="", help="flags of configuration A (default: none); write --a='-O3 ...' when they start with a dash")
    p.add_argument("--b", default="", help="flags of configuration B, e.g. --b='-fno-vectorize'")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_diff)

    from autopass_build.cli import apply as cli_apply
    from autopass_build.cli import tune as cli_tune
    cli_tune.add_parser(sub, store_option, config_option)
    cli_tune.add_report_parser(sub, store_option)
    cli_tune.add_pgo_parser(sub, store_option, config_option)
    cli_tune.add_screen_parser(sub)
    cli_apply.add_parsers(sub, config_option)

    p = sub.add_parser("doctor", help="find clang/opt/llvm-profdata and say how to fix gaps")
    p.add_argument("--llvm-version", type=int, default=toolchain.DEFAULT_LLVM_VERSION,
                   metavar="N", help="LLVM major version to look for (default: %(default)s)")
    p.set_defaults(func=cmd_doctor)
    return parser


def _terminate(signum: int, _frame: object) -> None:
    raise KeyboardInterrupt  # unwinds through the code that kills its children


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    signal.signal(signal.SIGTERM, _terminate)
    try:
        return args.func(args)
    except KeyboardInterrupt:
        print("autopass: interrupted; the processes it started were stopped", file=sys.stderr)
        return 130
    except (CliError, StoreError) as error:
        print(f"autopass: error: {error}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `autopass units | head`: the reader left, not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
