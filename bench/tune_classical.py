#!/usr/bin/env python3
"""Classical strategies at equal budget on real programs from Debian sources.

For each program (Lua 5.4 running bench/workloads/lua_mix.lua, bzip2 -9 and zstd -7
compressing generated text), built by its own build system at -O3 through
`autopass record`: profile once, then `autopass tune` with each strategy (random,
greedy, ga, de, pso) at the same budget, seed and metric.  Each winner is re-verified
by an independent A/B measurement of the tuned build against the -O3 build (fresh runs,
more pairs).  Printed per program and as a geomean per strategy: speedup over -O3 with
its interval, evaluations to reach 95 % of the run's final best gain, tuning wall time.

Usage: python bench/tune_classical.py [--budget 40] [--strategies random,greedy,ga,de,pso]
           [--programs lua5.4,bzip2,libzstd] [--metric cpu] [--seed 0] [--out FILE.json]
"""

from __future__ import annotations

import argparse
import json
import math
import random
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))
import debian_sources  # noqa: E402

from autopass_build import config as cfg  # noqa: E402
from autopass_build.candidates.evaluate import Evaluator  # noqa: E402
from autopass_build.capture.build_env import record_environment  # noqa: E402
from autopass_build.evidence.hotspots import profile  # noqa: E402
from autopass_build.measuring.benchmark import DETERMINISTIC_METRICS  # noqa: E402
from autopass_build.outputs.report import summarize  # noqa: E402
from autopass_build.store.index import Store  # noqa: E402
from autopass_build.tuning.tuner import Tuner, TuneRequest  # noqa: E402


def text_input(path: Path, megabytes: float, seed: int = 1) -> Path:
    """Deterministic text with a Zipf-like word distribution (compressible like prose)."""
    rng = random.Random(seed)
    words = ["".join(rng.choice("etaoinshrdlucmfwypvbgkjqxz") for _ in range(rng.randint(2, 9)))
             for _ in range(3000)]
    weights = [1 / (i + 1) for i in range(len(words))]
    out, size = [], 0
    while size < megabytes * 1e6:
        line = " ".join(rng.choices(words, weights, k=rng.randint(6, 16))) + "\n"
        out.append(line)
        size += len(line)
    path.write_text("".join(out))
    return path


def bc_pi(path: Path, digits: int) -> Path:
    """A bc program that prints pi to `digits` decimal places and quits."""
    path.write_text(f"scale={digits}\n4*a(1)\nquit\n")
    return path


@dataclass(frozen=True)
class Case:
    program: debian_sources.Program
    build: tuple[str, ...]                   # its own build, at -O3
    binary: str                              # basename of the executable to tune
    command: Callable[[Path], list[str]]     # benchmark argv ("{exe}"), given the work dir
    check_files: tuple[str, ...] = ()        # [check].files: what it writes, compared


def wav_input(path: Path, seconds: int, seed: int = 1) -> Path:
    """Deterministic 44.1 kHz stereo music-like audio: drifting tones and noise."""
    import struct
    import wave
    if path.exists():
        return path
    rng = random.Random(seed)
    rate = 44100
    frames = bytearray()
    phases = [0.0, 0.0, 0.0]
    for i in range(rate * seconds):
        t = i / rate
        tones = (220 * (1 + 0.5 * math.sin(t * 0.7)), 440 * (1 + 0.3 * math.sin(t * 1.3)),
                 1760 * (1 + 0.1 * math.sin(t * 3)))
        value = 0.0
        for k, (freq, gain) in enumerate(zip(tones, (0.3, 0.2, 0.1))):
            phases[k] += 2 * math.pi * freq / rate
            value += gain * math.sin(phases[k])
        left = max(-1.0, min(1.0, value + rng.gauss(0, 0.02)))
        right = max(-1.0, min(1.0, 0.8 * value + rng.gauss(0, 0.02)))
        frames += struct.pack("<hh", int(left * 32000), int(right * 32000))
    with wave.open(str(path), "wb") as out:
        out.setnchannels(2)
        out.setsampwidth(2)
        out.setframerate(rate)
        out.writeframes(bytes(frames))
    return path


