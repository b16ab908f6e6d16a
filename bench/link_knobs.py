#!/usr/bin/env python3
"""What the link-level knobs (issue 60, item 4) give on top of PGO + LTO, each side by
side with the build without it, in one run.

For each program (default: Lua 5.4 and zstd from Debian sources, and the dozen numeric
loop kernels of bench/workloads/kernels): `autopass record` through its own build,
`autopass tune` with [tune].stages = pgo, lto and the three knobs (exttsp, inline,
bandwidth; no per-file search to speak of), `autopass apply` through the same build.
Tune measures each knob on top of the build so far against that build without it, in
interleaved pairs (twice the usual, confirmed with fresh pairs when it looks faster):
those A/Bs are the figures, read from tune's journal.  With --metric instructions the
same under callgrind.

Usage: python bench/link_knobs.py [--programs lua5.4,libzstd,kernels]
           [--metric wall|instructions] [--lto lto|thinlto] [--out link-knobs-out]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))
import hand_recipe as hr  # noqa: E402

from autopass_build.candidates.stages import LINK_KNOBS  # noqa: E402
from autopass_build.tuning.journal import Journal, Phase  # noqa: E402


def tune_keys(lto: str) -> str:
    """[tune] for PGO with `lto` and the knobs: the stages (one composition: a measurement
    and its confirmation), each knob (two), and one per-file candidate (the search's
    floor)."""
    stages = ["pgo", lto, *(str(k) for k in LINK_KNOBS)]
    return (f"stages = {json.dumps(stages)}\nstrategy = \"random\"\nstage_budget = 2\n"
            f"budget = {2 + 2 * len(LINK_KNOBS) + 1}\n")


def knob_looks(build_dir: Path) -> list[dict]:
    """Each knob's A/B from tune's journal: the last look at each (the confirmation when
    there was one)."""
    last: dict[str, dict] = {}
    for entry in Journal.latest(str(build_dir / ".autopass")).entries:
        if entry.phase not in (Phase.STAGE, Phase.STAGE_CONFIRM) or not entry.stages:
            continue
        step = entry.composition[-1]
        if step in LINK_KNOBS:
            last[str(step)] = {"knob": str(step), "on": entry.stages, "phase": entry.phase.value,
                               "interval": entry.interval_text(), "verdict": str(entry.verdict),
                               "pairs": entry.pairs}
    return list(last.values())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--programs", default="lua5.4,libzstd,kernels")
    parser.add_argument("--metric", default="wall", choices=("wall", "instructions"))
    parser.add_argument("--lto", default="lto", choices=("lto", "thinlto"),
                        help="the LTO stage under PGO the knobs go on top of")
    parser.add_argument("--out", default="link-knobs-out")
    args = parser.parse_args()
    work = Path(args.out).resolve()
    work.mkdir(parents=True, exist_ok=True)
    results = []
    for name in args.programs.split(","):
        started = time.monotonic()
        metric = f"[measure]\nmetric = \"{args.metric}\"\n" if args.metric != "wall" else ""
        _, tuned = hr.autopass(name, work, "", label=f"{name}-knobs-{args.lto}-{args.metric}",
                               tune_keys=tune_keys(args.lto), extra=metric)
        looks = knob_looks(Path(tuned["build_dir"]))
        results.append({"program": name, "chose": tuned["chose"], "looks": looks,
                        "minutes": round((time.monotonic() - started) / 60, 1)})
        for look in looks:
            hr.log(f"{name}: {look['knob']} on {look['on'].rsplit('+', 1)[0]}: "
                   f"{look['interval']} ({look['phase']}, {look['pairs']} pairs) -> "
                   f"{look['verdict']}")
        hr.log(f"{name}: tune chose {tuned['chose']} "
               f"({results[-1]['minutes']} min for record, tune and apply)")
    (work / f"link-knobs-{args.lto}-{args.metric}.json").write_text(json.dumps(results, indent=1))
    print("\n| program | knob | on | over the build without it | verdict |")
    print("|---|---|---|---|---|")
    for result in results:
        for look in result["looks"]:
            print(f"| {result['program']} | {look['knob']} | {look['on'].rsplit('+', 1)[0]} | "
                  f"{look['interval']} | {look['verdict']} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
