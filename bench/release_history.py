#!/usr/bin/env python3
"""Tuned builds that last (issue 46): tune on a program's first release, then build each
later release three ways, all measured side by side against that release's -O3 build:

    (a) as is       `autopass apply` with the first release's database and profiles
    (b) retrained   `autopass apply --train` with that database (fresh PGO and BOLT
                    profiles, the first release's other decisions)
    (c) afresh      `autopass record` + `autopass tune` on this release, then apply
    (a+)            (a) with --policy apply-anyway, when the database has per-file entries:
                    whether an entry measured on the old source still helps the new one

Programs (upstream sources at successive releases, from packages that bundle them):
Lua 5.4.4 / 5.4.7 / 5.4.8 (PyPI's lupa 2.0 / 2.4 / 2.6, third-party/lua54; running
bench/workloads/lua_mix.lua), SQLite 3.43.2 / 3.45.3 / 3.46.0 (npm's better-sqlite3
9.0.0 / 10.0.0 / 11.0.0, deps/sqlite3: the amalgamation with bench/workloads/
sqlite_driver.c running bench/workloads/sqlite_mix.sql), Brotli 1.0.7 / 1.0.9 / 1.1.0
(PyPI sdists; the `brotli` tool compressing a generated 3 MB text at -q 9: its stages
gained too little to tell in 4 minutes, 0.978x [0.947, 1.007] for PGO + LTO, so it is
not in the default set).  Each release is built by a small Makefile of ours
(-O3), the same for every release; everything runs through autopass's own commands, as a
user's CI would.  The measurement: interleaved rounds, each variant once per round in
shuffled order, CPU time of the run; each variant's ratio to -O3 with the 95 % interval
(Hodges-Lehmann on the paired log ratios, autopass's own statistics); every variant's
output must be -O3's.  Reported per later release: the speedups, how much of (c)'s gain
(a) and (b) keep on the log scale, and what --train cost against the plain build.
--train's cache of instrumented objects (capture/apply/train_cache.py) is kept from one release
to the next, as a CI keeping it would: release 3's instrumented build compiles only what
changed since release 2 (release 2's compiles everything: release 1 was tuned, not
trained).

With --counts, each later release also gets one cachegrind run of each variant: its
instructions and simulated I1 misses against -O3's, and whether (a)'s or (b)'s .text is
(c)'s byte for byte.  Those do not move with the machine, so they tell (b) from (c) where
20 rounds of noisy times cannot (a 16 % gain measured to +-8 %).

Usage: python bench/release_history.py [--programs lua,sqlite,brotli] [--time 4m]
       [--rounds 20] [--stages bolt] [--counts] [--first VERSION]
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import math
import os
import random
import re
import resource
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.request
import zipfile
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from autopass_build.measuring.stats import estimate  # noqa: E402

CACHE = Path(os.environ.get("AUTOPASS_BENCH_CACHE",
                            Path.home() / ".cache" / "autopass")) / "pypi"
AUTOPASS = str(Path(sys.executable).parent / "autopass")
STAGES: tuple[str, ...] = ()   # [tune].stages for every tune (--stages); () all
COUNTS = False                 # also the deterministic counts (--counts)
SHIPPED = ("autopass.flags.json", "autopass.profdata", "autopass.fdata", "autopass.bolt.yaml")


@dataclass(frozen=True)
class Release:
    version: str          # the program's own
    sdist: str            # the package that bundles it: PyPI's NAME==V, or npm:NAME@V
    folder: str           # the sources inside the package, relative to its top folder


@dataclass(frozen=True)
class Program:
    name: str
    binary: str
    releases: tuple[Release, ...]
    makefile: str
    run: tuple[str, ...]  # the benchmark, "{exe}" for the binary


BROTLI_MAKE = """\
CC ?= cc
CFLAGS ?= -O3
SRCS := $(sort $(wildcard c/common/*.c c/dec/*.c c/enc/*.c)) c/tools/brotli.c
OBJS := $(SRCS:.c=.o)
brotli: $(OBJS)
\t$(CC) $(CFLAGS) -o $@ $(OBJS) -lm
%.o: %.c
\t$(CC) $(CFLAGS) -Ic/include -c $< -o $@
clean:
\trm -f brotli $(OBJS)
"""
LUA_MAKE = """\
CC ?= cc
CFLAGS ?= -O3
CORE := $(sort $(filter-out lua.c luac.c onelua.c,$(wildcard *.c)))
OBJS := $(CORE:.c=.o) lua.o
lua: $(OBJS)
\t$(CC) $(CFLAGS) -o $@ $(OBJS) -lm -ldl
%.o: %.c
\t$(CC) $(CFLAGS) -DLUA_COMPAT_5_3 -DLUA_USE_LINUX -c $< -o $@
clean:
\trm -f lua $(OBJS)
"""
SQLITE_MAKE = """\
CC ?= cc
CFLAGS ?= -O3
OBJS := sqlite3.o sqlite_driver.o
sqlite-driver: $(OBJS)
\t$(CC) $(CFLAGS) -o $@ $(OBJS) -lm
%.o: %.c
\t$(CC) $(CFLAGS) -DSQLITE_THREADSAFE=0 -DSQLITE_OMIT_LOAD_EXTENSION -c $< -o $@
clean:
\trm -f sqlite-driver $(OBJS)
"""
PROGRAMS = {
    "brotli": Program("brotli", "brotli", (
        Release("1.0.7", "brotli==1.0.7", "."), Release("1.0.9", "brotli==1.0.9", "."),
        Release("1.1.0", "brotli==1.1.0", ".")), BROTLI_MAKE,
        ("{exe}", "-q", "9", "-c", "corpus.txt")),
    "lua": Program("lua", "lua", (
        Release("5.4.4", "lupa==2.0", "third-party/lua54"),
        Release("5.4.7", "lupa==2.4", "third-party/lua54"),
        Release("5.4.8", "lupa==2.6", "third-party/lua54")), LUA_MAKE,
        ("{exe}", "lua_mix.lua", "8")),
    "sqlite": Program("sqlite", "sqlite-driver", (
        Release("3.43.2", "npm:better-sqlite3@9.0.0", "deps/sqlite3"),
        Release("3.45.3", "npm:better-sqlite3@10.0.0", "deps/sqlite3"),
        Release("3.46.0", "npm:better-sqlite3@11.0.0", "deps/sqlite3")), SQLITE_MAKE,
        ("{exe}", "sqlite_mix.sql")),
}


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


# ---- sources -----------------------------------------------------------------------------
def sdist(requirement: str) -> Path:
    """The sdist of `requirement` (NAME==VERSION), from PyPI's simple index, or the npm
    package of npm:NAME@VERSION (`npm pack`), cached."""
    if requirement.startswith("npm:"):
        name, version = requirement[4:].rsplit("@", 1)
        found = CACHE / f"{name}-{version}.tgz"
        if not found.is_file():
            CACHE.mkdir(parents=True, exist_ok=True)
            subprocess.run(["npm", "pack", f"{name}@{version}", "--silent"], cwd=CACHE,
                           check=True, capture_output=True)
        return found
    name, version = requirement.split("==")
    CACHE.mkdir(parents=True, exist_ok=True)
    for found in CACHE.glob(f"*-{version}.*"):
        if found.name.lower().startswith(name.lower() + "-"):
            return found
    with urllib.request.urlopen(f"https://pypi.org/simple/{name}/", timeout=60) as page:
        index = page.read().decode()
    pattern = rf'href="(https://[^"#]*/{name}-{re.escape(version)}\.(?:tar\.gz|zip))'
    url = re.search(pattern, index, re.IGNORECASE)
    if not url:
        raise SystemExit(f"no sdist of {requirement} on PyPI")
    target = CACHE / url.group(1).rsplit("/", 1)[1]
    urllib.request.urlretrieve(url.group(1), target)
    return target


def unpack(program: Program, release: Release, work: Path) -> Path:
    """The release's sources in a tree of their own, with our Makefile, the workload
    and autopass.toml."""
    archive = sdist(release.sdist)
    tree = work / f"{program.name}-{release.version}"
    shutil.rmtree(tree, ignore_errors=True)
    with tempfile.TemporaryDirectory() as scratch:
        if archive.suffix == ".zip":
            zipfile.ZipFile(archive).extractall(scratch)
        else:
            with tarfile.open(archive) as tar:
                tar.extractall(scratch, filter="data")
        top = next(Path(scratch).iterdir())
        source = top / release.folder
        if program.name == "brotli":
            shutil.copytree(source / "c", tree / "c")
        else:
            shutil.copytree(source, tree)
    for theirs in ("GNUmakefile", "makefile"):    # make would read these before ours
        (tree / theirs).unlink(missing_ok=True)
    (tree / "Makefile").write_text(program.makefile)
    workload(program, tree)
    run = ", ".join(json.dumps(token) for token in program.run)
    (tree / "autopass.toml").write_text(
        f'[build]\ncommand = "make -j2"\nclean = "make clean"\n\n[run]\ncommand = [{run}]\n'
        'timeout = 120\n\n[check]\nmode = "output"\n\n[measure]\nmetric = "cpu"\n'
        + (f"\n[tune]\nstages = {json.dumps(list(STAGES))}\n" if STAGES else ""))
    return tree


def workload(program: Program, tree: Path) -> None:
    if program.name == "sqlite":
        for name in ("sqlite_mix.sql", "sqlite_driver.c"):
            shutil.copyfile(HERE / "workloads" / name, tree / name)
        return
    if program.name == "lua":
        shutil.copyfile(HERE / "workloads" / "lua_mix.lua", tree / "lua_mix.lua")
        return
    # English-like text from a fixed seed: Zipf-distributed words, punctuation, lines
    rng = random.Random(46)
    words = ["".join(rng.choice("etaoinshrdlcumwfgypbvkjxqz") for _ in range(rng.randint(1, 9)))
             for _ in range(5000)]
    weights = [1 / (rank + 1) for rank in range(len(words))]
    out, size = [], 0
    while size < 3_000_000:
        line = " ".join(rng.choices(words, weights, k=rng.randint(6, 16))) + ".\n"
        out.append(line)
        size += len(line)
    (tree / "corpus.txt").write_text("".join(out))


# ---- builds ------------------------------------------------------------------------------
def sh(argv: list[str], tree: Path, env: dict | None = None) -> tuple[float, str]:
    started = time.monotonic()
    done = subprocess.run(argv, cwd=tree, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} in {tree} failed:\n{done.stdout[-2000:]}\n"
                         f"{done.stderr[-2000:]}")
    return time.monotonic() - started, done.stdout + done.stderr