CASES = {
    "lua5.4": Case(debian_sources.LUA, ("make", "posix", "-j2", "MYCFLAGS=-O3"), "lua",
                   lambda work: ["{exe}", str(HERE / "workloads" / "lua_mix.lua")]),
    "bzip2": Case(debian_sources.BZIP2,
                  ("make", "-j2", "libbz2.a", "bzip2",
                   "CFLAGS=-Wall -Winline -O3 -g -D_FILE_OFFSET_BITS=64"), "bzip2",
                  lambda work: ["{exe}", "-9", "-c", str(text_input(work / "bz.txt", 2.5))]),
    "libzstd": Case(debian_sources.ZSTD, debian_sources.ZSTD.build, "zstd",
                    lambda work: ["{exe}", "-q", "-c", "-7",
                                  str(text_input(work / "zs.txt", 12))]),
    "sqlite3": Case(debian_sources.SQLITE, debian_sources.SQLITE.build, "sqlite3",
                    lambda work: ["{exe}", ":memory:",
                                  ".read " + str(HERE / "workloads" / "sqlite_mix.sql")]),
    "lame": Case(debian_sources.LAME, debian_sources.LAME.build, "lame",
                 lambda work: ["{exe}", "--silent", "-V", "2", str(wav_input(work / "in.wav", 90)),
                               "-"]),
    # Opus encoding and decoding 40 s of stereo audio at 96 kb/s (CELT's float loops);
    # what it decodes is written to a file that every run must write the same
    "opus": Case(debian_sources.OPUS, debian_sources.OPUS.build, "opus_demo",
                 lambda work: ["{exe}", "audio", "48000", "2", "96000",
                               str(wav_input(work / "in.wav", 40)), "decoded.raw"],
                 check_files=("decoded.raw",)),
    # brotli compressing 6 MB of text at quality 9 (its hash-chain search), to stdout
    "brotli": Case(debian_sources.BROTLI, debian_sources.BROTLI.build, "brotli",
                   lambda work: ["{exe}", "-q", "9", "-c", str(text_input(work / "br.txt", 6))]),
    # bc computing pi to 2,000 digits (`4*a(1)` at scale 2000: its multiplication and
    # division loops)
    "bc": Case(debian_sources.BC, debian_sources.BC.build, "bc",
               lambda work: ["{exe}", "-l", str(bc_pi(work / "pi.bc", 2000))]),
    # Whole C++ applications (debian_sources.APPLICATIONS), each with a workload its users
    # run: GEOS's geosop buffering the union of 3,000 polygons (the time is in libgeos.so,
    # a project shared library); cppcheck checking one of its own sources, its findings
    # written to a file that every run must write the same.
    "geos": Case(debian_sources.GEOS, debian_sources.GEOS.build, "geosop",
                 lambda work: ["{exe}", "-a", str(geos_input(work / "polys.wkt")), "-c",
                               "-f", "txt", "buffer", "2"]),
    "cppcheck": Case(debian_sources.CPPCHECK, debian_sources.CPPCHECK.build, "cppcheck",
                     lambda work: ["{exe}", "--enable=warning,style,performance,portability",
                                   "--std=c++11", "--output-file=findings.txt",
                                   "lib/mathlib.cpp"],
                     check_files=("findings.txt",)),
    # a dozen numeric loop kernels (bench/workloads/kernels), about a second a run
    "kernels": Case(debian_sources.KERNELS, debian_sources.KERNELS.build, "kernels",
                    lambda work: ["{exe}", "12"]),
    # 7-Zip compressing 8 MB of text to xz on one thread, the archive on its stdout
    "7zip": Case(debian_sources.SEVENZIP, debian_sources.SEVENZIP.build, "7zz",
                 lambda work: ["{exe}", "a", "-an", "-txz", "-mx5", "-mmt1", "-so",
                               str(text_input(work / "7z.txt", 8))]),
}


def geos_input(path: Path) -> Path:
    sys.path.insert(0, str(HERE / "workloads"))
    from geos_polygons import polygons

    if not path.exists():
        path.write_text("\n".join(polygons(3000)) + "\n")
    return path


def prepare(name: str, work: Path, metric: str,
            command: Callable[[Path], list[str]] | None = None,
            build: tuple[str, ...] | None = None) -> tuple[Store, cfg.Config]:
    """Record `name` at -O3 in `work` and profile it; `command` replaces its benchmark,
    `build` its build command."""
    case = CASES[name]
    tree = debian_sources.fresh_copy(case.program.package, work / name)
    store_dir = tree / ".autopass"
    pairs = 2 if metric in DETERMINISTIC_METRICS else 5   # there, 2 equal pairs decide
    build = build or case.build
    log(f"{name}: recording {' '.join(build)}")
    subprocess.run(list(build), cwd=tree / case.program.build_dir, check=True,
                   capture_output=True, env=record_environment(str(store_dir), str(tree)))
    store = Store.open_existing(str(store_dir))
    from autopass_build.store.targets import resolve
    [target] = [t for t in resolve(store, str(tree)) if t.kind == "executable"
                and Path(t.output).name == case.binary]
    config = cfg.parse(
        f"[run]\ncommand = {json.dumps((command or case.command)(work))}\ntarget = {json.dumps(target.output_rel)}\n"
        f"timeout = 60\n[measure]\nmetric = \"{metric}\"\nmin_pairs = {pairs}\nmax_pairs = 20\n"
        + (f"[check]\nfiles = {json.dumps(list(case.check_files))}\n" if case.check_files else ""),
        project_dir=str(tree))
    log(f"{name}: profiling")
    found = profile(Evaluator(store, config))
    log(f"{name}: hot units " + ", ".join(f"{u} {s:.0f}%" for u, s in
                                          list(found.unit_shares().items())[:4]))
    return store, config


