"""`autopass units` and `targets`: what a recording holds, and why something is missing."""

from __future__ import annotations

import argparse
import json
import os
import sys

from autopass_build.capture.record.skip_fixes import fixes
from autopass_build.cli.common import (
    add_store_option,
    open_store,
    root_of,
    shown_path,
)
from autopass_build.core.plural import counted
from autopass_build.store.build_records import UnitRecord
from autopass_build.store.index import Store
from autopass_build.store.targets import probes, resolve


def add_parsers(sub) -> None:
    p = sub.add_parser("units", help="list captured units and skipped commands with reasons")
    add_store_option(p)
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_units)

    p = sub.add_parser("targets", help="list linked binaries and the units each is made of")
    add_store_option(p)
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_targets)


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
        lines.append(f"{counted(len(twins), 'unit')} "
                     f"{'compiles' if len(twins) == 1 else 'compile'} a source again whose "
                     "other compile is "
                     "linked (libtool's static-library objects beside its shared "
                     "library's, for one): only the linked compile is tuned")
    if other:
        lines.append(f"{counted(len(other), 'unit')} {'is' if len(other) == 1 else 'are'} "
                     f"in no recorded link ({', '.join(other[:5])}"
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
        print(f"left out: {counted(len(probe_units), 'unit')} whose source and object were "
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
        print(f"{t.output_rel} ({t.kind}): {counted(len(t.units), 'unit')}")
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
