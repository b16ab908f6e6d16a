#!/usr/bin/env python3
"""Apply mode on a real many-unit project: build-time cost, and the speedup users get.

(1) Build cost: Lua 5.4 (Debian sources, its own Makefile, 34 units) from clean,
    interleaving in every round
        plain   make posix CC="clang-19 -std=gnu99"
        apply   autopass apply -- make posix, with a flags database holding an entry for
                every unit (flags equal to the Makefile's own -O2, so the code is the same
                and only autopass's work is measured: lookup, hash, allowlist, append)
    and prints median wall and CPU time (the server's included) and the ratio (target
    <= 1.05x).
(2) With --tune-budget N: record Lua, tune it (the rules agent, N evaluations, cpu
    metric, bench/workloads/lua_mix.lua), then `autopass verify` through its Makefile:
    two clean tuned builds bit-identical?  Speedup of the tuned build over the plain
    one, with its interval.

Usage: python bench/apply_overhead.py [--rounds 3] [--jobs 2] [--tune-budget 0]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))
import debian_sources  # noqa: E402
from record_overhead import timed  # noqa: E402

from autopass_build import config as cfg  # noqa: E402
from autopass_build.capture.apply.applier import compiler_id  # noqa: E402
from autopass_build.capture.apply.tally import TALLY_NAME
from autopass_build.capture.build_env import apply_environment, record_environment
from autopass_build.capture.server import serving  # noqa: E402
from autopass_build.core import toolchain  # noqa: E402
from autopass_build.core.apply_terms import ApplyPolicy
from autopass_build.core.files import hash_file  # noqa: E402
from autopass_build.store.index import Store  # noqa: E402

LUA = debian_sources.LUA


def database_for_every_unit(tree: Path, clang: str) -> Path:
    return database_of(tree, sorted((tree / "src").glob("*.c")), "-O2", clang,
                       tree / "overhead.flags.json")


def database_of(tree: Path, sources: list[Path], opt: str, clang: str, path: Path) -> Path:
    """A flags database at `path` with an entry of `opt` (the build's own -O level: the
    same code) for each of `sources`: what apply then costs is autopass's work alone."""
    entries = {str(p.relative_to(tree)): {
        "flags": [opt], "source_hash": hash_file(str(p)), "why": "overhead benchmark",
        "gain": {"metric": "cpu", "ratio": 1.0, "low": 1.0, "high": 1.0, "pairs": 0}}
        for p in sources}
    path.write_text(json.dumps({"schema": 1, "cpu": None, "entries": entries,
                                "toolchain": {"compiler": compiler_id(clang), "target": ""}},
                               indent=2, sort_keys=True))
    return path


def build_cost(tree: Path, clang: str, rounds: int, jobs: int, work: Path) -> None:
    build_dir = tree / LUA.build_dir
    make = [a for a in LUA.build if not a.startswith("-j")] + [f"-j{jobs}"]
    db = database_for_every_unit(tree, clang)
    variants = {"plain": (make + [f"CC={clang} -std=gnu99"], dict(os.environ)),
                "apply": (make, apply_environment(str(tree), str(db), ApplyPolicy.ERROR,
                                                  str(work / "apply-bin")))}
    samples: dict[str, list[tuple[float, float]]] = {v: [] for v in variants}
    for round_no in range(rounds):
        order = list(variants) if round_no % 2 == 0 else list(reversed(variants))
        for name in order:
            subprocess.run(list(LUA.clean), cwd=build_dir, capture_output=True, check=True)
            argv, env = variants[name]
            own = os.times()
            with serving(env) if name == "apply" else contextlib.nullcontext():
                wall, cpu = timed(argv, build_dir, env)
            served = os.times()     # the server's threads run in this process
            cpu += (served.user - own.user) + (served.system - own.system)
            samples[name].append((wall, cpu))
            if name == "apply":
                tally = work / "apply-bin" / TALLY_NAME
                applied = tally.read_text().count("\n") if tally.exists() else 0
                tally.unlink(missing_ok=True)
                if applied < len(json.loads(db.read_text())["entries"]):
                    sys.exit(f"only {applied} commands took the tuned flags")
            print(f"  round {round_no + 1} {name:<6} wall {samples[name][-1][0]:6.2f}s "
                  f"cpu {samples[name][-1][1]:6.2f}s", file=sys.stderr)
    print(f"\nLua 5.4, make -j{jobs}, {rounds} interleaved rounds, "
          f"{len(json.loads(db.read_text())['entries'])} database entries applied")
    print_ratios(samples, 8)
    print("target: apply <= 1.05x of plain")


