#!/usr/bin/env python3
"""Build-time cost of autopass's wrapper on a real many-unit project.

Builds Lua 5.4 (Debian sources, its own Makefile, ~33 units) from clean, interleaving
three variants in every round so that machine noise hits them alike:

  plain        make posix CC="clang-19 -std=gnu99"
  passthrough  the wrapper as gcc/cc on PATH, AUTOPASS_MODE=off (exec straight through)
  record       autopass record -- make posix (compile + IR capture + store)
  floor        a 10-line shell script as gcc: the untouched compile, then the same
               arguments with `-Xclang -disable-llvm-passes -emit-llvm -o /dev/null`.
               No wrapper, no store: what any capture-by-second-compile design costs.

and prints, per variant, the median wall time and CPU time (user+sys of the whole
build) and their ratios to plain.  Targets (issue 2): record <= 1.25x, passthrough
<= 1.05x.  Usage: python bench/record_overhead.py [--rounds N] [--jobs J]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import debian_sources  # noqa: E402

from autopass_build.capture.build_env import record_environment  # noqa: E402
from autopass_build.core import toolchain  # noqa: E402
from autopass_build.store.index import Store  # noqa: E402

VARIANTS = ("plain", "passthrough", "record", "floor")
FLOOR_SCRIPT = """#!/bin/sh
"{clang}" "$@" || exit $?
case " $* " in *" -c "*) ;; *) exit 0 ;; esac
skip=0; first=1
for a in "$@"; do
  if [ $first = 1 ]; then set --; first=0; fi
  if [ $skip = 1 ]; then skip=0; continue; fi
  if [ "$a" = -o ]; then skip=1; continue; fi
  set -- "$@" "$a"
done
exec "{clang}" "$@" -w -Xclang -disable-llvm-passes -emit-llvm -o /dev/null
"""


def floor_environment(folder: Path, clang: str, base: dict) -> dict:
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "gcc"
    script.write_text(FLOOR_SCRIPT.format(clang=clang))
    script.chmod(0o755)
    return {**base, "PATH": f"{folder}{os.pathsep}{base.get('PATH', '')}"}



def timed(argv: list[str], cwd: Path, env: dict) -> tuple[float, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    result = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if result.returncode != 0:
        sys.exit(f"build failed: {' '.join(argv)}\n{result.stderr[-3000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (default 3)")
    parser.add_argument("--jobs", type=int, default=2, help="make -j (default 2)")
    args = parser.parse_args()

    program = debian_sources.LUA
    clang = toolchain.find_tool("clang")
    if clang is None:
        sys.exit("clang-19 not found: run scripts/setup.sh")
    work = Path(tempfile.mkdtemp(prefix="autopass-overhead-"))
    tree = debian_sources.fresh_copy(program.package, work / "lua")
    build_dir = tree / program.build_dir
    store_dir = work / "store"  # a fresh one per record round, below
    base_env = dict(os.environ)
    make = [a for a in program.build if not a.startswith("-j")] + [f"-j{args.jobs}"]
    commands = {
        "plain": (make + [f"CC={clang} -std=gnu99"], base_env),
        "passthrough": (make, {**record_environment(str(store_dir), str(tree), base_env),
                               "AUTOPASS_MODE": "off"}),
        "floor": (make, floor_environment(work / "floor-bin", clang, base_env)),
    }
    samples: dict[str, list[tuple[float, float]]] = {v: [] for v in VARIANTS}
    units = 0
    print(f"Lua 5.4 from Debian sources, make -j{args.jobs}, {args.rounds} interleaved rounds",
          file=sys.stderr)
    for round_no in range(args.rounds):
        order = VARIANTS if round_no % 2 == 0 else tuple(reversed(VARIANTS))
        for variant in order:
            subprocess.run(list(program.clean), cwd=build_dir, capture_output=True, check=True)
            if variant == "record":  # a new store each time: first-build cost included
                round_store = work / f"store-{round_no}"
                commands["record"] = (make, record_environment(str(round_store), str(tree),
                                                               base_env))
            argv, env = commands[variant]
            samples[variant].append(timed(argv, build_dir, env))
            if variant == "record":
                units = len(Store.open_existing(str(round_store)).units())
            print(f"  round {round_no + 1} {variant:<12} wall {samples[variant][-1][0]:6.2f}s "
                  f"cpu {samples[variant][-1][1]:6.2f}s", file=sys.stderr)
    plain_wall = statistics.median(w for w, _ in samples["plain"])
    plain_cpu = statistics.median(c for _, c in samples["plain"])
    print(f"\nrecord mode captured {units} units\n")
    print(f"{'variant':<12} {'wall (s)':>9} {'cpu (s)':>9} {'wall ratio':>11} {'cpu ratio':>10}")
    for variant in VARIANTS:
        wall = statistics.median(w for w, _ in samples[variant])
        cpu = statistics.median(c for _, c in samples[variant])
        print(f"{variant:<12} {wall:9.2f} {cpu:9.2f} {wall / plain_wall:10.3f}x "
              f"{cpu / plain_cpu:9.3f}x")
    print("\ntargets: record <= 1.25x, passthrough <= 1.05x (of plain); floor = the cost of "
          "the IR step alone, without any wrapper")
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
