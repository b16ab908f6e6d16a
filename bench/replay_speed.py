#!/usr/bin/env python3
"""Replay speed and fidelity on real programs from Debian sources.

For each program (default: lua5.4, bzip2, libpng1.6), in one run:
  * full clean build: its own build system with plain clang-19, objects removed first
    (configure, where there is one, is not timed);
  * record it, then `replay --check`: the share of units whose object replays from IR
    byte-for-byte (or with identical code and data);
  * a one-unit change: the time to rebuild the benchmarked binary with one unit's flags
    changed (compile that unit from IR, rebuild its archive, relink), after the baseline
    is cached -- for the largest unit (worst case) and a median-sized one.
Target (issue 3): one-unit change <= 0.15 x a full clean build; fidelity >= 95 %.
Usage: python bench/replay_speed.py [PACKAGE ...]
"""

from __future__ import annotations

import os
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

from autopass_build.candidates import fidelity  # noqa: E402
from autopass_build.candidates.replay import Replayer  # noqa: E402
from autopass_build.capture.build_env import record_environment  # noqa: E402
from autopass_build.store.index import Store  # noqa: E402
from autopass_build.store.targets import resolve  # noqa: E402

# A change that costs about what the unit's own compile costs (a candidate with -O3
# -funroll-loops costs more to compile, whoever compiles it).
ONE_UNIT_FLAGS = ("-mllvm",)


def sh(argv, cwd, env=None) -> float:
    start = time.perf_counter()
    result = subprocess.run(list(argv), cwd=cwd, env=env, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"{' '.join(argv)} failed in {cwd}:\n{result.stderr[-2000:]}")
    return time.perf_counter() - start


def measure(program: debian_sources.Program, work: Path) -> dict:
    tree = debian_sources.fresh_copy(program.package, work / program.package)
    build_dir = tree / program.build_dir
    sh(program.plain_build, build_dir)
    clean_builds = []
    for _ in range(2):
        sh(program.soft_clean, build_dir)
        clean_builds.append(sh(program.rebuild, build_dir))
    sh(program.clean, build_dir)
    store_dir = tree / ".autopass"
    env = record_environment(str(store_dir), str(tree))
    sh(program.build, build_dir, env)
    store = Store.open_existing(str(store_dir))
    results = fidelity.check(store)
    checked = [r for r in results if not r.reason.startswith("not checked")]
    reproduced = sum(r.reproduced for r in checked)
    binary = os.path.normpath(build_dir / program.binaries[0])
    target = next(t for t in resolve(store, str(tree)) if t.output == binary)
    units = {u.id: u for u in store.units()}
    sized = sorted((len(store.spool.read_blob("ir", units[i].ir_hash, ".bc")), i)
                   for i in target.runtime_units())
    replayer = Replayer(store)
    replayer.build(binary, {})  # the baseline, cached
    timings = {}
    for label, (_, unit_id) in (("largest", sized[-1]), ("median", sized[len(sized) // 2])):
        runs = []
        for attempt in range(3):
            flags = ONE_UNIT_FLAGS + (f"-unroll-threshold={301 + attempt}",)
            start = time.perf_counter()
            replayer.build(binary, {unit_id: flags})
            runs.append(time.perf_counter() - start)
        timings[label] = (units[unit_id].source_rel, statistics.median(runs))
    return {"program": program.package, "units": len(checked), "reproduced": reproduced,
            "clean_build": statistics.median(clean_builds), "one_unit": timings,
            "target": target.output_rel, "target_units": len(target.runtime_units())}


def main() -> int:
    names = sys.argv[1:] or ["lua5.4", "bzip2", "libpng1.6"]
    unknown = [n for n in names if n not in debian_sources.PROGRAMS]
    if unknown:
        sys.exit(f"unknown program {unknown}; known: {', '.join(debian_sources.PROGRAMS)}")
    work = Path(tempfile.mkdtemp(prefix="autopass-replay-speed-"))
    rows = []
    for name in names:
        print(f"measuring {name} ...", file=sys.stderr)
        rows.append(measure(debian_sources.PROGRAMS[name], work))
    print(f"\n{'program':<11} {'fidelity':>14} {'clean build':>12} "
          f"{'1 unit (largest)':>28} {'1 unit (median)':>28}")
    total_units = total_ok = 0
    for r in rows:
        total_units += r["units"]
        total_ok += r["reproduced"]
        cells = []
        for label in ("largest", "median"):
            source, seconds = r["one_unit"][label]
            cells.append(f"{seconds:5.2f}s {seconds / r['clean_build']:5.3f}x {source[-12:]:>12}")
        print(f"{r['program']:<11} {r['reproduced']:>4}/{r['units']:<4} "
              f"({r['reproduced'] / r['units']:5.1%}) {r['clean_build']:10.2f}s "
              f"{cells[0]:>28} {cells[1]:>28}")
    print(f"\nfidelity over all programs: {total_ok}/{total_units} "
          f"({total_ok / total_units:.1%}) units reproduce from IR (target >= 95 %)")
    print("one-unit change (-mllvm -unroll-threshold=N) vs a full clean build "
          "(target <= 0.15x); benchmarked binaries: "
          + ", ".join(f"{r['program']}:{r['target']} ({r['target_units']} units)" for r in rows))
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