def print_ratios(samples: dict[str, list[tuple[float, float]]], width: int) -> None:
    """Each variant's median wall and CPU time, and its ratio to the "plain" one's."""
    plain_wall = statistics.median(w for w, _ in samples["plain"])
    plain_cpu = statistics.median(c for _, c in samples["plain"])
    print(f"{'variant':<{width}} {'wall (s)':>9} {'cpu (s)':>9} {'wall ratio':>11} "
          f"{'cpu ratio':>10}")
    for name, values in samples.items():
        wall = statistics.median(w for w, _ in values)
        cpu = statistics.median(c for _, c in values)
        print(f"{name:<{width}} {wall:9.2f} {cpu:9.2f} {wall / plain_wall:10.3f}x "
              f"{cpu / plain_cpu:9.3f}x")


def tuned_and_verified(tree: Path, budget: int) -> None:
    from autopass_build.candidates.evaluate import Evaluator, choose_target
    from autopass_build.evidence.hotspots import profile
    from autopass_build.outputs.verify import verify
    from autopass_build.tuning.tuner import Tuner, TuneRequest

    build_dir = tree / LUA.build_dir
    subprocess.run(list(LUA.clean), cwd=build_dir, capture_output=True, check=True)
    store_dir = tree / ".autopass"
    subprocess.run(list(LUA.build), cwd=build_dir, check=True, capture_output=True,
                   env=record_environment(str(store_dir), str(tree)))
    config = cfg.parse(
        f'[build]\ncommand = "make posix -j2"\nclean = "make clean"\nroot = "src"\n'
        f'[run]\ncommand = ["{{exe}}", "{HERE / "workloads" / "lua_mix.lua"}"]\n'
        f'target = "src/lua"\n[measure]\nmetric = "cpu"\nmax_pairs = 30\n',
        project_dir=str(tree))
    store = Store.open_existing(str(store_dir))
    profile(Evaluator(store, config))
    db = tree / "autopass.flags.json"
    result = Tuner(store, config, TuneRequest(strategy="agent", budget=budget, stages=(),
                                              flags_db=str(db)),
                   lambda m: None if m.startswith("  ") else print(f"  tune: {m}",
                                                                  file=sys.stderr)).run()
    print(f"\ntuned Lua with the rules agent, {result.measured} evaluations: "
          + (", ".join(f"{w.source}: {' '.join(w.flags)}" for w in result.winners)
             or "no clear gain (the database is empty)"))
    target = choose_target(store, "src/lua").output
    verified = verify(config, target, str(db), str(tree),
                      lambda m: print(f"  verify: {m}", file=sys.stderr))
    e = verified.comparison.estimate if verified.comparison else None
    print(f"verify: two clean tuned builds {'bit-identical' if verified.identical else 'DIFFER'}"
          + (f"; tuned vs plain {e.describe_speedup()}, "
             f"{verified.comparison.verdict or 'unclear'}" if e else ""))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--tune-budget", type=int, default=0,
                        help="also tune Lua with this many evaluations and verify it")
    args = parser.parse_args()
    clang = toolchain.find_tool("clang")
    if clang is None:
        sys.exit("clang-19 not found: run scripts/setup.sh")
    work = Path(tempfile.mkdtemp(prefix="autopass-apply-overhead-"))
    try:
        tree = debian_sources.fresh_copy(LUA.package, work / "lua")
        build_cost(tree, clang, args.rounds, args.jobs, work)
        if args.tune_budget:
            tuned_and_verified(tree, args.tune_budget)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
