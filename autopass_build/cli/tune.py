"""`autopass tune`, `report`, `screen`: the tuning run, what it did, and what screening learned."""

from __future__ import annotations

import argparse
import os
import sys
from collections import Counter

from autopass_build.cli.common import (
    CliError,
    Progress,
    add_config_option,
    add_metric_option,
    add_store_option,
    key_help,
    load_config,
    measures,
    open_store,
)
from autopass_build.core.names import AGENT_BACKENDS, RUNS_DIR, STAGES, STRATEGY_NAMES


def add_parsers(sub) -> None:
    _add_tune(sub)
    _add_report(sub)
    _add_screen(sub)


def _add_tune(sub) -> None:
    p = sub.add_parser("tune", help="search per-unit flags that make the benchmark faster",
                       description="Tune the compiler flags of the hottest units of the "
                       "target against its benchmark, within a budget of evaluations.",
                       epilog=TUNE_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_store_option(p)
    add_config_option(p)
    p.add_argument("--strategy", choices=STRATEGY_NAMES, help=key_help(
        "tune", "strategy", "the search: agent ([agent].backend plays it, the offline rules "
        "unless configured) or a classical one (--list-strategies)"))
    p.add_argument("--agent-backend", choices=AGENT_BACKENDS,
                   help="override [agent].backend")
    p.add_argument("--budget", type=int, help=key_help("tune", "budget"))
    p.add_argument("--time", metavar="DURATION",
                   help="a time budget, e.g. 45m, 2h, 1h30m ([tune].time): the stages take "
                        "up to half of it, the search stops in time for the steps after it "
                        "(which keep at most two thirds of what is left when it starts); "
                        "alone (without --budget), the time decides, not a count; when it is "
                        "up, a comparison still running is judged on its pairs so far "
                        "(unclear unless they already tell); the check of what ships is not cut")
    p.add_argument("--stage-budget", type=int, metavar="N",
                   help=key_help("tune", "stage_budget"))
    p.add_argument("--seed", type=int,
                   help=key_help("tune", "seed", "random seed; same seed, same candidates"))
    p.add_argument("--option", action="append", default=[], metavar="NAME=VALUE",
                   help="a strategy option, e.g. population=12 (see --list-strategies)")
    add_metric_option(p)
    p.add_argument("--max-units", type=int, help=key_help("tune", "max_units",
                                                          "tune at most this many hot units"))
    p.add_argument("--native", action="store_true", default=None,
                   help="allow -march=native: measured on every unit on top of the chosen "
                        "stages, and per file (the tuned build then runs on this CPU "
                        "family only)")
    p.add_argument("--flags-db", metavar="FILE", help=key_help("tune", "flags_db"))
    p.add_argument("--pgo", action="store_true",
                   help="tune on top of the PGO build (trains a profile if there is none; "
                        "gains are then against PGO alone); the default when [run].train "
                        "is set")
    p.add_argument("--no-pgo", dest="pgo", action="store_false", help="tune without PGO")
    p.add_argument("--stages", metavar="LIST",
                   help="whole-program stages to try first, measured against the recorded "
                        f"build, the best kept as the baseline: any of {','.join(STAGES)} "
                        "(default: [tune].stages, all of them); bolt is tried last, on "
                        "the build the run settled on")
    p.add_argument("--no-stages", dest="stages", action="store_const", const="",
                   help="tune per-file flags on the recorded build only")
    p.set_defaults(pgo=None)
    p.add_argument("--screen", action="store_true", default=None,
                   help="compile each candidate first; measure only those the screening model "
                        "ranks best (learns across programs: see `autopass screen`)")
    p.add_argument("--no-screen", dest="screen", action="store_false",
                   help="measure every candidate (the default unless [tune].screen)")
    p.add_argument("--attribute", action="store_true", default=None,
                   help="also measure each changed unit's own cost (perf samples per unit; "
                        "exact callgrind counts under metric instructions), let the "
                        "strategies judge each unit by it, and compose the units found "
                        "faster into one candidate, verified by the whole-program A/B; off "
                        "on an LTO baseline (default: [tune].attribute)")
    p.add_argument("--no-attribute", dest="attribute", action="store_false",
                   help="whole-program measurements only")
    p.add_argument("--resume", action="store_true",
                   help="continue the latest run where it stopped, with its own settings "
                        "and budget (--budget N raises the budget to N)")
    p.add_argument("--cluster", metavar="ADDRESS",
                   help="measure the search's candidates on the Ray cluster at ADDRESS, "
                        "several at once, each on one node against that node's own "
                        "baseline (pip install 'autopass[cluster]'; docs/cluster.md); "
                        "default: [cluster].address, else this machine alone")
    p.add_argument("--list-strategies", action="store_true",
                   help="print the strategies and their options, then exit")
    p.set_defaults(func=cmd_tune)


def _add_report(sub) -> None:
    p = sub.add_parser("report", help="what a tuning run did: progress, flags, rejections",
                       description="Summarize tuning runs from their journals: what the "
                       "run shipped against the recorded build first, each stage "
                       "composition, the per-file flags written with their measured gains, "
                       "and rejected candidates by outcome. --html writes one "
                       "self-contained file whose figures show the shipped build and each "
                       "composition as bars with their intervals, every measurement by "
                       "phase, and each unit's own effect.")
    add_store_option(p)
    p.add_argument("runs", nargs="*", metavar="RUN",
                   help="run ids (folders of .autopass/runs; default: the latest)")
    p.add_argument("--all", action="store_true", help="every run in the store")
    p.add_argument("--html", metavar="FILE", help="also write an HTML report here")
    p.set_defaults(func=cmd_report)


def _add_screen(sub) -> None:
    p = sub.add_parser("screen", help="what candidate screening has learned, across programs",
                       description="Screening (autopass tune --screen) keeps every measured "
                       "evaluation in the user's cache, per compiler and CPU, and learns from "
                       "them which compiled code is worth running.  show: what it holds; "
                       "reset: forget it (the next tuning run starts from scratch).")
    p.add_argument("action", choices=("show", "reset"))
    p.add_argument("--compiler", default="clang", choices=("clang", "clang++"),
                   help="whose knowledge: the installed one found as this (default: %(default)s)")
    p.set_defaults(func=cmd_screen)


TUNE_EPILOG = """\
examples:
  autopass tune                                   # [tune] settings of autopass.toml
  autopass tune --strategy ga --budget 60 --seed 3 --option population=12
  autopass tune --resume                          # after Ctrl-C, kill -9 or a full disk
  autopass tune --stages lto,thinlto              # which whole-program stages to try
  autopass tune --time 45m                        # as many evaluations as fit in 45 min
  autopass tune --cluster ray://head:10001      # several machines (docs/cluster.md)
  autopass tune --list-strategies

First, compositions of whole-program stages (PGO, full LTO and ThinLTO with lld) are
each measured against the recorded build, within half the budget (--stage-budget) and
half of --time; the best verified one becomes the baseline (a recorded build that is
LTO already is the baseline they start from).  Then per-file flags are searched on top of it: each evaluation
rebuilds the target with the candidate's per-unit flags (only changed units recompile;
objects are cached), checks the benchmark's output against the baseline's, and measures
both interleaved until the ratio's interval is clear.  On an LTO baseline the link
re-optimizes every unit with the link's options, so many flags change nothing (such a
candidate is not measured), and a unit may leave LTO (-fno-lto) to keep its flags.  Every
evaluation is journaled in .autopass/runs/ before it is used.  At the end the best
clearly-faster candidate is split into its units (each measured alone), re-measured with
a tighter interval, and the units that help are written to the flags database.
"""


def _stages(text: str | None) -> tuple[str, ...] | None:
    from autopass_build.candidates import stages

    if text is None:
        return None
    try:
        return tuple(s.value for s in stages.parse(text))
    except ValueError as error:
        raise CliError(f"--stages: {error}") from None


def _time(text: str | None) -> float | None:
    from autopass_build.core.durations import DurationError, parse_duration

    if text is None:
        return None
    try:
        return parse_duration(text)
    except DurationError as error:
        raise CliError(f"--time: {error}") from None


def _check_given(args: argparse.Namespace) -> None:
    """The numbers given on the command line, held to their keys' bounds (the file's
    values were checked when it was read)."""
    from autopass_build.config import ConfigError, check_given

    for option, name in (("--budget", "budget"), ("--max-units", "max_units"),
                         ("--stage-budget", "stage_budget"), ("--seed", "seed")):
        value = getattr(args, name)
        if value is not None:
            try:
                check_given("tune", name, value, option)
            except ConfigError as error:
                raise CliError(str(error)) from None


def _options(pairs: list[str]) -> dict | None:

    if not pairs:
        return None
    options = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        try:
            options[name] = float(value) if "." in value else int(value)
        except ValueError:
            sep = ""
        if not sep:
            raise CliError(f"--option {pair!r}: write NAME=NUMBER, e.g. population=12")
    return options


@measures("tune")
def cmd_tune(args: argparse.Namespace) -> int:
    from autopass_build.store.index import StoreError
    from autopass_build.tuning import strategies as search
    from autopass_build.tuning.journal import JournalError
    from autopass_build.tuning.tuner import UNCOUNTED, TuneError, Tuner, TuneRequest

    if args.list_strategies:
        print(search.describe_all())
        return 0
    stages = _stages(args.stages)
    store = open_store(args)
    config = load_config(args)
    if args.agent_backend or args.cluster is not None:
        from autopass_build.config import with_overrides
        config = with_overrides(config, agent={"backend": args.agent_backend},
                                cluster={"address": args.cluster})
    time_limit = _time(args.time)
    budget = args.budget if args.budget is not None or time_limit is None else UNCOUNTED
    request = TuneRequest.from_config(
        config, strategy=args.strategy, budget=budget, seed=args.seed,
        options=_options(args.option), max_units=args.max_units, native=args.native,
        flags_db=args.flags_db, resume=args.resume, pgo=args.pgo, screen=args.screen,
        attribute=args.attribute, stages=stages, time_limit=time_limit,
        stage_budget=args.stage_budget)
    _check_given(args)
    progress = Progress("tune")
    tuner = Tuner(store, config, request, lambda m: progress(m, transient=m.startswith("  ")))
    try:
        result = tuner.run()
    except (TuneError, JournalError, search.OptionError) as error:
        progress(None)
        raise CliError(str(error))
    except StoreError as error:
        progress(None)
        raise CliError(f"{error}; every finished evaluation is journaled: fix it, then "
                       "`autopass tune --resume`")
    except OSError as error:      # a write of its own that found the disk full
        from autopass_build.core.files import out_of_space

        if not out_of_space(error):
            raise
        progress(None)
        raise CliError(f"the disk is full (writing in {error.filename or store.dir}); every "
                       "finished evaluation is journaled: free space, then "
                       "`autopass tune --resume`") from None
    except KeyboardInterrupt:
        progress(None)
        where = tuner.journal.run_id if tuner.journal else "(none started)"
        print(f"autopass: tuning interrupted; every finished evaluation is in run {where}; "
              "continue with `autopass tune --resume`", file=sys.stderr)
        return 130
    progress(None)
    _print_result(result, tuner.config.measure.metric)
    return 0


def _print_result(result, metric: str) -> None:
    from autopass_build.core.outcome import Outcome
    from autopass_build.core.plural import counted
    from autopass_build.outputs.report import stage_lines, verdict_words, versus_lines
    from autopass_build.tuning.journal import VERSUS_RECORDED, Phase

    journal = result.journal
    print(f"run {journal.run_id}: {counted(result.measured, 'evaluation')} of "
          f"{', '.join(result.sources)} ({metric})")
    screened = len(journal.of_phase(Phase.SCREENED))
    if screened:
        print(f"  screened out before measuring: {screened} (predicted no gain)")
    failed = Counter(str(e.outcome) for e in journal.entries
                     if e.ratio is None and e.outcome != Outcome.SCREENED)
    if failed:
        print("  rejected: " + ", ".join(f"{n} {o}" for o, n in sorted(failed.items())))
    for note in result.notes:
        print("  " + note)
    print("  " + verdict_words(journal.entries))
    for line in stage_lines(journal.entries, journal.baseline) + versus_lines(
            {e.phase: e for e in journal.of_phase(*VERSUS_RECORDED)}):
        print("  " + line)
    baseline = ("PGO alone" if journal.settings.pgo else
                f"the {result.searched_on} build" if result.searched_on else "the recorded build")
    if result.best is None:
        print(f"no candidate was clearly faster than {baseline}; "
              + _shipped_stage(result))
        return
    print(f"  best candidate #{result.best.n}: {result.best.interval_text()} against {baseline}")
    final = result.final
    if final is not None:
        pairs = f", {final.pairs} pairs" if final.measured else ""
        print(f"  final re-measurement: {final.interval_text()}{pairs} -> "
              f"{final.verdict or final.outcome}")
    if not result.winners:
        print("the gain did not hold up in the final measurement; " + _shipped_stage(result))
        return
    mates = result.command_mates
    entries = sum(1 + len(mates.get(w.source, ())) for w in result.winners)
    print(f"wrote {counted(entries, 'entry', 'entries')} to {result.flags_db}"
          + (f", on the stages {result.stages}:" if result.stages else ":"))
    for w in result.winners:
        also = mates.get(w.source, ())
        print(f"  {w.source}: {' '.join(w.flags)}  ({w.entry.ratio:.4f}x)"
              + (f"; the same for {', '.join(also)[:200]}, compiled in its command"
                 if also else ""))


def _shipped_stage(result) -> str:
    """What was written when no per-file flag won: the verified stages, or nothing."""
    if result.flags_db and result.stages:
        return (f"wrote the stages {result.stages} to {result.flags_db} (verified faster "
                "than the recorded build; `autopass apply` builds with them)")
    if result.flags_db:
        return (f"wrote the PGO profile to {result.flags_db} (verified faster than the "
                "recorded build; `autopass apply` builds with it)")
    return "nothing written"


def cmd_report(args: argparse.Namespace) -> int:

    from autopass_build.outputs.report import html_report, summarize, text
    from autopass_build.tuning.journal import Journal, JournalError

    store = open_store(args)
    runs_dir = os.path.join(store.dir, RUNS_DIR)
    try:
        if args.all:
            names = sorted(n for n in os.listdir(runs_dir)
                           if os.path.isdir(os.path.join(runs_dir, n))) \
                if os.path.isdir(runs_dir) else []
            journals = [Journal.open(os.path.join(runs_dir, n)) for n in names]
            if not journals:
                raise JournalError("no tuning run in this store yet; run `autopass tune` first")
        elif args.runs:
            journals = [Journal.open(os.path.join(runs_dir, n)) for n in args.runs]
        else:
            journals = [Journal.latest(store.dir)]
    except (OSError, JournalError) as error:
        raise CliError(f"{error}; runs are listed in {runs_dir}")
    summaries = [summarize(j) for j in journals]
    print("\n\n".join(text(s) for s in summaries))
    if args.html:
        from autopass_build.core.files import disk_full, write_atomic

        try:    # whole or not at all: a full disk leaves no empty report behind
            write_atomic(args.html, html_report(summaries).encode())
        except OSError as error:
            folder = os.path.dirname(os.path.abspath(args.html))
            fix = "free space" if disk_full(folder) else \
                "give --html a file path in a folder that exists"
            raise CliError(f"cannot write {args.html}: {error.strerror}; {fix}") from None
        print(f"wrote {args.html}")
    return 0


def cmd_screen(args: argparse.Namespace) -> int:

    from autopass_build.capture.apply.applier import compiler_id
    from autopass_build.core import toolchain
    from autopass_build.tuning.knowledge import Knowledge, knowledge_path

    found = toolchain.find_tool(args.compiler)
    if found is None:
        raise CliError(toolchain.not_found(args.compiler))
    path = knowledge_path(compiler_id(found))
    if args.action == "reset":
        removed = [p for p in (path, path + ".bad") if os.path.exists(p)]
        for p in removed:
            os.remove(p)
        print(f"forgot {path}" if removed else f"nothing to forget ({path} does not exist)")
        return 0
    knowledge = Knowledge.load(path)
    if knowledge.note:
        print(knowledge.note)
    print(f"{path}: {len(knowledge.samples)} measured evaluations")
    for program, count in sorted(knowledge.programs().items()):
        print(f"  program {program}: {count}")
    return 0
