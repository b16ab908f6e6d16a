"""`autopass replay`, `try`, `profile`, `evidence`, `diff`, `pgo`: one unit or candidate at a time."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING

from autopass_build.cli.common import (
    CliError,
    Progress,
    add_config_option,
    add_metric_option,
    add_store_option,
    add_target_option,
    count,
    key_help,
    load_config,
    measures,
    open_store,
    print_evaluation,
)
from autopass_build.store.index import Store

if TYPE_CHECKING:
    from autopass_build.candidates.evaluate import Evaluator


def add_parsers(sub) -> None:
    for add in (_add_replay, _add_try_, _add_profile, _add_evidence, _add_diff, _add_pgo):
        add(sub)


def _add_replay(sub) -> None:
    p = sub.add_parser("replay", help="replay units from their IR; --check compares objects",
                       description="Replay every recorded unit from its stored IR with its "
                       "original flags and compare the object with the one the build made. "
                       "Units that do not reproduce are listed with the reason and are "
                       "recompiled from source when tuned. Exit status 1 if any differ.")
    add_store_option(p)
    p.add_argument("--check", action="store_true", help="compare replayed objects with the recorded ones")
    p.set_defaults(func=cmd_replay)


def _add_try_(sub) -> None:
    p = sub.add_parser("try", help="measure one flags candidate against the baseline",
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       description="Rebuild the target with the given per-unit flags (only "
                       "changed units are recompiled), check its output against the "
                       "baseline's, and measure both interleaved until the interval of the "
                       "ratio separates from 1 or the pair budget is spent.",
                       epilog="example:\n  autopass try --flags 'lib/lz.c=-O3 -fno-unroll-loops' "
                              "--flags 'lib/sort.c=-mllvm -inline-threshold=500'")
    add_store_option(p)
    add_config_option(p)
    p.add_argument("--flags", action="append", default=[], metavar="SOURCE=FLAGS",
                   help="flags for one unit (repeatable); SOURCE as `autopass units` shows it")
    add_target_option(p)
    add_metric_option(p)
    p.add_argument("--min-pairs", type=int, help=key_help("measure", "min_pairs"))
    p.add_argument("--max-pairs", type=int, help=key_help("measure", "max_pairs"))
    p.set_defaults(func=cmd_try)


def _add_profile(sub) -> None:
    p = sub.add_parser("profile", help="hot functions and their units; how steady each "
                       "timed metric is",
                       description="Sample the benchmark with perf (cpu-clock) or, where perf "
                       "cannot, callgrind; map hot functions to the units that define them; "
                       "store the result in the store for the tuner.  Then, under a timed "
                       "metric (wall, cpu, user), run the recorded build up to 8 more times "
                       "(at most ~20 s) and say how much each metric varies, naming one that "
                       "would need clearly fewer pairs than [measure].metric.")
    add_store_option(p)
    add_config_option(p)
    add_target_option(p)
    p.add_argument("--limit", type=count, default=15, help="rows shown")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--stored", action="store_true",
                   help="show the profile the last `profile` or `tune` kept, without running "
                        "the benchmark (at once, also while a tune runs)")
    p.set_defaults(func=cmd_profile)


def _add_evidence(sub) -> None:
    p = sub.add_parser("evidence", help="what the compiler did and missed in one unit",
                       description="Optimization remarks (passed and missed, with inline "
                       "cost/threshold and vectorization factors), code size per function, "
                       "and with --function the IR before and after optimization.")
    add_store_option(p)
    p.add_argument("unit", help="a unit's source as `autopass units` shows it")
    p.add_argument("--flags", help="extra flags to compile it with (allowlisted), e.g. --flags='-O3'")
    p.add_argument("--function", help="only this function, with its IR")
    p.add_argument("--limit", type=count, default=8, help="functions shown (hot first with a stored profile, else largest)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_evidence)


def _add_diff(sub) -> None:
    p = sub.add_parser("diff", help="remarks and sizes of one unit under two flag sets")
    add_store_option(p)
    p.add_argument("unit")
    p.add_argument("--a", default="", help="flags of configuration A (default: none); write --a='-O3 ...' when they start with a dash")
    p.add_argument("--b", default="", help="flags of configuration B, e.g. --b='-fno-vectorize'")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_diff)


def _add_pgo(sub) -> None:
    p = sub.add_parser("pgo", help="profile-guided optimization from the recorded build",
                       description="Rebuild the target instrumented (-fprofile-generate, "
                       "from the recorded IR), run the benchmark to train it, merge the "
                       "profile with llvm-profdata into the store, then measure the PGO build "
                       "against the recorded one.")
    add_store_option(p)
    add_config_option(p)
    add_target_option(p)
    p.add_argument("--no-measure", action="store_true", help="only train the profile")
    p.set_defaults(func=cmd_pgo)


def cmd_replay(args: argparse.Namespace) -> int:
    from autopass_build.candidates import fidelity

    store = open_store(args)
    if not args.check:
        raise CliError("say what to do: `autopass replay --check` replays every unit with "
                       "its original flags and compares the objects")
    if not store.units():
        raise CliError("no units recorded yet: run `autopass record -- <build command>`")
    progress = Progress("replaying")
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


@measures("try")
def cmd_try(args: argparse.Namespace) -> int:
    from autopass_build.candidates.evaluate import (
        EvaluateError,
        Evaluator,
        parse_unit_flags,
    )
    from autopass_build.measuring.benchmark import MeasureError

    store = open_store(args)
    config = load_config(args)
    if not args.flags:
        raise CliError("give at least one --flags 'SOURCE=FLAGS', e.g. "
                       "--flags 'lib/lz.c=-O3 -fno-unroll-loops' (see `autopass units`)")
    progress = Progress("try")
    try:
        evaluator = Evaluator(store, config, args.target or "")
        flags_by_unit = parse_unit_flags(args.flags, evaluator.units,
                                         lambda line: progress(f"note: {line}"))
        progress(f"replaying the baseline of {evaluator.target.output_rel}")
        evaluator.baseline()
        evaluation = evaluator.evaluate(flags_by_unit, progress)
    except (EvaluateError, MeasureError) as error:
        progress(None)
        raise CliError(str(error))
    progress(None)
    return print_evaluation(evaluation, config)


def cmd_profile(args: argparse.Namespace) -> int:
    return _stored_profile(args) if args.stored else _profile(args)


def _stored_profile(args: argparse.Namespace) -> int:
    """`profile --stored`: what was kept, shown as `profile` shows it; nothing runs."""
    from autopass_build.evidence.hotspots import load

    store = open_store(args)
    result = load(store.dir)
    if result is None:
        raise CliError(f"no profile kept in {store.dir} yet: run `autopass profile`")
    return _show_profile(args, result, None)


@measures("profile")
def _profile(args: argparse.Namespace) -> int:
    from autopass_build.candidates.evaluate import EvaluateError, Evaluator
    from autopass_build.evidence.hotspots import ProfileError, profile
    from autopass_build.measuring.benchmark import MeasureError

    store = open_store(args)
    config = load_config(args)
    try:
        evaluator = Evaluator(store, config, args.target or "")
        print(f"profiling {evaluator.target.output_rel} ...", file=sys.stderr)
        result = profile(evaluator)
    except (EvaluateError, MeasureError, ProfileError) as error:
        raise CliError(str(error))
    return _show_profile(args, result, (evaluator, config.measure.metric))


def _show_profile(args: argparse.Namespace, result, measured) -> int:
    """The hot functions and units of `result`; `measured` (the evaluator and metric of a
    run just made): where each function's code is and how steady the metrics are."""
    from autopass_build.evidence.hotspots import failing_note, reach_of
    from autopass_build.evidence.symbol_names import readable, shortened

    if args.json:
        from dataclasses import asdict
        json.dump(asdict(result), sys.stdout, indent=1)
        print()
        return 0
    print(f"{result.target} ({result.method}); hot functions:")
    shown = result.functions[:args.limit]
    names = readable([f.symbol for f in shown] + [name for f in shown
                                                   for name in _inlined_to_show(f)])
    reach = reach_of(result, measured[0]) if measured else None
    for f in shown:
        source = f.name[len(f.symbol):]          # " (reverb.c)", kept whole when shortened
        shown_name = shortened(names.get(f.symbol, f.symbol), 48 - len(source)) + source
        print(f"  {f.share:5.1f}%  {shown_name:<32} {reach.where(f) if reach else ''}")
        inlined = _inlined_to_show(f)
        if inlined:    # the helpers whose code it runs (their loops are knobs of their own)
            print("          of which inlined: " + ", ".join(
                f"{shortened(names.get(name, name), 40)} {share:.1f}%"
                for name, share in inlined.items()))
    print("units by share:")
    for unit, share in list(result.unit_shares().items())[:args.limit]:
        print(f"  {share:5.1f}%  {unit}")
    for note in (reach.note() if reach else "", failing_note(result)):
        if note:
            print(note)
    if measured:
        _say_how_steady(measured[0], measured[1], reach.kernel if reach else 0.0)
    return 0