def clang_env() -> dict:
    env = dict(os.environ)
    env["CC"] = shutil.which("clang-19") or "clang"
    return env


def plain(program: Program, tree: Path, keep: Path) -> float:
    """The -O3 build with plain clang: its wall time; the binary kept as `keep`."""
    sh(["make", "clean"], tree)
    seconds, _ = sh(["make", "-j2"], tree, clang_env())
    shutil.copy2(tree / program.binary, keep)
    return seconds


def tune(tree: Path, limit: str) -> str:
    """record + tune on this release: what tune chose (its last words)."""
    shutil.rmtree(tree / ".autopass", ignore_errors=True)
    for name in SHIPPED:
        (tree / name).unlink(missing_ok=True)
    sh(["make", "clean"], tree)
    sh([AUTOPASS, "record", "--", "make", "-j2"], tree)
    _, said = sh([AUTOPASS, "tune", "--time", limit], tree)
    wrote = [line for line in said.splitlines() if "wrote" in line]
    return wrote[-1].strip() if wrote else said.strip().splitlines()[-1]


def database(tree: Path) -> dict | None:
    """The flags database tune wrote in `tree` (its stages and entries), for the report's
    JSON: which entries a tune kept is the evidence the entry policy needs."""
    path = tree / "autopass.flags.json"
    return json.loads(path.read_text()) if path.is_file() else None


