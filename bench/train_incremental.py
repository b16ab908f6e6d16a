#!/usr/bin/env python3
"""`apply --train` made incremental (issue 46, item 1): what its builds' cache (ccache in
autopass's folder, capture/apply/train_cache.py) saves on a large application.

7-Zip 26.01 from Debian's source (311 C and C++ units, its own makefiles, -O2), with a
database that ships PGO for its `7zz` (written here as tune ships one for the PGO stage:
`--train` retrains the profile, so no tuning run is needed to time it), its training run
the xz compression of 8 MB of text on one thread.  In one copy of the source:

    plain     make clean && make                             the build as it is
    no cache  the same with AUTOPASS_TRAIN_CACHE=off          what --train cost before
    cold      make clean && autopass apply --train -- make   an empty cache folder
    again     the same again                                  the same source
    edited    the same after a change to one source           one unit changed

Reported for each: the build's wall time, the instrumented build's and the final build's
(from --train's own summary), the compiles that came from the cache, and --train's cost
against the plain build with the training runs taken out (issue 46's 2.5x).  The rounds
interleave the variants, each round in a fresh order; the medians are printed.

Usage: python bench/train_incremental.py [--rounds 2]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))
import debian_sources  # noqa: E402
from tune_classical import text_input  # noqa: E402

from autopass_build.core import flags_db  # noqa: E402

AUTOPASS = str(Path(sys.executable).parent / "autopass")
PROGRAM = debian_sources.SEVENZIP
EDITED = "C/LzFind.c"           # the one source the "edited" variant changes
SUMMARY = re.compile(r"build \(instrument\) ([\d.]+) s, training ([\d.]+) s, "
                     r"build \(final\) ([\d.]+) s")
CACHED = re.compile(r"compiles from the cache: instrumented (\d+) of (\d+), final (\d+) of")


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def prepare(tree: Path, work: Path) -> None:
    """A database shipping PGO for 7zz, and autopass.toml's benchmark (the training run)."""
    db = flags_db.empty()
    db.target = flags_db.TargetStages(PROGRAM.binaries[0], ("pgo",), "-O2", ())
    db.profile = flags_db.ProfileRef("autopass.profdata", "0" * 40)   # not shipped
    db.toolchain = {"compiler": "", "target": ""}
    flags_db.save(str(tree / "autopass.flags.json"), db)
    corpus = text_input(work / "7z.txt", 8)
    command = ["{exe}", "a", "-an", "-txz", "-mx5", "-mmt1", "-so", str(corpus)]
    (tree / "autopass.toml").write_text(f"[run]\ncommand = {json.dumps(command)}\n"
                                        "timeout = 120\n")


def timed(argv: list[str], tree: Path, env: dict[str, str] | None = None) -> tuple[float, str]:
    subprocess.run(list(PROGRAM.clean), cwd=tree, check=True)
    started = time.perf_counter()
    done = subprocess.run(argv, cwd=tree, capture_output=True, text=True, env=env)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit(f"{' '.join(argv)} failed:\n{done.stderr[-3000:]}")
    return seconds, done.stderr


def train(tree: Path, cache: Path | None) -> dict[str, float]:
    env = {**os.environ, "AUTOPASS_TRAIN_CACHE": str(cache) if cache else "off"}
    seconds, said = timed([AUTOPASS, "apply", "--train", "--", *PROGRAM.build], tree, env)
    summary = [line for line in said.splitlines() if "retrained" in line]
    found = SUMMARY.search(said)
    if not summary or found is None:
        sys.exit(f"--train said no summary:\n{said[-3000:]}")
    cached = CACHED.search(said)
    return {"wall": seconds, "instrument": float(found.group(1)),
            "training": float(found.group(2)), "final": float(found.group(3)),
            "from_cache": int(cached.group(1)) if cached else 0,
            "compiles": int(cached.group(2)) if cached else 0,
            "final_from_cache": int(cached.group(3)) if cached else 0}


def edit(tree: Path, round_no: int) -> None:
    """A change to one source's code (a function the program never calls)."""
    with open(tree / EDITED, "a") as source:
        source.write(f"\nint autopass_bench_edit_{round_no}(void) {{ return {round_no}; }}\n")


def one_round(tree: Path, work: Path, round_no: int) -> dict[str, dict[str, float]]:
    """plain, and the three --train builds in order (each needs the one before)."""
    cache = work / f"cache-{round_no}"
    shutil.rmtree(cache, ignore_errors=True)
    found: dict[str, dict[str, float]] = {}
    trains = ["no cache", "cold", "again", "edited"]
    order = ["plain", "trains"]
    random.shuffle(order)
    for step in order:
        if step == "plain":
            found["plain"] = {"wall": timed(list(PROGRAM.plain_build), tree)[0]}
            log(f"round {round_no}: plain {found['plain']['wall']:.1f} s")
            continue
        for name in trains:
            if name == "edited":
                edit(tree, round_no)
            found[name] = train(tree, None if name == "no cache" else cache)
            log(f"round {round_no}: {name} {found[name]['wall']:.1f} s "
                f"(instrument {found[name]['instrument']:.1f} s, "
                f"{found[name]['from_cache']} of {found[name]['compiles']} from the cache; "
                f"final {found[name]['final_from_cache']})")
    return found


def report(rounds: list[dict[str, dict[str, float]]]) -> str:
    def median(variant: str, key: str) -> float:
        return statistics.median(r[variant][key] for r in rounds)

    plain = median("plain", "wall")
    lines = [f"7-Zip, {len(rounds)} rounds, medians; the plain build {plain:.1f} s",
             "| --train | wall | instrumented build | final build | from the cache "
             "(instrumented, final) | cost over plain, training taken out |",
             "|---|---|---|---|---|---|"]
    for name in ("no cache", "cold", "again", "edited"):
        wall, training = median(name, "wall"), median(name, "training")
        hits = (f"{median(name, 'from_cache'):.0f}, {median(name, 'final_from_cache'):.0f} "
                f"of {median(name, 'compiles'):.0f}")
        lines.append(f"| {name} | {wall:.1f} s | {median(name, 'instrument'):.1f} s | "
                     f"{median(name, 'final'):.1f} s | {hits} | "
                     f"{(wall - training) / plain:.2f}x |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     epilog=__doc__.split("\n\n", 1)[1],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    if shutil.which("ccache") is None:
        sys.exit("ccache is not installed: bash scripts/setup.sh installs it")
    with tempfile.TemporaryDirectory(prefix="autopass-train-incremental-") as scratch:
        work = Path(scratch)
        tree = debian_sources.fresh_copy(PROGRAM.package, work / "7zip")
        prepare(tree, work)
        rounds = [one_round(tree, work, n) for n in range(1, args.rounds + 1)]
    print(report(rounds))
    return 0


if __name__ == "__main__":
    sys.exit(main())