def _inlined_to_show(function) -> dict[str, float]:
    """The functions inlined into a hot one that ran at least 1 % of the run, the three
    largest (the profile keeps them all, HotFunction.inlined)."""
    return dict(sorted(((name, share) for name, share in (function.inlined or {}).items()
                        if share >= 1.0), key=lambda item: -item[1])[:3])


def _say_how_steady(evaluator: Evaluator, configured: str, kernel: float = 0.0) -> None:
    """Each timed metric's run-to-run spread on the recorded build, and the metric to
    measure by where another is clearly steadier than the configured one.  The profile
    is out already: a failure here only leaves this line out."""
    from autopass_build.candidates.evaluate import EvaluateError
    from autopass_build.measuring.benchmark import TIMED_METRICS, MeasureError
    from autopass_build.measuring.steadiness import steadiness

    if configured not in TIMED_METRICS:
        return
    print("measuring the run-to-run spread of wall, cpu and user time ...", file=sys.stderr)
    try:
        base = evaluator.baseline()
        found = steadiness(evaluator.bench, base.binary, base.env)
    except (EvaluateError, MeasureError):
        return
    if found:
        print(found.text())
        advice = found.advice(configured, kernel)
        if advice:
            print(advice)


def _unit_arg(store: Store, spec: str):
    from autopass_build.candidates.evaluate import match_units

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
    from autopass_build.evidence.hotspots import load as load_profile
    from autopass_build.evidence.unit import Evidence

    store = open_store(args)
    unit = _unit_arg(store, args.unit)
    flags = _flags_arg(args.flags)
    evidence = Evidence(store)
    measured = load_profile(store.dir)
    hot = {f.symbol: f.share for f in (measured.functions if measured else [])
           if unit.source_rel in f.units}
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
    from autopass_build.evidence.unit import Evidence

    store = open_store(args)
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


@measures("pgo")
def cmd_pgo(args: argparse.Namespace) -> int:
    from autopass_build.candidates.evaluate import EvaluateError, Evaluator
    from autopass_build.candidates.pgo import PgoError, flags_for, train
    from autopass_build.measuring.benchmark import MeasureError

    store = open_store(args)
    config = load_config(args)
    progress = Progress("pgo")
    try:
        evaluator = Evaluator(store, config, args.target or "")
        profile = train(evaluator, progress)
        progress(None)
        print(f"profile {profile.hash[:16]} from {profile.runs} run(s): {profile.path}")
        if args.no_measure:
            return 0
        progress("measuring the PGO build against the recorded build")
        evaluation = evaluator.evaluate(flags_for(evaluator, profile), progress)
    except (EvaluateError, MeasureError, PgoError) as error:
        progress(None)
        raise CliError(str(error))
    progress(None)
    return print_evaluation(evaluation, config)
