#!/usr/bin/env python3
"""Scale (issue 64, case 7): a generated C++ project of 2,000 units and 200 links.

The project: 200 programs, each linking 10 units of its own and a main (a class, a
template instance and a function each, over one header of the project's own), built by
one Makefile.  Measured, each on CPU 0 alone (`taskset -c 0`,
make -j1, so a benchmark pinned elsewhere is not disturbed and the two builds meet the
same machine):

  plain build, then `autopass record` of the same clean build: the overhead, as a ratio
  `units`, `targets`, `db show`, `db status`, `db check`: each command's wall time
    (target: under 2 s each), on a database with an entry for every unit
  the store's size on disk
  `tune`'s planning: from its start to the first candidate it measures (the baseline
    replayed, the profile, the stages' plan), with --no-stages and --budget 1

Usage: python bench/scale.py [--programs 200] [--units 10] [--out scale-out]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from autopass_build.core import flags_db  # noqa: E402

AUTOPASS = str(Path(sys.executable).parent / "autopass")
ONE_CPU = ["taskset", "-c", "0"]
# One header every unit includes (a project's own templates): a unit costs its code, not
# a standard library's headers, so 2,000 of them build in minutes on one CPU.
COMMON = """#pragma once
template <class T, int N> struct Ring {
  T items[N] = {};
  int at = 0;
  void push(T x) { items[at] = x; at = (at + 1) % N; }
  T sum() const { T s{}; for (int i = 0; i < N; i++) s += items[i]; return s; }
};
struct Shape { virtual ~Shape() {} virtual double area(double a) const = 0; };
"""
UNIT = """#include "../common.h"
namespace p{program} {{
struct Square{unit} : Shape {{
  double area(double a) const override {{ return a * a + {unit}; }}
}};
template <class T> T mix{unit}(const Ring<T, 16>& r) {{ return r.sum() * 31 + {unit}; }}
long work{unit}(long n) {{
  Ring<long, 16> ring;
  for (long i = 0; i < n; i++) ring.push((i * {unit}) % 97);
  Square{unit} s;
  return mix{unit}(ring) + (long)s.area(2.0);
}}
}}
"""
MAIN = """#include <cstdio>
namespace p{program} {{ {declarations} }}
int main() {{
  long total = 0;
{calls}
  std::printf("%ld\\n", total);
  return 0;
}}
"""


def generate(root: Path, programs: int, units: int) -> None:
    root.mkdir(parents=True)
    (root / "common.h").write_text(COMMON)
    rules, all_programs = [], []
    for p in range(programs):
        folder = root / f"prog{p}"
        folder.mkdir()
        objects = []
        for u in range(units):
            (folder / f"u{u}.cpp").write_text(UNIT.format(program=p, unit=u))
            objects.append(f"prog{p}/u{u}.o")
        declarations = " ".join(f"long work{u}(long n);" for u in range(units))
        calls = "\n".join(f"  total += p{p}::work{u}(1000);" for u in range(units))
        (folder / "main.cpp").write_text(MAIN.format(program=p, declarations=declarations,
                                                     calls=calls))
        objects.append(f"prog{p}/main.o")
        all_programs.append(f"prog{p}/app")
        rules.append(f"prog{p}/app: {' '.join(objects)}\n\t$(CXX) -o $@ $^\n")
    (root / "Makefile").write_text(
        "CXX ?= c++\nCXXFLAGS ?= -O2 -g\n"
        f"all: {' '.join(all_programs)}\n"
        "%.o: %.cpp\n\t$(CXX) $(CXXFLAGS) -c $< -o $@\n"
        + "".join(rules)
        + "clean:\n\trm -f prog*/*.o prog*/app\n")


def timed(argv: list[str], cwd: Path, env: dict | None = None,
          statuses: tuple[int, ...] = (0,)) -> tuple[float, str]:
    """Seconds `argv` took, and what it printed (`statuses`: the exit codes it may end
    with: `db status` exits 1 where it recommends a re-tune, as a CI gate does)."""
    started = time.monotonic()
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True)
    if done.returncode not in statuses:
        raise SystemExit(f"{' '.join(argv)} failed: {done.stderr[-800:]}")
    return time.monotonic() - started, done.stdout


def database_for(root: Path) -> None:
    """An entry for every recorded unit, as tune writes one: what `db` commands read at
    this scale."""
    from autopass_build.store.index import Store

    db = flags_db.empty()
    units = Store.open_existing(str(root / ".autopass")).units()
    db.toolchain = {"compiler": units[0].compiler_id, "target": ""}
    for unit in units:
        db.entries[unit.source_rel] = flags_db.FlagsEntry(("-O3",), unit.source_hash)
    flags_db.save(str(root / "autopass.flags.json"), db)


def planning(root: Path) -> float:
    """Seconds from `tune`'s start to the first candidate it measures."""
    (root / "autopass.toml").write_text('[run]\ncommand = ["{exe}"]\ntarget = "prog0/app"\n')
    started = time.monotonic()
    tune = subprocess.Popen([*ONE_CPU, AUTOPASS, "tune", "--no-stages", "--budget", "1",
                             "--strategy", "random"], cwd=root, stderr=subprocess.PIPE,
                            stdout=subprocess.DEVNULL, text=True)
    assert tune.stderr is not None
    seconds = None
    for line in tune.stderr:
        if "[1/" in line:
            seconds = time.monotonic() - started
            break
    tune.kill()
    tune.wait()
    if seconds is None:
        raise SystemExit("tune never reached its first candidate")
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--programs", type=int, default=200)
    parser.add_argument("--units", type=int, default=10)
    parser.add_argument("--out", default="scale-out")
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="autopass-scale-"))
    root = scratch / "project"
    try:
        generate(root, args.programs, args.units)
        env = {**os.environ, "CXX": "clang++-19"}
        plain, _ = timed([*ONE_CPU, "make", "-s", "-j1"], root, env)
        timed(["make", "-s", "clean"], root)
        record, _ = timed([*ONE_CPU, AUTOPASS, "record", "--", "make", "-s", "-j1"], root, env)
        database_for(root)
        commands = {name: timed([*ONE_CPU, AUTOPASS, *argv], root, statuses=(0, 1))[0]
                    for name, argv in (
            ("units", ["units"]), ("targets", ["targets"]), ("db show", ["db", "show"]),
            ("db status", ["db", "status"]), ("db check", ["db", "check"]))}
        store = sum(f.stat().st_size for f in (root / ".autopass").rglob("*") if f.is_file())
        plan = planning(root)
        units = len(list(root.glob("prog*/*.cpp")))
        result = {"units": units, "links": args.programs, "plain_s": round(plain, 1),
                  "record_s": round(record, 1), "record_overhead": round(record / plain, 3),
                  "commands_s": {k: round(v, 2) for k, v in commands.items()},
                  "store_mb": round(store / 1e6, 1), "tune_planning_s": round(plan, 1),
                  "command": "python bench/scale.py " + " ".join(sys.argv[1:]),
                  "date": time.strftime("%Y-%m-%d")}
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "scale.json").write_text(json.dumps(result, indent=1))
    print(f"{result['units']} units, {result['links']} links (one CPU, make -j1)")
    print(f"  plain build {result['plain_s']} s, autopass record {result['record_s']} s: "
          f"{result['record_overhead']}x")
    for name, seconds in result["commands_s"].items():
        print(f"  autopass {name:<10} {seconds:.2f} s" + ("" if seconds < 2 else "  OVER 2 s"))
    print(f"  store {result['store_mb']} MB; tune's planning before its first candidate "
          f"{result['tune_planning_s']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
