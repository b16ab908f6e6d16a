"""The `autopass` command: one parser over the command groups, each a module here."""

from __future__ import annotations

import argparse
import os
import signal
import sys

from autopass_build import __version__
from autopass_build.cli import apply, captured, db, inspect, record, setup, tune
from autopass_build.core import toolchain
from autopass_build.core.errors import AutopassError

GROUPS = (record, captured, setup, inspect, tune, apply, db)   # the order of `autopass --help`

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
  autopass tune                         stages (PGO, LTO) first, then per-file flags
  autopass report --html report.html    what the tuning run did, with its progress plot
  autopass apply -- make -j2            a build with each file's tuned flags
  autopass verify                       two clean tuned builds identical? speedup vs plain
""".format(v=toolchain.DEFAULT_LLVM_VERSION)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="autopass", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Make a whole C/C++ application faster without touching its source: "
                    "record its build, tune whole-program stages (PGO, LTO) and per-file compiler "
                    "flags against your benchmark, apply them.",
        epilog=EPILOG)
    parser.add_argument("--version", action="version", version=f"autopass {__version__}")
    sub = parser.add_subparsers(dest="subcommand", metavar="COMMAND")

    for group in GROUPS:
        group.add_parsers(sub)
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
    except AutopassError as error:     # every error a command reports: one line
        print(f"autopass: error: {error}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `autopass units | head`: the reader left, not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except OSError as error:   # after BrokenPipeError, one of its kind
        from autopass_build.core.files import out_of_space

        if not out_of_space(error):
            raise
        where = f" (writing {error.filename})" if error.filename else ""
        print(f"autopass: error: the disk is full{where}: free space, then run the "
              "command again", file=sys.stderr)
        return 2
