#!/usr/bin/env python3
"""How much of BOLT's effect a stale profile keeps (issue 46, item 2): a BOLT profile
trained on a program's first release lays out each later release by llvm-bolt's
stale-profile inference (the YAML profile autopass ships beside the database), against
a profile trained afresh on that release.

BOLT is given here, not chosen: every database is written for the BOLT stage alone and
its profile trained by `autopass apply --train` (on this machine tune does not verify
BOLT over -O3 for these programs: SQLite 3.43.2, "not verified faster" in 4 and in 12
minutes), so this measures what the stale profile keeps of BOLT's effect, not whether
BOLT should ship.  For each later release, side by side:

    -O3          the release's plain build (our Makefile, clang 19)
    (a) stale    `autopass apply` with the first release's database and profiles: the
                 program's code changed, so apply lays it out by stale-profile inference
    (b) fresh    `autopass apply --train`: BOLT trained on this release's own program

Measured two ways: CPU time, interleaved rounds (each variant once per round in a
shuffled order; 95 % intervals, autopass's statistics), and cachegrind's simulated
first-level instruction cache misses of one run (deterministic: the layout is what
BOLT changes, and this machine has no hardware counters).  The kept share is
log(a) / log(b) on the speedups and (O3 - a) / (O3 - b) on the misses.  Also reported:
llvm-bolt's own stale-matching report for (a), as `autopass db status` gives it.

Releases, Makefiles and workloads are bench/release_history.py's.

Usage: python bench/stale_bolt.py [--programs sqlite,brotli] [--rounds 40]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))
import release_history as rh  # noqa: E402

from autopass_build.core import flags_db  # noqa: E402

SHIPPED_BOLT, SHIPPED_YAML = "autopass.fdata", "autopass.bolt.yaml"


def bolt_database(program: rh.Program, tree: Path) -> None:
    """A database that ships the BOLT stage for the program, as tune writes one, but
    its profile not there (`apply --train` trains one, and says the shipped one is
    missing)."""
    db = flags_db.empty()
    db.target = flags_db.TargetStages(program.binary, ("bolt",), "-O3", (),
                                      bolt=flags_db.ProfileRef(SHIPPED_BOLT, "0" * 40),
                                      bolt_binary="0" * 40)
    db.toolchain = {"compiler": "", "target": ""}
    flags_db.save(str(tree / "autopass.flags.json"), db)


def ship_trained(source: Path, tree: Path) -> None:
    """`source`'s trained database and BOLT profiles, under the names tune ships them,
    as autopass.flags.json beside `tree`'s sources."""
    trained = flags_db.load(str(source / "autopass.trained.flags.json"))
    target = trained.target
    assert target is not None and target.bolt is not None and target.bolt_stale is not None
    shutil.copyfile(source / target.bolt.path, tree / SHIPPED_BOLT)
    shutil.copyfile(source / target.bolt_stale.path, tree / SHIPPED_YAML)
    shipped = trained.replace(target=target.replace(
        bolt=flags_db.ProfileRef(SHIPPED_BOLT, target.bolt.hash),
        bolt_stale=flags_db.ProfileRef(SHIPPED_YAML, target.bolt_stale.hash)))
    flags_db.save(str(tree / "autopass.flags.json"), shipped)
    for name in tree.glob("autopass.trained.*"):
        name.unlink()


def bolt_match(tree: Path, binary: Path) -> str:
    """db status's last BOLT line for today's program built without BOLT (`binary`):
    what llvm-bolt's stale matching says."""
    done = subprocess.run([rh.AUTOPASS, "db", "status", "--binary", str(binary)], cwd=tree,
                          capture_output=True, text=True)
    lines = [line.strip() for line in done.stdout.splitlines()
             if line.strip().startswith("BOLT")]
    return lines[-1] if lines else (done.stdout + done.stderr).strip()[-300:]


def run_program(program: rh.Program, work: Path, rounds: int) -> list[dict]:
    bins = work / "bins"
    bins.mkdir(exist_ok=True)
    first = program.releases[0]
    tree0 = rh.unpack(program, first, work)
    bolt_database(program, tree0)
    rh.log(f"{program.name} {first.version}: BOLT trained by apply --train")
    o3 = bins / f"{program.name}-{first.version}-O3"
    rh.plain(program, tree0, o3)
    _, said = rh.applied(program, tree0, bins / f"{program.name}-{first.version}-bolt", "--train")
    if "BOLT retrained" not in said:
        raise SystemExit(f"{program.name} {first.version}: BOLT was not trained: {said}")
    rows = []
    for release in program.releases[1:]:
        name = f"{program.name}-{release.version}"
        tree = rh.unpack(program, release, work)
        rh.plain(program, tree, bins / f"{name}-O3")
        ship_trained(tree0, tree)
        _, said_a = rh.applied(program, tree, bins / f"{name}-a")
        rh.log(f"{name}: (a) said {said_a[-300:]}")
        matched = bolt_match(tree, bins / f"{name}-O3")
        rh.log(f"{name}: {matched}")
        _, said_b = rh.applied(program, tree, bins / f"{name}-b", "--train")
        rh.log(f"{name}: (b) said {said_b[-300:]}; measuring")
        variants = {"-O3": bins / f"{name}-O3", "(a) stale": bins / f"{name}-a",
                    "(b) fresh": bins / f"{name}-b"}
        found = rh.measure(program, tree, variants, rounds)
        misses = {v: rh.cachegrind(program, tree, path, "I1 misses", cache_sim=True)[0]
                  for v, path in variants.items()}
        rows.append({"program": program.name, "release": release.version,
                     "trained_on": first.version, "apply_said": said_a, "bolt_match": matched,
                     "train_said": said_b, "i1_misses": misses, **found})
        rh.log(report([rows[-1]]))
    return rows


def report(rows: list[dict]) -> str:
    lines = ["| release (profile of) | (a) stale | (b) fresh | kept, time | I1 misses "
             "-O3 / (a) / (b) | kept, misses | llvm-bolt's stale matching |",
             "|---|---|---|---|---|---|---|"]
    for row in rows:
        a, b = row["(a) stale"], row["(b) fresh"]
        share = rh.kept(a["speedup"], b["speedup"])
        misses = row["i1_misses"]
        saved = misses["-O3"] - misses["(b) fresh"]
        kept_misses = (misses["-O3"] - misses["(a) stale"]) / saved if saved > 0 else None
        cells = [f"{row['program']} {row['release']} ({row['trained_on']})"]
        for r in (a, b):
            flag = "" if r["same_output"] else " OUTPUT DIFFERS"
            cells.append(f"{r['speedup']:.3f}x [{r['low']:.3f}, {r['high']:.3f}]{flag}")
        cells.append(f"{share:.0%}" if share is not None else "n/a ((b) no gain)")
        cells.append(" / ".join(f"{misses[v]:,}" for v in ("-O3", "(a) stale", "(b) fresh")))
        cells.append(f"{kept_misses:.0%}" if kept_misses is not None else "n/a")
        cells.append(row["bolt_match"])
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     epilog=__doc__.split("\n\n", 1)[1],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--programs", default="sqlite")
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--out", default="stale-bolt-out")
    args = parser.parse_args()
    for tool in ("valgrind",):
        if shutil.which(tool) is None:
            sys.exit(f"{tool} is not installed: bash scripts/setup.sh --test installs it")
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    rows: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="autopass-stale-bolt-") as scratch:
        for name in args.programs.split(","):
            rows += run_program(rh.PROGRAMS[name], Path(scratch), args.rounds)
            (out / "stale_bolt.json").write_text(json.dumps(rows, indent=1))
    print(report(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
