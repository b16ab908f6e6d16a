#!/usr/bin/env python3
"""Record and apply through cmake/AutoPass.cmake (no `autopass record` or `apply` around
the build): what a compile costs with the Python launcher (a Python start per compile,
and for record a second front-end pass, as it was) against the native launcher with its
server on demand (capture/on_demand.py) and, for record, the one-pass plugin; side by
side with the plain build.

zstd 1.5.4 (Debian sources, its own build/cmake, Release, Ninja, shared and static
library and the zstd program), each variant configured once in a folder of its own,
then in every round (the first two in alternating order, the rest after them)
`ninja -t clean` and a timed `ninja -jN`:

    plain               CMake with clang-19, no autopass
    apply-python        AutoPass.cmake, apply mode, AUTOPASS_LAUNCHER=autopass-cc
    apply-native-cold   apply mode, the native launcher, its server stopped before the
                        build (the first build after 5 idle minutes)
    apply-native-warm   the same, right after: the server is up
    record-python       record mode, AUTOPASS_LAUNCHER=autopass-cc, AUTOPASS_ONE_PASS=OFF
                        (how it was), into a fresh store
    record-native-cold  record mode, the native launcher and the one-pass plugin, the
                        server stopped before, into a fresh store

The flags database holds an entry for every unit with the build's own -O3 (the same
code: only autopass's work is measured).  Times: the build's wall and CPU, the on-demand
server's CPU added (it runs outside the build's process tree).  Targets: record <= 1.10x,
apply <= 1.05x.

Usage: python bench/cmake_include_overhead.py [--rounds 5] [--jobs 2]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))
import debian_sources  # noqa: E402
from apply_overhead import database_of, print_ratios  # noqa: E402
from record_overhead import timed  # noqa: E402

from autopass_build.capture.apply.tally import APPLIED, SEEN  # noqa: E402
from autopass_build.core import toolchain  # noqa: E402

REPO = HERE.parent
BIN = Path(sys.executable).parent
VARIANTS = ("plain", "apply-python", "apply-native-cold", "apply-native-warm",
            "record-python", "record-native-cold")
ALTERNATING = 2          # the first two run in alternating order; the rest after them


def database(tree: Path, clang: str) -> Path:
    sources = sorted(p for folder in ("lib", "programs") for p in (tree / folder).rglob("*.c"))
    return database_of(tree, sources, "-O3", clang, tree / "autopass.flags.json")


def configure(tree: Path, variant: str, clang: str, env: dict[str, str]) -> Path:
    build = tree / f"build-{variant.removesuffix('-cold').removesuffix('-warm')}"
    if build.exists():
        return build
    argv = ["cmake", "-S", "build/cmake", "-B", str(build), "-G", "Ninja",
            "-DCMAKE_BUILD_TYPE=Release", f"-DCMAKE_C_COMPILER={clang}"]
    mode = variant.split("-")[0]
    if mode != "plain":
        argv += [f"-DCMAKE_PROJECT_TOP_LEVEL_INCLUDES={REPO}/cmake/AutoPass.cmake",
                 f"-DAUTOPASS_MODE={mode}", f"-DAUTOPASS_ROOT={tree}",
                 f"-DAUTOPASS_STORE={tree}/store",
                 f"-DAUTOPASS_FLAGS_DB={tree}/autopass.flags.json",
                 "-DAUTOPASS_APPLY_POLICY=error"]
        if "python" in variant:
            argv += [f"-DAUTOPASS_LAUNCHER={BIN / 'autopass-cc'}", "-DAUTOPASS_ONE_PASS=OFF"]
    subprocess.run(argv, cwd=tree, env=env, check=True, capture_output=True)
    return build


def recorded_units(store: Path) -> int:
    done = subprocess.run([str(BIN / "autopass"), "units", "--store", str(store), "--json"],
                          capture_output=True, text=True)
    return len(json.loads(done.stdout)["units"]) if done.returncode == 0 else 0


def servers() -> list[psutil.Process]:
    found = []
    for process in psutil.process_iter(["cmdline"]):
        if "--autopass-serve" in (process.info["cmdline"] or []):
            found.append(process)
    return found


def server_cpu() -> float:
    total = 0.0
    for process in servers():
        try:
            times = process.cpu_times()
            total += times.user + times.system
        except psutil.Error:
            pass
    return total


def stop_servers() -> None:
    for process in servers():
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(10)
        except psutil.Error:
            pass


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    clang = toolchain.find_tool("clang")
    if clang is None:
        sys.exit("clang-19 not found: run scripts/setup.sh")
    env = {**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}"}
    env.pop("AUTOPASS_SERVER_IDLE", None)
    work = Path(tempfile.mkdtemp(prefix="autopass-cmake-apply-"))
    try:
        tree = debian_sources.fresh_copy(debian_sources.ZSTD.package, work / "zstd")
        db = database(tree, clang)
        builds = {v: configure(tree, v, clang, env) for v in VARIANTS}
        units = len(json.loads(db.read_text())["entries"])
        samples: dict[str, list[tuple[float, float]]] = {v: [] for v in VARIANTS}
        seen_recorded: dict[str, int] = {}
        for round_no in range(args.rounds):
            first = list(VARIANTS[:ALTERNATING])
            for variant in (first if round_no % 2 == 0 else first[::-1]) + \
                    list(VARIANTS[ALTERNATING:]):
                if variant.endswith("-cold"):
                    stop_servers()
                shutil.rmtree(tree / "store", ignore_errors=True)
                subprocess.run(["ninja", "-C", str(builds[variant]), "-t", "clean"],
                               capture_output=True, check=True)
                before = server_cpu()
                tally = work / "tally"
                wall, cpu = timed(["ninja", "-C", str(builds[variant]), f"-j{args.jobs}"],
                                  tree, {**env, "AUTOPASS_APPLY_TALLY": str(tally)})
                if "native" in variant:
                    time.sleep(0.2)
                    cpu += max(0.0, server_cpu() - before)
                lines = tally.read_text().splitlines(keepends=True) if tally.exists() else []
                tally.unlink(missing_ok=True)
                applied, seen = lines.count(APPLIED), lines.count(SEEN)
                if variant.startswith("apply") and (applied == 0 or applied < seen - 2):
                    sys.exit(f"{variant}: {applied} of {seen} compiles took the flags")
                if variant.startswith("record"):
                    applied = recorded_units(tree / "store")
                    if applied < seen_recorded.setdefault(variant, applied) or not applied:
                        sys.exit(f"{variant}: recorded {applied} units")
                samples[variant].append((wall, cpu))
                print(f"  round {round_no + 1} {variant:<19} wall {wall:6.2f}s cpu {cpu:6.2f}s"
                      f" ({applied} {'recorded' if 'record' in variant else 'given the flags'})",
                      file=sys.stderr)
        print(f"\nzstd 1.5.4 through build/cmake, ninja -j{args.jobs}, {args.rounds} rounds, "
              f"a database entry for each of its {units} C sources")
        print_ratios(samples, 19)
        print("targets: record <= 1.10x, apply <= 1.05x of plain")
    finally:
        stop_servers()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
