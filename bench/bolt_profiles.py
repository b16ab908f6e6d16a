#!/usr/bin/env python3
"""Which BOLT profile lays a program out better on a VM without LBR (issue 60, item 2):
the one BOLT's own instrumentation counts, or cpu-clock samples aggregated without
branch records (`perf record -e cpu-clock`, `perf2bolt -nl`).

For each program (default: Lua and SQLite of the suite, cppcheck): the hand PGO+LTO
build (bench/hand_recipe.py, linked with --emit-relocs), then

    instrumented   llvm-bolt -instrument, the benchmark once, merge-fdata, llvm-bolt
    sampled        the benchmark under `perf record -e cpu-clock -F 9999` (--samples
                   runs of it), perf2bolt -nl, llvm-bolt

both with the layout options LLVM's BOLT guide recommends, measured in interleaved rounds
against the PGO+LTO build (CPU time; the output must be its own), and each once under
cachegrind with its instruction cache simulated (I1 misses: what layout changes).

Usage: python bench/bolt_profiles.py [--programs lua5.4,sqlite3,cppcheck] [--rounds 20]
           [--samples 3] [--out bolt-profiles-out]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))
import hand_recipe as hr  # noqa: E402

from autopass_build.core import bolt_commands  # noqa: E402  (finds llvm-bolt only)
from autopass_build.measuring.binaries import debugless_copy  # noqa: E402


def sampled_bolt(name: str, work: Path, built: hr.Variant, samples: int) -> hr.Variant:
    """BOLT from cpu-clock samples without branch records."""
    bolt = bolt_commands.tool()
    perf2bolt = os.path.join(os.path.dirname(bolt or ""), "perf2bolt")
    folder = work / "sampled-bolt"
    folder.mkdir()
    profiles = []
    for index in range(samples):
        data = folder / f"perf{index}.data"
        hr.run(["perf", "record", "-e", "cpu-clock", "-F", "9999", "-o", str(data), "--",
                *hr.benchmark_argv(name, built.binary, work)], built.tree,
               what=f"{name}: perf record")
        fdata = folder / f"perf{index}.fdata"
        hr.run([perf2bolt, "-nl", "-p", str(data), "-o", str(fdata), str(built.binary)], folder,
               what=f"{name}: perf2bolt -nl")
        profiles.append(str(fdata))
    merged = folder / "sampled.fdata"
    merge = bolt_commands.tool("merge-fdata")
    assert merge is not None and bolt is not None
    hr.run([merge, "-o", str(merged), *profiles], folder, what="merge-fdata")
    output = folder / built.binary.name
    hr.bolt_run([bolt, str(built.binary), "-o", str(output), f"-data={merged}",
                 *hr.BOLT_OPTIONS], folder, f"{name}: llvm-bolt (sampled)")
    return hr.Variant(built.tree, output, {})


def i1_misses(name: str, work: Path, variant: hr.Variant) -> tuple[int, int]:
    """(instructions, simulated I1 misses) of one run."""
    with tempfile.TemporaryDirectory(prefix="autopass-bolt-vg-") as folder:
        binary = debugless_copy(str(variant.binary), folder)   # valgrind and DWARF 5
        argv = ["valgrind", "--tool=cachegrind", "--cache-sim=yes",
                "--cachegrind-out-file=/dev/null", *hr.benchmark_argv(name, binary, work)]
        done = subprocess.run(argv, cwd=variant.tree, env={**os.environ, **variant.env},
                              capture_output=True)
    refs = re.search(rb"I\s+refs:\s+([\d,]+)", done.stderr)
    misses = re.search(rb"I1\s+misses:\s+([\d,]+)", done.stderr)
    if done.returncode != 0 or refs is None or misses is None:
        raise SystemExit(f"cachegrind failed on {variant.binary}: {done.stderr[-600:]!r}")
    return (int(refs.group(1).replace(b",", b"")), int(misses.group(1).replace(b",", b"")))


def run_program(name: str, work: Path, rounds: int, samples: int) -> dict:
    started = time.monotonic()
    hr.log(f"{name}: hand PGO+LTO")
    profile, _ = hr.hand_profile(name, work)
    tree, _ = hr.hand_build(name, work, "PGO-LTO",
                            f"-fprofile-use={profile} -flto -fuse-ld=lld -Wl,--emit-relocs")
    base = hr.variant(name, tree)
    variants = {"PGO+LTO": base}
    hr.log(f"{name}: BOLT from instrumentation")
    variants["+BOLT instrumented"] = hr.hand_bolt(name, work, base, "PGO+LTO")
    hr.log(f"{name}: BOLT from cpu-clock samples ({samples} runs)")
    variants["+BOLT sampled"] = sampled_bolt(name, work, base, samples)
    measured = hr.measure(name, work, variants, rounds, reference="PGO+LTO")
    counts = {label: i1_misses(name, work, v) for label, v in variants.items()}
    rows = {label: {**hr.ratio(measured["times"], "PGO+LTO", label),
                    "instructions": counts[label][0], "i1_misses": counts[label][1],
                    "same_output": measured["same_output"][label]}
            for label in variants if label != "PGO+LTO"}
    return {"program": name, "variants": rows, "base": {"instructions": counts["PGO+LTO"][0],
                                                        "i1_misses": counts["PGO+LTO"][1]},
            "minutes": round((time.monotonic() - started) / 60)}


def report(results: list[dict]) -> str:
    out = []
    for r in results:
        base = r["base"]
        out.append(f"\n{r['program']} (PGO+LTO: {base['instructions'] / 1e6:.1f} M instructions, "
                   f"{base['i1_misses'] / 1e6:.2f} M I1 misses)")
        for label, row in r["variants"].items():
            out.append(f"  {label:<20} {row['speedup']:.3f}x [{row['low']:.3f}, {row['high']:.3f}]"
                       f" over PGO+LTO; I1 misses {row['i1_misses'] / max(1, base['i1_misses']):.3f}"
                       f" of PGO+LTO's" + ("" if row["same_output"] else "; OUTPUT DIFFERS"))
    return "\n".join(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     epilog=__doc__.split("\n\n", 1)[1],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--programs", default="lua5.4,sqlite3,cppcheck")
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--samples", type=int, default=3, help="perf runs aggregated")
    parser.add_argument("--out", default="bolt-profiles-out")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    results: list[dict] = []
    started = time.monotonic()
    scratch = Path(tempfile.mkdtemp(prefix="autopass-boltprof-"))
    try:
        for name in args.programs.split(","):
            work = scratch / name
            work.mkdir()
            results.append(run_program(name, work, args.rounds, args.samples))
            (out / "bolt_profiles.json").write_text(json.dumps(
                {"results": results, "command": "python bench/bolt_profiles.py "
                 + " ".join(sys.argv[1:]), "date": time.strftime("%Y-%m-%d")}, indent=1))
            hr.log(report(results[-1:]))
            shutil.rmtree(work, ignore_errors=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print(report(results))
    print(f"\n{round((time.monotonic() - started) / 60)} min; wrote {out}/bolt_profiles.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
