#!/usr/bin/env python3
"""What the direct step (calls inside a project library bound to its own functions)
gives a real program whose code is in a shared library the project builds.

Lua 5.4 from Debian sources, built as a distribution builds it: the interpreter's core
and standard libraries in liblua.so (-O3 -fPIC), the `lua` program linked against it.
Its standard libraries call the exported C API (lua_pushinteger, lua_gettop, ...) for
nearly everything, and each such call inside the library goes through the PLT.

For each metric asked (default: instructions, then wall), `autopass tune` with the
direct step alone ([tune].stages = ["direct"], no search) measures the build with the
step against the build without it, side by side in one run (callgrind counts; or
interleaved pairs in wall time); then `autopass apply` rebuilds the tree, and the calls
through the PLT inside liblua.so are counted before and after.

Usage: python bench/direct_calls.py [--metrics instructions,wall] [--lua-size 1]
       python bench/direct_calls.py --metrics wall --on-top-of pgo,lto
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))
import debian_sources  # noqa: E402

from autopass_build.core import toolchain  # noqa: E402
from autopass_build.tuning.journal import Journal, Phase  # noqa: E402

AUTOPASS = str(Path(sys.executable).parent / "autopass")
# Lua's own build (its objects, liblua.a, lua and luac), then the library from every
# object but the two programs', the program against it.  (`make posix liblua.a` would
# run two makes on the same archive at once under -j2: ar died of it once.)
BUILD = ("make -j2 posix MYCFLAGS='-O3 -fPIC' >/dev/null && "
         "cc -shared -o liblua.so $(ls *.o | grep -v -e '^lua.o$' -e '^luac.o$') -lm && "
         "cc -o lua lua.o -L. -llua -Wl,-rpath,'$ORIGIN' -lm -ldl")
CONFIG = """[run]
command = ["{{exe}}", "{workload}"{size}]
timeout = 600
target = "lua"
[measure]
metric = "{metric}"
[tune]
strategy = "random"
budget = {budget}
stage_budget = {stage_budget}
stages = {stages}
"""


def plt_calls(library: Path) -> int:
    objdump = toolchain.find_tool("llvm-objdump") or "objdump"
    listing = subprocess.run([objdump, "-d", "--no-show-raw-insn", str(library)],
                             capture_output=True, text=True, check=True).stdout
    return len(re.findall(r"call.*<lua\w*@plt>", listing))


def run(argv: list[str], cwd: Path) -> subprocess.CompletedProcess:
    done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"{' '.join(argv)} failed:\n{done.stderr[-3000:]}")
    return done


def measure(metric: str, scratch: Path, size: str, under: list[str]) -> None:
    tree = debian_sources.fresh_copy("lua5.4", scratch / metric)
    src = tree / "src"
    workload = HERE / "workloads" / "lua_mix.lua"
    stages = under + ["direct"]
    (src / "autopass.toml").write_text(CONFIG.format(
        workload=workload, metric=metric, size=f', "{size}"' if size else "",
        stages=json.dumps(stages), budget=2 + 6 * bool(under), stage_budget=6 * bool(under)))
    run([AUTOPASS, "record", "--", "sh", "-c", BUILD], src)
    before = plt_calls(src / "liblua.so")
    print(f"[{metric}] recorded: liblua.so calls lua_* functions through the PLT "
          f"{before} times in its code", flush=True)
    tuned = run([AUTOPASS, "tune"], src)
    looks = [e for e in Journal.latest(str(src / ".autopass")).entries
             if e.phase in (Phase.STAGE, Phase.STAGE_CONFIRM) and e.stages.endswith("direct")]
    for look in looks:
        print(f"[{metric}] {look.phase}: {look.stages} against the build without direct: "
              f"{look.interval_text()} -> {look.verdict}", flush=True)
    if not looks:
        print(tuned.stderr[-2000:])
    run(["make", "clean"], src)
    run(["rm", "-f", "liblua.so"], src)
    run([AUTOPASS, "apply", "--", "sh", "-c", BUILD], src)
    print(f"[{metric}] after `autopass apply`: {plt_calls(src / 'liblua.so')} calls through "
          "the PLT", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--metrics", default="instructions,wall")
    parser.add_argument("--lua-size", default="", help="lua_mix.lua's size argument")
    parser.add_argument("--on-top-of", default="",
                        help="stages tune may choose before the step, e.g. pgo,lto: the step "
                             "is then measured on top of the composition it chose")
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="autopass-direct-"))
    under = [s for s in args.on_top_of.split(",") if s]
    try:
        for metric in args.metrics.split(","):
            measure(metric, scratch, args.lua_size, under)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
