#!/usr/bin/env python3
"""Whole C++ applications from Debian sources: what record and apply cost at their size.

For each program (bench/debian_sources.APPLICATIONS: GEOS, cppcheck, 7-Zip (`7zip`, its
own makefiles); `--programs lua5.4` adds Lua, whose small C units show a per-compile cost
best), in one copy of its source
and interleaving the variants in every round so that machine noise hits them alike:

    plain    its own build (CMake + Ninja or its makefiles, -j2) with clang-19 as the compiler
    record   autopass record -- <the same build>        (a fresh store each round)
    apply    autopass apply -- <the same build>, with a database holding an entry for every
             unit (its own -O level: the code is the same, only autopass's work is timed)

Prints the median wall and CPU time and the ratio to plain (targets: record <= 1.10x,
apply <= 1.05x), whether every object of the record build is the plain build's byte for
byte, the store's size against the objects', the peak memory of each step (the summed
resident size of the build's whole process tree, sampled every 0.1 s), and how long
`autopass units`, `targets` and `db show` take at this size.

Usage: python bench/apps.py [--programs geos,cppcheck] [--rounds 2]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))
import debian_sources  # noqa: E402

from autopass_build.capture.apply.applier import compiler_id  # noqa: E402
from autopass_build.core import toolchain  # noqa: E402
from autopass_build.core.files import hash_file  # noqa: E402
from autopass_build.store.index import Store  # noqa: E402

AUTOPASS = str(Path(sys.executable).parent / "autopass")
VARIANTS = ("plain", "record", "apply")


@dataclass
class Sample:
    wall: float
    cpu: float
    peak_rss: int           # bytes, the whole process tree at once


@dataclass
class Measured:
    samples: dict[str, list[Sample]] = field(default_factory=lambda: {v: [] for v in VARIANTS})
    units: int = 0
    objects_same: tuple[int, int] = (0, 0)
    store_bytes: int = 0
    object_bytes: int = 0
    commands: dict[str, float] = field(default_factory=dict)


class TreeMemory:
    """The peak of the summed resident memory of a process and all its descendants."""

    def __init__(self, pid: int):
        self.root = psutil.Process(pid)
        self.peak = 0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        while not self._done.wait(0.1):
            try:
                tree = [self.root] + self.root.children(recursive=True)
            except psutil.Error:
                continue
            total = 0
            for process in tree:
                try:
                    total += process.memory_info().rss
                except psutil.Error:
                    pass
            self.peak = max(self.peak, total)

    def stop(self) -> int:
        self._done.set()
        self._thread.join()
        return self.peak


def timed(argv: list[str], cwd: Path, env: dict) -> Sample:
    start = time.perf_counter()
    process = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE)
    memory = TreeMemory(process.pid)
    out, err = process.communicate()
    wall = time.perf_counter() - start
    peak = memory.stop()
    if process.returncode != 0:
        sys.exit(f"failed: {' '.join(argv)}\n{out.decode()[-2000:]}{err.decode()[-3000:]}")
    return Sample(wall, _children_cpu(), peak)


_last_children = [0.0]


def _children_cpu() -> float:
    """CPU seconds (user + sys) of the children waited for since the last call."""
    times = os.times()
    total = times.children_user + times.children_system
    spent, _last_children[0] = total - _last_children[0], total
    return spent


def objects(tree: Path) -> dict[str, bytes]:
    return {str(p.relative_to(tree)): p.read_bytes() for p in tree.rglob("*.o")
            if ".autopass" not in p.parts}


def folder_bytes(folder: Path, pattern: str = "*") -> int:
    return sum(p.stat().st_size for p in folder.rglob(pattern) if p.is_file())


def every_unit_database(store: Store, root: Path) -> Path:
    """An entry for every recorded unit with its own -O level."""
    units = store.units()
    entries = {u.source_rel: {
        "flags": [u.opt_level], "source_hash": hash_file(u.source), "why": "overhead bench",
        "gain": {"metric": "cpu", "ratio": 1.0, "low": 1.0, "high": 1.0, "pairs": 0}}
        for u in units if not os.path.isabs(u.source_rel)}
    path = root / "overhead.flags.json"
    path.write_text(json.dumps({"schema": 1, "cpu": None, "entries": entries,
                                "toolchain": {"compiler": compiler_id(units[0].compiler),
                                              "target": ""}}, indent=2, sort_keys=True))
    return path


def command_seconds(argv: list[str], cwd: Path) -> float:
    start = time.perf_counter()
    subprocess.run(argv, cwd=cwd, check=True, capture_output=True)
    return time.perf_counter() - start


def measure(program: debian_sources.Program, work: Path, rounds: int) -> Measured:
    tree = debian_sources.fresh_copy(program.package, work / program.package)
    build_dir = tree / program.build_dir
    env = dict(os.environ)
    env.pop("AUTOPASS_STORE", None)
    result = Measured()
    db: Path | None = None
    plain_objects: dict[str, bytes] = {}
    for round_no in range(rounds):
        order = VARIANTS if round_no % 2 == 0 else tuple(reversed(VARIANTS))
        for variant in order:
            if variant == "apply" and db is None:
                continue          # needs a recording first: from round 2 on in reverse
            subprocess.run(list(program.clean), cwd=build_dir, capture_output=True)
            if variant == "record":
                shutil.rmtree(tree / ".autopass", ignore_errors=True)
            argv = {"plain": list(program.plain_build),
                    "record": [AUTOPASS, "record", "--root", str(tree), "--",
                               *program.build],
                    "apply": [AUTOPASS, "apply", "--db", str(db), "--policy", "error", "--",
                              *program.build]}[variant]
            _children_cpu()
            sample = timed(argv, build_dir, env)
            result.samples[variant].append(sample)
            print(f"  {program.package} round {round_no + 1} {variant:<6} wall "
                  f"{sample.wall:7.1f}s cpu {sample.cpu:7.1f}s peak "
                  f"{sample.peak_rss / 2**30:5.2f} GiB", file=sys.stderr)
            if variant == "plain":
                plain_objects = objects(tree)
            elif variant == "record":
                store = Store.open_existing(str(tree / ".autopass"))
                result.units = len(store.units())
                recorded = objects(tree)
                same = sum(recorded.get(k) == v for k, v in plain_objects.items())
                result.objects_same = (same, len(plain_objects))
                result.store_bytes = folder_bytes(tree / ".autopass")
                result.object_bytes = sum(len(v) for v in recorded.values())
                result.commands = {name: command_seconds([AUTOPASS, *words], tree)
                                   for name, words in (("units", ["units"]),
                                                       ("targets", ["targets"]))}
                db = every_unit_database(store, tree)
                shown = command_seconds([AUTOPASS, "db", "show", "--db", str(db)], tree)
                result.commands["db show"] = shown
    return result


def report(name: str, measured: Measured) -> None:
    plain = measured.samples["plain"]
    plain_wall = statistics.median(s.wall for s in plain)
    plain_cpu = statistics.median(s.cpu for s in plain)
    print(f"\n{name}: {measured.units} units recorded; record's objects identical to the "
          f"plain build's: {measured.objects_same[0]}/{measured.objects_same[1]}")
    print(f"{'variant':<8} {'runs':>4} {'wall (s)':>9} {'cpu (s)':>9} {'wall ratio':>11} "
          f"{'cpu ratio':>10} {'peak (GiB)':>11}")
    for variant, samples in measured.samples.items():
        if not samples:
            continue
        wall = statistics.median(s.wall for s in samples)
        cpu = statistics.median(s.cpu for s in samples)
        peak = max(s.peak_rss for s in samples) / 2**30
        print(f"{variant:<8} {len(samples):>4} {wall:9.1f} {cpu:9.1f} "
              f"{wall / plain_wall:10.3f}x {cpu / plain_cpu:9.3f}x {peak:11.2f}")
    print(f"store {measured.store_bytes / 2**20:.1f} MiB against the objects' "
          f"{measured.object_bytes / 2**20:.1f} MiB "
          f"({measured.store_bytes / max(1, measured.object_bytes):.2f}x)")
    print("commands: " + ", ".join(f"`autopass {k}` {v:.2f}s"
                                   for k, v in measured.commands.items()))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--programs", default="geos,cppcheck",
                        help="comma-separated: " + ", ".join(
                            list(debian_sources.APPLICATIONS) + list(debian_sources.PROGRAMS)))
    parser.add_argument("--rounds", type=int, default=2, help="interleaved rounds (default 2)")
    args = parser.parse_args()
    if toolchain.find_tool("clang") is None:
        sys.exit("clang-19 not found: run scripts/setup.sh")
    known = {**debian_sources.APPLICATIONS, **debian_sources.PROGRAMS}
    names = args.programs.split(",")
    unknown = [n for n in names if n not in known]
    if unknown:
        sys.exit(f"unknown program {unknown}; known: {', '.join(known)}")
    work = Path(tempfile.mkdtemp(prefix="autopass-apps-"))
    try:
        results = {name: measure(known[name], work, args.rounds) for name in names}
    finally:
        shutil.rmtree(work, ignore_errors=True)
    for name, measured in results.items():
        report(name, measured)
    print("\ntargets: record <= 1.10x and apply <= 1.05x of plain (wall); every step's peak "
          "memory <= 8 GiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