def applied(program: Program, tree: Path, keep: Path, *options: str) -> tuple[float, str]:
    sh(["make", "clean"], tree)
    seconds, said = sh([AUTOPASS, "apply", *options, "--", "make", "-j2"], tree)
    shutil.copy2(tree / program.binary, keep)
    notes = [line.strip() for line in said.splitlines() if line.startswith("autopass:")]
    return seconds, " | ".join(notes)[:1200]


def ship(source: Path, tree: Path) -> None:
    """The first release's database and profiles, committed beside this release."""
    for name in SHIPPED:
        if (source / name).is_file():
            shutil.copyfile(source / name, tree / name)
        else:
            (tree / name).unlink(missing_ok=True)


# ---- measurement -------------------------------------------------------------------------
def cpu_run(argv: list[str], tree: Path) -> tuple[float, str]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(argv, cwd=tree, capture_output=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{argv} failed: {done.stderr[-500:]!r}")
    seconds = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return seconds, hashlib.sha256(done.stdout).hexdigest()


def cachegrind(program: Program, tree: Path, binary: Path, counter: str,
               cache_sim: bool = False) -> tuple[int, bytes]:
    """One run of the benchmark under cachegrind: the count its summary gives for
    `counter` ("I refs", "I1 misses"; the cache simulated for the latter), and the
    program's output."""
    counts, output = cachegrind_counts(program, tree, binary, (counter,), cache_sim)
    return counts[counter], output


def cachegrind_counts(program: Program, tree: Path, binary: Path, counters: tuple[str, ...],
                      cache_sim: bool = False) -> tuple[dict[str, int], bytes]:
    """One run under cachegrind: each of `counters` from its summary, and the output."""
    argv = ["valgrind", "--tool=cachegrind", f"--cache-sim={'yes' if cache_sim else 'no'}",
            "--cachegrind-out-file=/dev/null"] + [
        token.replace("{exe}", str(binary)) for token in program.run]
    done = subprocess.run(argv, cwd=tree, capture_output=True)
    counts = {}
    for counter in counters:
        pattern = r"\s+".join(map(re.escape, counter.split())).encode() + rb":\s+([\d,]+)"
        found = re.search(pattern, done.stderr)
        if done.returncode != 0 or found is None:
            raise SystemExit(f"cachegrind failed on {binary}: {done.stderr[-800:]!r}")
        counts[counter] = int(found.group(1).replace(b",", b""))
    return counts, done.stdout


def code_digest(binary: Path) -> str:
    """The SHA-256 of the binary's .text: two builds with the same digest run the same
    machine code, so their gains differ only by the noise of measuring them."""
    from elftools.elf.elffile import ELFFile

    with open(binary, "rb") as file:
        text = ELFFile(file).get_section_by_name(".text")
        return hashlib.sha256(text.data()).hexdigest() if text is not None else ""


def counted(program: Program, tree: Path, binaries: dict[str, Path]) -> dict:
    """The deterministic side of the comparison: one cachegrind run of each variant
    (instructions, simulated I1 misses), each variant's ratio to -O3's counts, and
    whether each variant's machine code is (c)'s, byte for byte."""
    counters = ("I refs", "I1 misses")
    found = {name: cachegrind_counts(program, tree, binary, counters, cache_sim=True)[0]
             for name, binary in binaries.items()}
    digests = {name: code_digest(binary) for name, binary in binaries.items()}
    return {name: {"instructions": found[name]["I refs"], "i1_misses": found[name]["I1 misses"],
                   "instructions_speedup": found["-O3"]["I refs"] / found[name]["I refs"],
                   "same_code_as_c": digests[name] == digests.get("(c) tuned")}
            for name in binaries}


def measure(program: Program, tree: Path, binaries: dict[str, Path], rounds: int) -> dict:
    """Interleaved rounds; each variant against "-O3": speedup [low, high]."""
    times: dict[str, list[float]] = {name: [] for name in binaries}
    outputs: dict[str, set[str]] = {name: set() for name in binaries}
    order = list(binaries)
    rng = random.Random(7)
    for _ in range(rounds):
        rng.shuffle(order)
        for name in order:
            argv = [token.replace("{exe}", str(binaries[name])) for token in program.run]
            seconds, digest = cpu_run(argv, tree)
            times[name].append(seconds)
            outputs[name].add(digest)
    reference = outputs["-O3"]
    result = {}
    for name in binaries:
        if name == "-O3":
            continue
        found = estimate(times["-O3"], times[name])
        speedup, low, high = found.speedup()
        result[name] = {"speedup": speedup, "low": low, "high": high,
                        "same_output": outputs[name] == reference}
    result["-O3 seconds"] = sorted(times["-O3"])[len(times["-O3"]) // 2]
    return result


def kept(part: float, whole: float) -> float | None:
    """The share of `whole`'s gain that `part` keeps, on the log scale."""
    if whole <= 1.0:
        return None
    return math.log(part) / math.log(whole)


# ---- the run -----------------------------------------------------------------------------
def run_program(program: Program, work: Path, limit: str, rounds: int) -> list[dict]:
    rows = []
    first = program.releases[0]
    bins = work / "bins"
    bins.mkdir(exist_ok=True)
    log(f"{program.name} {first.version}: record + tune --time {limit}")
    tree0 = unpack(program, first, work)
    chose0 = tune(tree0, limit)
    log(f"{program.name} {first.version}: {chose0}")
    if not (tree0 / "autopass.flags.json").is_file():
        log(f"{program.name}: tune kept nothing on {first.version}: no gain to carry")
        return [{"program": program.name, "release": first.version, "tuned": chose0}]
    o3 = bins / f"{program.name}-{first.version}-O3"
    plain(program, tree0, o3)
    tuned0 = bins / f"{program.name}-{first.version}-tuned"
    applied(program, tree0, tuned0)
    log(f"{program.name} {first.version}: measuring")
    rows.append({"program": program.name, "release": first.version, "tuned": chose0,
                 "database": database(tree0),
                 **measure(program, tree0, {"-O3": o3, "(c) tuned": tuned0}, rounds)})
    for release in program.releases[1:]:
        tree = unpack(program, release, work)
        name = f"{program.name}-{release.version}"
        log(f"{name}: -O3, (a) as is, (b) --train")
        plain_seconds = plain(program, tree, bins / f"{name}-O3")
        ship(tree0, tree)
        apply_seconds, said_a = applied(program, tree, bins / f"{name}-a")
        entries = len(json.loads((tree / "autopass.flags.json").read_text())["entries"])
        if entries:     # the policy question: do entries measured on the old source help?
            applied(program, tree, bins / f"{name}-a+", "--policy", "apply-anyway")
        train_seconds, said_b = applied(program, tree, bins / f"{name}-b", "--train")
        log(f"{name}: (b) said {said_b[-300:]}")
        log(f"{name}: (c) record + tune --time {limit}")
        chose = tune(tree, limit)
        log(f"{name}: {chose}")
        applied(program, tree, bins / f"{name}-c")
        log(f"{name}: measuring")
        variants = {"-O3": bins / f"{name}-O3", "(a) as is": bins / f"{name}-a",
                    "(b) retrained": bins / f"{name}-b", "(c) tuned": bins / f"{name}-c"}
        if entries:
            variants["(a+) stale entries applied"] = bins / f"{name}-a+"
        found = measure(program, tree, variants, rounds)
        if COUNTS:
            log(f"{name}: one cachegrind run of each variant")
            found["counts"] = counted(program, tree, variants)
        training = sum(float(s) for s in re.findall(r"training ([\d.]+) s", said_b))
        cached = re.search(r"compiles from the cache: instrumented (\d+ of \d+)", said_b)
        rows.append({"program": program.name, "release": release.version, "tuned": chose,
                     "database": database(tree), "entries_shipped": entries,
                     "apply_said": said_a, "train_said": said_b,
                     "plain_build_s": round(plain_seconds, 1),
                     "apply_s": round(apply_seconds, 1),
                     "train_s": round(train_seconds, 1), "training_runs_s": round(training, 1),
                     "instrumented_from_cache": cached.group(1) if cached else "",
                     **found})
        log(report([rows[-1]]))
    return rows


def report(rows: list[dict]) -> str:
    out = []
    for row in rows:
        if "-O3 seconds" not in row:
            out.append(f"{row['program']} {row['release']}: tune kept nothing ({row['tuned']})")
            continue
        cells = []
        for name in ("(a) as is", "(a+) stale entries applied", "(b) retrained", "(c) tuned"):
            if name in row:
                r = row[name]
                flag = "" if r["same_output"] else " OUTPUT DIFFERS"
                cells.append(f"{name} {r['speedup']:.3f}x [{r['low']:.3f}, {r['high']:.3f}]{flag}")
        line = f"{row['program']} {row['release']} (-O3 {row['-O3 seconds']:.2f} s): " + "; ".join(cells)
        if "(a) as is" in row:
            whole = row["(c) tuned"]["speedup"]
            shares = {k: kept(row[k]["speedup"], whole) for k in ("(a) as is", "(b) retrained")}
            line += "; kept of (c)'s gain: " + ", ".join(
                f"{k[:3]} {v:.0%}" if v is not None else f"{k[:3]} n/a (c) no gain"
                for k, v in shares.items())
            cost = (row["train_s"] - row["training_runs_s"]) / row["plain_build_s"]
            line += (f"; --train {row['train_s']} s = {cost:.2f}x the plain build "
                     f"({row['plain_build_s']} s) + {row['training_runs_s']} s of PGO training (BOLT's counted in) "
                     f"(the tuned build alone, `apply`: {row['apply_s']} s)")
            if row.get("instrumented_from_cache"):
                line += f"; {row['instrumented_from_cache']} instrumented from the cache"
            if "counts" in row:
                line += "\n  " + counts_report(row["counts"])
        out.append(line)
    return "\n".join(out)


def counts_report(counts: dict) -> str:
    """One line: each variant's instructions and I1 misses against -O3's, the share of
    (c)'s instruction gain (a) and (b) keep, and which variants run (c)'s very code."""
    base = counts["-O3"]
    cells = [f"-O3 {base['instructions'] / 1e9:.3f} G instructions, "
             f"{base['i1_misses'] / 1e6:.2f} M I1 misses"]
    whole = counts["(c) tuned"]["instructions_speedup"]
    for name, row in counts.items():
        if name == "-O3":
            continue
        share = kept(row["instructions_speedup"], whole) if name != "(c) tuned" else None
        cells.append(f"{name[:3]} {row['instructions_speedup']:.4f}x, "
                     f"{row['i1_misses'] / 1e6:.2f} M"
                     + (f", kept {share:.1%}" if share is not None else "")
                     + (", (c)'s code" if row["same_code_as_c"] and name != "(c) tuned" else ""))
    return "by cachegrind (instructions of -O3 / of each, I1 misses): " + "; ".join(cells)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     epilog=__doc__.split("\n\n", 1)[1],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--programs", default="lua,sqlite")
    parser.add_argument("--time", default="4m", help="each tune's time budget")
    parser.add_argument("--rounds", type=int, default=12, help="interleaved rounds")
    parser.add_argument("--out", default="release-history-out")
    parser.add_argument("--stages", default="",
                        help="the stages tune may choose from ([tune].stages), e.g. bolt "
                             "to measure what a stale BOLT profile keeps; default: all")
    parser.add_argument("--first", default="",
                        help="the release to tune on (its program's first by default); "
                             "the later ones are built from its database")
    parser.add_argument("--counts", action="store_true",
                        help="also one cachegrind run of each variant: instructions and "
                             "I1 misses against -O3's, and whether (a) or (b) is (c)'s "
                             "machine code (deterministic where the times are noisy)")
    args = parser.parse_args()
    global STAGES, COUNTS
    COUNTS = args.counts
    STAGES = tuple(s for s in args.stages.split(",") if s)
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    rows: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="autopass-releases-") as scratch:
        # --train's instrumented objects kept from one release to the next, as a CI that
        # keeps the cache does: a later release compiles only what changed instrumented
        os.environ["AUTOPASS_TRAIN_CACHE"] = os.path.join(scratch, "train-cache")
        for name in args.programs.split(","):
            program = PROGRAMS[name]
            versions = [release.version for release in program.releases]
            if args.first:
                if args.first not in versions:
                    parser.error(f"--first {args.first}: {name}'s releases are "
                                 f"{', '.join(versions)}")
                program = dataclasses.replace(
                    program, releases=program.releases[versions.index(args.first):])
            rows += run_program(program, Path(scratch), args.time, args.rounds)
            (out / "release_history.json").write_text(json.dumps(rows, indent=1))
    print(report(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