def best_trace(journal) -> list[float | None]:
    """The best clear ratio after each search evaluation (as `autopass report` plots it:
    confirmed gains for timing metrics), None until there is one."""
    return [1 - gain if gain > 0 else None for gain in summarize(journal).curve]


def to_95(trace: list[float | None]) -> int | None:
    """Evaluations until the best clear gain so far reached 95 % of the run's best."""
    return reached(trace, min((r for r in trace if r is not None), default=None))


def reached(trace: list[float | None], target: float | None) -> int | None:
    """Evaluations until the best clear ratio got within 95 % of `target`'s gain."""
    if target is None:
        return None
    for count, ratio in enumerate(trace, 1):
        if ratio is not None and 1 - ratio >= 0.95 * (1 - target):
            return count
    return None


def tune_one(store: Store, config: cfg.Config, strategy: str, budget: int, seed: int,
             work: Path, name: str) -> dict:
    request = TuneRequest(strategy=strategy, budget=budget, seed=seed, max_units=4, stages=(),
                          flags_db=str(work / f"{name}-{strategy}.flags.json"))
    started = time.monotonic()
    result = Tuner(store, config, request,
                   lambda m: None if m.startswith("  ") else log(f"{name}/{strategy}: {m}")).run()
    seconds = time.monotonic() - started
    trace = best_trace(result.journal)
    row = {"program": name, "strategy": strategy, "evaluations": result.measured, "trace": trace,
           "seconds": round(seconds), "to_95": to_95(trace),
           "winners": {w.source: " ".join(w.flags) for w in result.winners},
           "tuning_best": result.best.ratio if result.best else None}
    row.update(verify(store, config, result, name, strategy))
    return row


def verify(store: Store, config: cfg.Config, result, name: str, strategy: str) -> dict:
    """An independent A/B of the tuned build against the -O3 build: fresh runs, more pairs."""
    if not result.winners:
        return {"speedup": 1.0, "low": 1.0, "high": 1.0, "verdict": "no change"}
    evaluator = Evaluator(store, config)
    by_unit = {u.id: w.flags for w in result.winners for u in evaluator.units
               if u.source_rel == w.source}
    fresh = 2 if config.measure.metric in DETERMINISTIC_METRICS else 10
    measure = replace(config.measure, min_pairs=fresh, max_pairs=30, precision=0.005)
    log(f"{name}/{strategy}: verifying the tuned build against -O3")
    evaluation = evaluator.evaluate(by_unit, measure=measure)
    est = evaluation.comparison.estimate if evaluation.comparison else None
    if est is None:
        return {"speedup": None, "low": None, "high": None, "verdict": str(evaluation.outcome)}
    speedup, low, high = est.speedup()
    return {"speedup": speedup, "low": low, "high": high,
            "verdict": evaluation.comparison.verdict}


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


def print_table(rows: list[dict], strategies: list[str]) -> None:
    print(f"{'program':<9} {'strategy':<8} {'speedup vs -O3 [95% CI]':<28} {'verdict':<9} "
          f"{'to 95%':>6} {'evals':>5} {'tuning s':>8}")
    for r in rows:
        speed = (f"{r['speedup']:.4f}x [{r['low']:.4f}, {r['high']:.4f}]"
                 if r["speedup"] else "-")
        print(f"{r['program']:<9} {r['strategy']:<8} {speed:<28} {r['verdict']:<9} "
              f"{r['to_95'] if r['to_95'] else '-':>6} {r['evaluations']:>5} {r['seconds']:>8}")
    print("geomean speedup over -O3 (verified):")
    for s in strategies:
        mine = [r["speedup"] for r in rows if r["strategy"] == s and r["speedup"]]
        steps = [r["to_95"] for r in rows if r["strategy"] == s and r["to_95"]]
        if mine:
            print(f"  {s:<8} {geomean(mine):.4f}x over {len(mine)} programs; evaluations to "
                  f"95% of best: {', '.join(map(str, steps)) or '-'}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--budget", type=int, default=40)
    parser.add_argument("--strategies", default="random,greedy,ga,de,pso")
    parser.add_argument("--programs", default="lua5.4,bzip2,libzstd")
    parser.add_argument("--metric", default="cpu", choices=cfg.METRICS)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", help="also write the rows as JSON here")
    args = parser.parse_args()
    strategies = args.strategies.split(",")
    rows = []
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="autopass-tune-classical-") as scratch:
        for name in args.programs.split(","):
            work = Path(scratch) / name
            work.mkdir()
            store, config = prepare(name, work, args.metric)
            for strategy in strategies:
                rows.append(tune_one(store, config, strategy, args.budget, args.seed, work, name))
                log(f"{name}/{strategy}: {rows[-1]}")
                if args.out:
                    Path(args.out).write_text(json.dumps(rows, indent=1))
    print(f"\ntune_classical: budget {args.budget}, metric {args.metric}, seed {args.seed}, "
          f"{time.strftime('%Y-%m-%d')}, {round((time.monotonic() - started) / 60)} min")
    print_table(rows, strategies)
    return 0


if __name__ == "__main__":
    sys.exit(main())
