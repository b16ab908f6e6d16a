"""What every command shares: its error type, finding the store and the config, the
options that name them, the progress line, and printing one evaluation."""

from __future__ import annotations

import argparse
import functools
import os
import sys
import time
from collections.abc import Callable

from autopass_build import config as configuration
from autopass_build.capture.record.spool import find_store_dir
from autopass_build.core.errors import AutopassError
from autopass_build.core.names import CONFIG_NAME, FLAGS_DB_NAME, METRICS, STORE_DIRNAME
from autopass_build.store import busy
from autopass_build.store.index import Store, StoreError


class CliError(AutopassError):
    """A message for the user (one line, naming the thing and the fix): exit status 2."""


def count(text: str) -> int:
    """An argparse type: a whole number of 1 or more (`--limit -1` showed all rows but
    the last, Python's slice)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value}: must be 1 or more")
    return value


def shown_path(path: str) -> str:
    """A path as one line of a listing: a newline, tab or other control character in a
    file name is written as its escape (`a\\nb.c`), not printed raw."""
    return "".join(c if c.isprintable() or ord(c) > 127 else repr(c)[1:-1] for c in path)


def key_help(section: str, name: str, what: str = "") -> str:
    """An option's help for the config key it overrides: the key's own doc (or `what`),
    then where its default comes from, so neither is written twice."""
    from autopass_build.config.starter import default_of, toml_value

    item = configuration.key_of(section, name)
    default = toml_value(default_of(item))
    text = f"{what or item.metadata['doc']} (default: [{section}].{name}, {default})"
    return text.replace("%", "%%")      # argparse formats help with %


def add_store_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--store", metavar="DIR",
                   help=f"the store folder (default: the nearest {STORE_DIRNAME}/ "
                        "from the current folder upwards)")


def add_config_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", metavar="FILE",
                   help=f"{CONFIG_NAME} to use (default: the nearest one upwards)")


def add_target_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--target", help="the binary, as `autopass targets` lists it (default: "
                                    "[run].target, or the only one)")


def add_metric_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--metric", choices=METRICS, help=key_help("measure", "metric"))


def store_dir(args: argparse.Namespace) -> str:
    if args.store:
        return os.path.abspath(args.store)
    return find_store_dir(os.getcwd()) or os.path.abspath(STORE_DIRNAME)


def open_store(args: argparse.Namespace) -> Store:
    try:
        return Store.open_existing(store_dir(args))
    except StoreError as error:
        raise CliError(str(error))


def measures(command: str) -> Callable[[Callable[[argparse.Namespace], int]],
                                      Callable[[argparse.Namespace], int]]:
    """A command that runs and times the benchmark holds its store's measuring lock
    while it runs (`store/busy.py`: two at once spoil each other's measurements)."""
    def decorate(func: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
        @functools.wraps(func)
        def run(args: argparse.Namespace) -> int:
            try:
                with busy.measuring(store_dir(args), command):
                    return func(args)
            except busy.StoreBusy as error:
                raise CliError(str(error))
        return run
    return decorate


def root_of(store: Store) -> str:
    return os.path.dirname(store.dir)


def configured_build(args: argparse.Namespace, verb: str) -> tuple[list[str], str]:
    """`autopass record` or `apply` (`verb`) with no command: [build].command of
    autopass.toml, and the folder it runs in ([build].root)."""
    try:
        config = configuration.load(args.config)
    except configuration.ConfigError as error:
        raise CliError(f"nothing to build, and {error}")
    if not config.build.command:
        raise CliError(f"nothing to build: give the build command after `--`, e.g. "
                       f"`autopass {verb} -- make -j2`, or set [build].command in "
                       f"{configuration.CONFIG_NAME}")
    print(f"autopass: building with [build].command of {config.path}", file=sys.stderr)
    return list(config.build.command), config.resolve(config.build.root)


def flags_db_path(args: argparse.Namespace) -> str:
    """The flags database a command reads: --db, else the one `tune` writes ([tune].flags_db
    of the nearest autopass.toml, relative to its folder), else ./autopass.flags.json.  A
    command run in a subfolder of the project finds the database tune wrote at its top."""
    if args.db:
        return os.path.abspath(args.db)
    try:
        config = configuration.load(getattr(args, "config", None))
    except configuration.ConfigError:     # said by the commands that need the config
        return os.path.abspath(FLAGS_DB_NAME)
    return config.resolve(config.tune.flags_db)


def load_config(args: argparse.Namespace) -> configuration.Config:
    try:
        config = configuration.load(args.config)
        return configuration.with_overrides(
            config, measure={"metric": getattr(args, "metric", None),
                             "max_pairs": getattr(args, "max_pairs", None),
                             "min_pairs": getattr(args, "min_pairs", None)})
    except configuration.ConfigError as error:
        raise CliError(str(error))


class Progress:
    """A one-line progress display on a terminal, plain lines otherwise.

    `progress(message)` shows a step; `progress(message, transient=True)` marks per-file
    steps, thinned out in logs; `progress(None)` clears the line before other output.
    A message starting "note: " is advice the user must be able to read afterwards: a
    whole line that stays, on a terminal too."""

    def __init__(self, label: str):
        self.label = label
        self.tty = sys.stderr.isatty()
        self.shown = False
        self.last = 0.0

    def __call__(self, message: str | None, transient: bool = False) -> None:
        if message is None:
            if self.tty and self.shown:
                sys.stderr.write("\r\033[K")
                sys.stderr.flush()
            return
        if self.tty and message.startswith("note: "):
            sys.stderr.write(f"\r\033[K{self.label}: {message}\n")
            self.shown = False
        elif self.tty:
            sys.stderr.write(f"\r\033[K{self.label}: {message}"[:200])
            self.shown = True
        elif not transient or time.monotonic() - self.last >= 2.0:
            sys.stderr.write(f"{self.label}: {message}\n")
            self.last = time.monotonic()
        sys.stderr.flush()


def print_evaluation(evaluation, config: configuration.Config) -> int:
    comparison = evaluation.comparison
    print(f"outcome: {evaluation.outcome}" + (f" ({evaluation.detail})" if evaluation.detail
                                              else ""))
    if comparison and comparison.estimate:
        est = comparison.estimate
        print(f"{config.measure.metric}: {est.describe_speedup()}, {comparison.runs} runs")
        print(f"verdict: {comparison.verdict.upper() if comparison.verdict else 'UNCLEAR'}")
    return 0
