#!/usr/bin/env python3
"""Does a per-file entry measured on an old source still help the new one?  The policy
question of issue 46, item 2, measured on successive upstream releases.

Tune the first release's per-file flags alone (`autopass tune --no-stages --budget N`:
no PGO or LTO, so that the entries are the whole of the gain), then build each later
release with that database two ways, side by side with its -O3 build:

    stale skipped    `autopass apply` (the default policy, warn: an entry whose source
                     changed is not applied; those of unchanged sources are)
    stale applied    `autopass apply --policy apply-anyway`

and the first release's own tuned build beside its -O3 build (what the entries gave
where they were measured).  Releases, workloads and the measurement are
bench/release_history.py's; with --metric instructions, tune measures instructions
(callgrind) and each variant is one cachegrind run's instruction count against -O3's:
deterministic, so that a gain of 1 % is seen and its share carried to a later release is
a figure, not an interval.

Usage: python bench/entry_policy.py [--programs lua,brotli] [--budget 12] [--rounds 20]
       [--metric cpu|instructions]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import release_history as rh  # noqa: E402


def instructions(program: rh.Program, tree: Path, binaries: dict[str, Path]) -> dict:
    """One cachegrind run of each variant: its instructions against -O3's, as a speedup
    (no interval: the count is deterministic), and whether its output is -O3's."""
    counts, outputs = {}, {}
    for name, binary in binaries.items():
        counts[name], outputs[name] = rh.cachegrind(program, tree, binary, "I refs")
    result: dict = {"-O3 instructions": counts["-O3"]}
    for name in binaries:
        if name != "-O3":
            ratio = counts["-O3"] / counts[name]
            result[name] = {"speedup": ratio, "low": ratio, "high": ratio,
                            "same_output": outputs[name] == outputs["-O3"]}
    return result


def run_program(program: rh.Program, work: Path, budget: int, rounds: int,
                metric: str) -> list[dict]:
    first = program.releases[0]
    bins = work / "bins"
    bins.mkdir(exist_ok=True)
    tree0 = rh.unpack(program, first, work)
    toml = tree0 / "autopass.toml"
    toml.write_text(toml.read_text().replace('metric = "cpu"', f'metric = "{metric}"'))

    def measured(tree: Path, binaries: dict[str, Path]) -> dict:
        return instructions(program, tree, binaries) if metric == "instructions" \
            else rh.measure(program, tree, binaries, rounds)

    rh.sh(["make", "clean"], tree0)
    rh.sh([rh.AUTOPASS, "record", "--", "make", "-j2"], tree0)
    rh.log(f"{program.name} {first.version}: tune --no-stages --budget {budget}")
    rh.sh([rh.AUTOPASS, "tune", "--no-stages", "--budget", str(budget)], tree0)
    database = tree0 / "autopass.flags.json"
    if not database.is_file():
        rh.log(f"{program.name} {first.version}: tune kept no entry: nothing to ask of it")
        return [{"program": program.name, "release": first.version, "entries": 0,
                 "stale": [], "note": "tune kept no per-file entry"}]
    entries = json.loads(database.read_text())["entries"]
    rh.log(f"{program.name} {first.version}: {len(entries)} entries: "
           + "; ".join(f"{k}: {' '.join(v['flags'])}" for k, v in entries.items()))
    rh.plain(program, tree0, bins / f"{program.name}-{first.version}-O3")
    rh.applied(program, tree0, bins / f"{program.name}-{first.version}-tuned")
    rows = [{"program": program.name, "release": first.version, "entries": len(entries),
             "stale": [], "tuned_here": True, **measured(tree0, {
                 "-O3": bins / f"{program.name}-{first.version}-O3",
                 "stale skipped": bins / f"{program.name}-{first.version}-tuned",
                 "stale applied": bins / f"{program.name}-{first.version}-tuned"})}]
    rh.log(report(rows))
    for release in program.releases[1:]:
        tree = rh.unpack(program, release, work)
        name = f"{program.name}-{release.version}"
        rh.plain(program, tree, bins / f"{name}-O3")
        rh.ship(tree0, tree)
        _, said = rh.applied(program, tree, bins / f"{name}-skipped")
        rh.applied(program, tree, bins / f"{name}-applied", "--policy", "apply-anyway")
        stale = [k for k in entries if not same_source(tree0, tree, k)]
        rh.log(f"{name}: measuring ({len(stale)} of {len(entries)} entries' sources changed)")
        found = measured(tree, {"-O3": bins / f"{name}-O3",
                                "stale skipped": bins / f"{name}-skipped",
                                "stale applied": bins / f"{name}-applied"})
        rows.append({"program": program.name, "release": release.version,
                     "entries": len(entries), "stale": stale, "apply_said": said, **found})
        rh.log(report([rows[-1]]))
    return rows


def same_source(old: Path, new: Path, source: str) -> bool:
    return (old / source).read_bytes() == (new / source).read_bytes() \
        if (new / source).is_file() else False


def report(rows: list[dict]) -> str:
    lines = []
    for row in rows:
        if "note" in row:
            lines.append(f"{row['program']} {row['release']}: {row['note']}")
            continue
        if row.get("tuned_here"):
            r = row["stale applied"]
            lines.append(f"{row['program']} {row['release']} (tuned here): its "
                         f"{row['entries']} entries {r['speedup']:.3f}x [{r['low']:.3f}, "
                         f"{r['high']:.3f}] over -O3")
            continue
        cells = [f"{name} {row[name]['speedup']:.3f}x [{row[name]['low']:.3f}, "
                 f"{row[name]['high']:.3f}]" for name in ("stale skipped", "stale applied")]
        lines.append(f"{row['program']} {row['release']}: {len(row['stale'])} of "
                     f"{row['entries']} entries stale; " + "; ".join(cells))
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     epilog=__doc__.split("\n\n", 1)[1],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--programs", default="lua,brotli")
    parser.add_argument("--budget", type=int, default=12)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--out", default="entry-policy-out")
    parser.add_argument("--metric", choices=("cpu", "instructions"), default="cpu")
    args = parser.parse_args()
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    rows: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="autopass-entries-") as scratch:
        for name in args.programs.split(","):
            rows += run_program(rh.PROGRAMS[name], Path(scratch), args.budget, args.rounds,
                                args.metric)
            (out / "entry_policy.json").write_text(json.dumps(rows, indent=1))
    print(report(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
