"""The command reference (docs/commands.md), generated from the parser itself: every
command's usage, description and options as `autopass COMMAND --help` prints them."""

from __future__ import annotations

import argparse
import os

WIDTH = "88"   # argparse wraps to $COLUMNS: fixed, so the page is the same everywhere


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:   # argparse keeps its subparsers only here
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def commands_markdown(parser: argparse.ArgumentParser) -> str:
    before = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = WIDTH
    try:
        out = ["# Command reference", "",
               "Generated from the command-line parser by `python scripts/docs.py`; the "
               "same text as `autopass COMMAND --help`. A test fails when this page and "
               "the parser differ.", "", "```text", parser.format_help().rstrip(), "```"]
        for name, sub in _subcommands(parser).items():
            out += ["", f"## autopass {name}", "", "```text", sub.format_help().rstrip(),
                    "```"]
            for inner, nested in _subcommands(sub).items():
                out += ["", f"### autopass {name} {inner}", "", "```text",
                        nested.format_help().rstrip(), "```"]
        return "\n".join(out) + "\n"
    finally:
        if before is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = before
