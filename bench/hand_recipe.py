#!/usr/bin/env python3
"""Past the recipe (issue 60): `autopass tune`'s build against the expert's recipe applied
by hand, on real programs from Debian sources, side by side in one run.

The recipe is built without any of autopass's code, as an expert does it: the project's
own build (tune_classical.CASES) with the flags added to every compile and link (a
`clang-19`/`clang++-19` first on PATH that appends them: the build's own CC, CXX and
CMake compiler settings reach it unchanged), then

    instrumented   -fprofile-generate=DIR; the benchmark run once; llvm-profdata merge
    PGO+ThinLTO    -fprofile-use=P -flto=thin -fuse-ld=lld
    PGO+LTO        -fprofile-use=P -flto -fuse-ld=lld
    ... +BOLT      the same build (linked with --emit-relocs, which changes no code),
                   then llvm-bolt -instrument on the program and on each project library
                   it loads, the benchmark run once, merge-fdata, and llvm-bolt -data
                   with the options LLVM's BOLT guide recommends

and `autopass` is the same source recorded by `autopass record`, tuned by `autopass tune
--time T` (every stage it has), and built again by `autopass apply` through the same
build, as a user does.  Every variant, the -O3 build included, runs in its own copy of
the tree; all are measured in interleaved rounds (each variant once a round, shuffled;
CPU time of the run; every output must be -O3's), each against -O3 and autopass against
the best hand recipe, as ratios with the 95 % interval of autopass's own statistics;
and each once under cachegrind (instructions, which do not move with the machine).

Usage: python bench/hand_recipe.py [--programs bzip2,lua5.4,libzstd,sqlite3,cppcheck,geos]
           [--time 10m] [--app-time 30m] [--rounds 20] [--out hand-recipe-out]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))
import debian_sources  # noqa: E402
import tune_classical as tc  # noqa: E402

from autopass_build.core import bolt_commands  # noqa: E402  (finds llvm-bolt only)
from autopass_build.measuring.binaries import debugless_copy  # noqa: E402
from autopass_build.measuring.stats import estimate  # noqa: E402

AUTOPASS = str(Path(sys.executable).parent / "autopass")
SUITE = ("bzip2", "lua5.4", "libzstd", "sqlite3")
APPLICATIONS = ("cppcheck", "geos")
QUIET = "-Wno-unused-command-line-argument"
# The layout options LLVM's BOLT guide gives for a profiled binary.
BOLT_OPTIONS = ("-reorder-blocks=ext-tsp", "-reorder-functions=hfsort", "-split-functions",
                "-split-all-cold", "-split-eh", "-dyno-stats")
SHIM = """#!/bin/sh
exec {real} "$@" $HAND_FLAGS
"""


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


@dataclass
class Variant:
    """A build to measure: its program, and what it runs with."""
    tree: Path
    binary: Path
    env: dict[str, str] = field(default_factory=dict)
    note: str = ""


def shim_folder(work: Path) -> Path:
    """clang-19 and clang++-19 that append $HAND_FLAGS to every call."""
    folder = work / "shim"
    folder.mkdir(exist_ok=True)
    for name in ("clang-19", "clang++-19"):
        real = shutil.which(name)
        if real is None:
            raise SystemExit(f"{name} not found: bash scripts/setup.sh")
        path = folder / name
        path.write_text(SHIM.format(real=real))
        path.chmod(0o755)
    return folder


def run(argv: list[str] | tuple[str, ...], cwd: Path, env: dict | None = None,
        what: str = "") -> str:
    done = subprocess.run(list(argv), cwd=cwd, env=env, capture_output=True)
    said = (done.stdout.decode("utf-8", "replace"), done.stderr.decode("utf-8", "replace"))
    if done.returncode != 0:     # a benchmark may write binary output (bzip2 -c)
        raise SystemExit(f"{what or ' '.join(argv)} failed in {cwd}:\n"
                         f"{said[0][-1500:]}\n{said[1][-2500:]}")
    return said[0] + said[1]


def plain_build(name: str) -> tuple[str, ...]:
    """The build the suite records (tune_classical's, at -O3) with clang-19 named as
    its compiler, as debian_sources' plain builds name it."""
    case = tc.CASES[name]
    if case.build == case.program.build:
        return case.program.plain_build
    compiler = [t for t in case.program.plain_build if t.startswith("CC=")]
    return case.build + tuple(compiler)


def hand_build(name: str, work: Path, label: str, flags: str) -> tuple[Path, float]:
    """A fresh tree of `name` built by its own build with `flags` on every compile and
    link: (the tree, the build's seconds)."""
    program = tc.CASES[name].program
    tree = debian_sources.fresh_copy(program.package, work / label)
    env = {**os.environ, "PATH": f"{shim_folder(work)}:{os.environ['PATH']}",
           "HAND_FLAGS": f"{flags} {QUIET}".strip()}
    started = time.monotonic()
    run(plain_build(name), tree / program.build_dir, env, f"{name}: the {label} build")
    return tree, time.monotonic() - started


# Lua's workload at its default size runs 0.12 s here, short enough for the VM's noise
# to call one build 1.45x slower than another that runs the same instructions: the
# size that runs about half a second.
LONGER = {"lua5.4": ("8",)}


def command(name: str, work: Path) -> list[str]:
    """The benchmark of `name` ("{exe}" for the binary)."""
    return tc.CASES[name].command(work) + list(LONGER.get(name, ()))


def benchmark_argv(name: str, binary: Path, work: Path) -> list[str]:
    return [t.replace("{exe}", str(binary)) for t in command(name, work)]


def variant(name: str, tree: Path, env: dict | None = None, note: str = "") -> Variant:
    program = tc.CASES[name].program
    return Variant(tree, tree / program.build_dir / program.binaries[0], env or {}, note)


def libraries(name: str, tree: Path) -> list[Path]:
    """The project libraries the benchmarked program loads (GEOS: libgeos.so)."""
    program = tc.CASES[name].program
    return [tree / program.build_dir / b for b in program.binaries[1:] if ".so" in b]


# ---- the recipe by hand --------------------------------------------------------------
def hand_profile(name: str, work: Path) -> tuple[Path, float]:
    """The instrumented build, one run of the benchmark, the merged profile."""
    raw = work / "profraw"
    tree, seconds = hand_build(name, work, "instrumented", f"-fprofile-generate={raw}")
    instrumented = variant(name, tree)
    run(benchmark_argv(name, instrumented.binary, work), tree, what=f"{name}: training")
    profile = work / "hand.profdata"
    run(["llvm-profdata-19", "merge", "-o", str(profile), *map(str, raw.glob("*.profraw"))],
        work, what="llvm-profdata merge")
    return profile, seconds


def hand_bolt(name: str, work: Path, built: Variant, label: str) -> Variant:
    """llvm-bolt -instrument on the program and its project libraries, one run, the
    rewrite with the merged profiles."""
    bolt, merge = bolt_commands.tool(), bolt_commands.tool("merge-fdata")
    if bolt is None or merge is None:
        raise SystemExit("llvm-bolt not found: bash scripts/setup.sh")
    folder = work / f"{label}-bolt"
    inst = folder / "instrumented"
    inst.mkdir(parents=True)
    binaries = [built.binary, *libraries(name, built.tree)]
    for index, binary in enumerate(binaries):
        bolt_run([bolt, str(binary), "-instrument", "-o", str(inst / binary.name),
                  f"--instrumentation-file={folder}/prof{index}",
                  "--instrumentation-file-append-pid"],
                 folder, f"{name}: llvm-bolt -instrument {binary.name}")
        _soname_alias(inst / binary.name)
    env = {"LD_LIBRARY_PATH": str(inst)}
    run(benchmark_argv(name, inst / built.binary.name, work), built.tree,
        {**os.environ, **env}, f"{name}: the BOLT training run")
    for index, binary in enumerate(binaries):
        merged = folder / f"prof{index}.fdata"
        run([merge, "-o", str(merged), *map(str, folder.glob(f"prof{index}.*.fdata"))], folder,
            what="merge-fdata")
        bolt_run([bolt, str(binary), "-o", str(folder / binary.name), f"-data={merged}",
                  *BOLT_OPTIONS], folder, f"{name}: llvm-bolt {binary.name}")
        _soname_alias(folder / binary.name)
    return Variant(built.tree, folder / built.binary.name, {"LD_LIBRARY_PATH": str(folder)})


def bolt_run(argv: list[str], cwd: Path, what: str) -> None:
    """llvm-bolt, and again with --skip-funcs for each function it asks to skip ("...
    in function luaV_execute/1(*2). Consider adding this function to --skip-funcs"), as
    an expert follows its message."""
    skipped: list[str] = []
    while True:
        extra = [f"--skip-funcs={','.join(skipped)}"] if skipped else []
        done = subprocess.run(argv + extra, cwd=cwd, capture_output=True, text=True)
        if done.returncode == 0:
            return
        asked = re.search(r"in function (\S+?)(\(\*\d+\))?\. Consider adding this function "
                          r"to --skip-funcs", done.stderr + done.stdout)
        if asked is None or asked.group(1) in skipped or len(skipped) > 8:
            raise SystemExit(f"{what} failed:\n{(done.stderr + done.stdout)[-2000:]}")
        skipped.append(asked.group(1))


def _soname_alias(library: Path) -> None:
    """The link a loader looks for (the library's SONAME) beside a rewritten library."""
    if ".so" not in library.name:
        return
    said = subprocess.run(["readelf", "-d", str(library)], capture_output=True, text=True)
    found = re.search(r"\(SONAME\).*\[(.+)\]", said.stdout)
    if found and found.group(1) != library.name:
        alias = library.parent / found.group(1)
        alias.unlink(missing_ok=True)
        alias.symlink_to(library.name)


# ---- autopass, as a user runs it ---------------------------------------------------
def autopass(name: str, work: Path, limit: str, label: str = "autopass",
             tune_keys: str = "", extra: str = "") -> tuple[Variant, dict]:
    """`name` recorded, tuned for `limit` ("": by [tune].budget alone; `tune_keys`: more
    of autopass.toml's [tune]; `extra`: more tables), applied, in a tree of its own
    (`label`)."""
    case = tc.CASES[name]
    program = case.program
    tree = debian_sources.fresh_copy(program.package, work / label)
    build_dir = tree / program.build_dir
    started = time.monotonic()
    run([AUTOPASS, "record", "--", *case.build], build_dir, what=f"{name}: record")
    recorded = time.monotonic() - started
    # autopass.toml beside the store, in the folder the build runs in; the benchmark
    # runs from the tree's top, as every variant's does
    check = f"[check]\nfiles = {json.dumps(list(case.check_files))}\n" if case.check_files \
        else ""
    (build_dir / "autopass.toml").write_text(
        f"[run]\ncommand = {json.dumps(command(name, work))}\n"
        f"target = {json.dumps(program.binaries[0])}\n"
        f"cwd = {json.dumps(os.path.relpath(tree, build_dir))}\ntimeout = 120\n{check}"
        + (f"[tune]\n{tune_keys}" if tune_keys else "") + extra)
    started = time.monotonic()
    said = run([AUTOPASS, "tune", *(["--time", limit] if limit else [])], build_dir,
               what=f"{name}: tune")
    tuned = time.monotonic() - started
    (work / f"{name}-{label}-tune.log").write_text(said)
    run(program.clean, build_dir, what=f"{name}: clean")
    run([AUTOPASS, "apply", "--", *case.build], build_dir, what=f"{name}: apply")
    database = build_dir / "autopass.flags.json"
    db = json.loads(database.read_text()) if database.is_file() else {}
    stages = "+".join((db.get("target") or {}).get("stages", [])) or "none"
    steps = list(dict.fromkeys(line.strip().removeprefix("tune: ") for line in said.splitlines()
                               if re.search(r"stage \S+: \S+x \[.*of the build without", line)))
    entries = db.get("entries", {})
    return variant(name, tree, note=stages), {
        "chose": stages, "entries": len(entries), "build_dir": str(build_dir),
        "tree": str(tree),
        "decisions": sum(token.startswith("-autopass-decision=")
                         for entry in entries.values() for token in entry["flags"]),
        "record_s": round(recorded), "tune_s": round(tuned), "steps_on_top": steps,
        "plan": next((line for line in said.splitlines() if "budget" in line), "")}


# ---- measurement -------------------------------------------------------------------
def cpu_run(argv: list[str], variant_: Variant) -> tuple[float, bytes]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(argv, cwd=variant_.tree, env={**os.environ, **variant_.env},
                          capture_output=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{argv} failed: {done.stderr[-500:]!r}")
    return ((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
            done.stdout)


def outputs_of(name: str, variant_: Variant) -> bytes:
    """What a run leaves besides its stdout: the files the benchmark writes."""
    return b"".join((variant_.tree / f).read_bytes() for f in tc.CASES[name].check_files
                    if (variant_.tree / f).is_file())


def measure(name: str, work: Path, variants: dict[str, Variant], rounds: int,
            reference: str = "-O3") -> dict:
    """Interleaved rounds of every variant (CPU times), and whether each one's output
    is `reference`'s."""
    times: dict[str, list[float]] = {label: [] for label in variants}
    same: dict[str, bool] = {label: True for label in variants}
    expected: bytes | None = None
    order = list(variants)
    rng = random.Random(11)
    for _ in range(rounds):
        rng.shuffle(order)
        for label in order:
            seconds, out = cpu_run(benchmark_argv(name, variants[label].binary, work),
                                   variants[label])
            out += outputs_of(name, variants[label])
            times[label].append(seconds)
            if label == reference:
                expected = expected if expected is not None else out
            elif expected is not None:
                same[label] = same[label] and out == expected
    return {"times": times, "same_output": same}


def ratio(times: dict[str, list[float]], base: str, label: str) -> dict:
    found = estimate(times[base], times[label])
    speedup, low, high = found.speedup()
    return {"speedup": speedup, "low": low, "high": high}


def instructions(name: str, work: Path, variant_: Variant) -> int | None:
    """One run's instructions under cachegrind, on a copy without debug info (valgrind
    3.19 gives up on clang 19's DWARF 5); None, said, where cachegrind cannot count."""
    with tempfile.TemporaryDirectory(prefix="autopass-hand-vg-") as folder:
        binary = debugless_copy(variant_.binary, folder)
        argv = ["valgrind", "--tool=cachegrind", "--cache-sim=no",
                "--cachegrind-out-file=/dev/null", *benchmark_argv(name, binary, work)]
        done = subprocess.run(argv, cwd=variant_.tree, env={**os.environ, **variant_.env},
                              capture_output=True)
    found = re.search(rb"I\s+refs:\s+([\d,]+)", done.stderr)
    if done.returncode != 0 or found is None:
        log(f"cachegrind failed on {variant_.binary}: {done.stderr[-300:]!r}")
        return None
    return int(found.group(1).replace(b",", b""))


def _over(counts: dict[str, int | None], base: str, label: str) -> float | None:
    """How many times fewer instructions `label` runs than `base` (None: not counted)."""
    a, b = counts.get(base), counts.get(label)
    return a / b if a and b else None


def _x(value: float | None) -> str:
    return f"{value:.3f}x" if value is not None else "(not counted)"


# ---- one program ---------------------------------------------------------------------
def run_program(name: str, work: Path, limit: str, rounds: int) -> dict:
    started = time.monotonic()
    log(f"{name}: -O3 build")
    o3_tree, o3_seconds = hand_build(name, work, "O3", "")
    log(f"{name}: the hand recipe: instrumented build, training, merge")
    profile, _ = hand_profile(name, work)
    variants: dict[str, Variant] = {"-O3": variant(name, o3_tree)}
    builds = {"-O3": o3_seconds}
    for label, lto in (("PGO+ThinLTO", "-flto=thin"), ("PGO+LTO", "-flto")):
        log(f"{name}: hand {label}")
        tree, builds[label] = hand_build(
            name, work, label.replace("+", "-"),
            f"-fprofile-use={profile} {lto} -fuse-ld=lld -Wl,--emit-relocs")
        variants[label] = variant(name, tree)
        log(f"{name}: hand {label}+BOLT")
        variants[f"{label}+BOLT"] = hand_bolt(name, work, variants[label], label)
    log(f"{name}: autopass record, tune --time {limit}, apply")
    variants["autopass"], facts = autopass(name, work, limit)
    log(f"{name}: autopass chose {facts['chose']}; measuring {rounds} rounds")
    measured = measure(name, work, variants, rounds)
    times = measured["times"]
    rows = {label: {**ratio(times, "-O3", label), "same_output": measured["same_output"][label]}
            for label in variants if label != "-O3"}
    hand = [label for label in rows if label != "autopass"]
    best = max(hand, key=lambda label: rows[label]["speedup"])
    log(f"{name}: one cachegrind run of each variant")
    counts = {label: instructions(name, work, v) for label, v in variants.items()}
    for label in rows:
        rows[label]["instructions_speedup"] = _over(counts, "-O3", label)
    return {"program": name, "variants": rows, "best_hand": best,
            "autopass_vs_best_hand": ratio(times, best, "autopass"),
            "autopass_vs_best_hand_instructions": _over(counts, best, "autopass"),
            "autopass": facts, "builds_s": {k: round(v) for k, v in builds.items()},
            "o3_seconds": sorted(times["-O3"])[rounds // 2], "instructions": counts,
            "minutes": round((time.monotonic() - started) / 60)}


def geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else 1.0


def report(results: list[dict], totals: bool = True) -> str:
    """Each program's rows; with `totals`, the geomeans over all of them."""
    out = []
    for r in results:
        out.append(f"\n{r['program']} (-O3 runs {r['o3_seconds']:.2f} s; autopass chose "
                   f"{r['autopass']['chose']}, {r['autopass']['entries']} per-file entries, "
                   f"tune {r['autopass']['tune_s'] // 60} min)")
        for label, row in r["variants"].items():
            mark = "" if row["same_output"] else "  OUTPUT DIFFERS"
            out.append(f"  {label:<18} {row['speedup']:.3f}x [{row['low']:.3f}, "
                       f"{row['high']:.3f}] over -O3; instructions "
                       f"{_x(row['instructions_speedup'])}{mark}")
        versus = r["autopass_vs_best_hand"]
        out.append(f"  autopass over the best hand recipe ({r['best_hand']}): "
                   f"{versus['speedup']:.3f}x [{versus['low']:.3f}, {versus['high']:.3f}]; "
                   f"instructions {_x(r['autopass_vs_best_hand_instructions'])}")
        for step in r["autopass"]["steps_on_top"]:
            out.append(f"    tune's {step}")
    if not totals:
        return "\n".join(out)
    suite = [r for r in results if r["program"] in SUITE]
    out.append("")
    if suite:
        out.append(f"suite geomean, autopass over -O3: "
                   f"{geomean([r['variants']['autopass']['speedup'] for r in suite]):.3f}x "
                   f"(target 1.20x); best hand recipe over -O3: "
                   f"{geomean([r['variants'][r['best_hand']]['speedup'] for r in suite]):.3f}x")
    out.append(f"geomean, autopass over the best hand recipe: "
               f"{geomean([r['autopass_vs_best_hand']['speedup'] for r in results]):.3f}x "
               f"(target 1.03x); in instructions "
               f"{geomean([c for r in results if (c := r['autopass_vs_best_hand_instructions'])]):.3f}x")
    return "\n".join(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     epilog=__doc__.split("\n\n", 1)[1],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--programs", default=",".join(SUITE + APPLICATIONS))
    parser.add_argument("--time", default="10m", help="tune's --time on a suite program")
    parser.add_argument("--app-time", default="30m", help="tune's --time on a C++ application")
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--out", default="hand-recipe-out")
    parser.add_argument("--keep", action="store_true", help="keep the build trees")
    args = parser.parse_args()
    names = args.programs.split(",")
    unknown = [n for n in names if n not in tc.CASES]
    if unknown:
        parser.error(f"unknown program {unknown}; known: {', '.join(tc.CASES)}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    results: list[dict] = []
    failed: list[str] = []
    started = time.monotonic()
    scratch = Path(tempfile.mkdtemp(prefix="autopass-hand-"))
    try:
        for name in names:
            work = scratch / name
            work.mkdir()
            limit = args.app_time if name in APPLICATIONS else args.time
            try:
                results.append(run_program(name, work, limit, args.rounds))
            except Exception as error:   # one program's failure must not lose the others
                log(f"{name}: FAILED: {error!r}")
                failed.append(f"{name}: {error!r}")
                continue
            for log_file in work.glob("*-tune.log"):
                shutil.copyfile(log_file, out / log_file.name)
            (out / "hand_recipe.json").write_text(json.dumps(
                {"results": results, "failed": failed, "command": "python bench/hand_recipe.py "
                 + " ".join(sys.argv[1:]), "date": time.strftime("%Y-%m-%d"),
                 "minutes": round((time.monotonic() - started) / 60)}, indent=1))
            log(report(results[-1:], totals=False))   # the geomeans come at the end
            if not args.keep:
                shutil.rmtree(work, ignore_errors=True)
    finally:
        if not args.keep:
            shutil.rmtree(scratch, ignore_errors=True)
    print(report(results))
    print(f"\n{round((time.monotonic() - started) / 60)} min; wrote {out}/hand_recipe.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
