"""Replay = apply, per knob: for every knob of the default space, on every unit of the
examples, the object replay builds equals the object a compile of the unit's source with
those flags appended produces (what apply mode does).  What we measure is what ships."""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from support import AUTOPASS, EXAMPLES

from autopass_build.candidates.fidelity import compare_objects
from autopass_build.candidates.replay import Replayer
from autopass_build.core import toolchain
from autopass_build.core.flags import replayable_from_ir, uses_precompiled_header
from autopass_build.store.index import Store
from autopass_build.tuning.space import default_space, probe


@pytest.fixture(scope="module")
def stores(tmp_path_factory) -> list[Store]:
    out = []
    make_c = tmp_path_factory.mktemp("space") / "make-c"
    shutil.copytree(EXAMPLES / "make-c", make_c,
                    ignore=shutil.ignore_patterns(".autopass", "*.o", "*.a", "*.d"))
    subprocess.run([AUTOPASS, "record", "--", "make", "-j2"], cwd=make_c, check=True,
                   capture_output=True)
    out.append(Store.open_existing(str(make_c / ".autopass")))
    cpp = tmp_path_factory.mktemp("space") / "cmake-cpp"
    shutil.copytree(EXAMPLES / "cmake-cpp", cpp, ignore=shutil.ignore_patterns(".autopass", "build"))
    subprocess.run([AUTOPASS, "record", "--", "sh", "-c",
                    "cmake -S . -B build -G Ninja >/dev/null && ninja -C build >/dev/null"],
                   cwd=cpp, check=True, capture_output=True)
    out.append(Store.open_existing(str(cpp / ".autopass")))
    return out


def _same(replayer: Replayer, unit, flags) -> str:
    replayed = Path(replayer.object_for(unit, flags)).read_bytes()
    applied = Path(replayer.object_for(unit, flags, from_source=True)).read_bytes()
    same, why = compare_objects(replayed, applied)
    return "" if same else f"{unit.source_rel} with {' '.join(flags)}: {why}"


@pytest.mark.slow
def test_every_knob_replays_as_it_applies(stores) -> None:
    space = default_space(native=True, lto=True)
    clang = toolchain.find_tool("clang")
    space = probe(space, clang, str(stores[0].dir) + "/probe", toolchain.stamp_of(clang))
    assert not space.notes, space.notes          # clang 19 takes every knob of the space
    started = time.monotonic()
    jobs = []
    for store in stores:
        replayer = Replayer(store)
        units = store.units()
        for k, knob in enumerate(space.knobs):
            # The first unit at every value; every other unit at the last value of every
            # sixth knob (each knob still on a sixth of the units: the suite's time kept)
            for i, unit in enumerate(units):
                if i > 0 and (i + k) % 6:
                    continue
                values = knob.values[1:] if i == 0 else knob.values[-1:]
                jobs += [(replayer, unit, v) for v in values
                         if replayable_from_ir(v, unit.opt_level)]  # else built from source
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        mismatches = [why for why in pool.map(lambda job: _same(*job), jobs) if why]
    checked = len(jobs)
    assert checked > 100, checked
    assert not mismatches, "\n".join(mismatches)
    print(f"{checked} knob values x units replayed = applied in {time.monotonic() - started:.0f}s")


def test_front_end_knobs_are_marked() -> None:
    space = {k.name: k for k in default_space(native=True).knobs}
    assert space["opt"].front_end("-O2")           # -O1/-Os set function attributes
    assert space["inline"].front_end("-O2")        # -fno-inline-functions adds noinline
    assert space["unroll"].front_end("-O2")        # -fno-unroll-loops adds loop metadata
    assert space["march"].front_end("-O2")         # target-cpu attributes
    assert not space["inline_threshold"].front_end("-O2")
    assert not space["vectorize"].front_end("-O2")
    lto = {k.name: k for k in default_space(lto=True).knobs}
    assert not lto["leave_lto"].front_end("-O2")   # the same IR, compiled to machine code


def test_a_precompiled_header_forbids_exactly_the_values_that_do_not_compile(tmp_path) -> None:
    """F35, with real clang: against a PCH built at -O3, every value of every knob compiles
    exactly when the unit's space allows it (-Os and -march=native do not)."""
    clang = toolchain.find_tool("clang")
    (tmp_path / "all.h").write_text("static inline int twice(int x) { return 2 * x; }\n")
    (tmp_path / "a.c").write_text("int f(int *a, int n) { int s = 0;"
                                  " for (int i = 0; i < n; i++) s += twice(a[i]); return s; }\n")
    subprocess.run([clang, "-O3", "-x", "c-header", "all.h", "-o", "all.h.pch"],
                   cwd=tmp_path, check=True)
    argv = ["-O3", "-include-pch", "all.h.pch", "-c", "a.c"]
    assert uses_precompiled_header(argv)
    assert uses_precompiled_header(["-Xclang", "-include-pch", "-Xclang", "x.pch", "-c", "a.c"])
    space = default_space(native=True).with_precompiled_header("-O3")
    forbidden = {(f.knob, i) for f in space.forbidden for i in f.values}
    assert {("opt", 4), ("march", 1), ("march", 2)} <= forbidden    # -Os, -march=native

    def compiles(tokens: tuple[str, ...], n: int) -> bool:
        done = subprocess.run([clang, *argv, *tokens, "-o", f"a{n}.o"], cwd=tmp_path,
                              capture_output=True)
        return done.returncode == 0

    values = [(k.name, i, v) for k in space.knobs for i, v in enumerate(k.values) if i]
    with ThreadPoolExecutor(4) as pool:
        built = list(pool.map(compiles, [v for _, _, v in values], range(len(values))))
    wrong = [(name, v) for (name, i, v), ok in zip(values, built) if ok == ((name, i) in forbidden)]
    assert not wrong, wrong
    rng = random.Random(0)
    assert all(space.valid(space.sample(rng)) for _ in range(200))
    point = list(space.default())
    point[[k.name for k in space.knobs].index("opt")] = 4
    assert not space.valid(tuple(point)) and space.valid(space.repair(tuple(point)))
    on_size = default_space().with_precompiled_header("-Os")      # a header built at -Os
    assert {f.knob: f.values for f in on_size.forbidden}["opt"] == frozenset({1, 2, 3})


_FUSABLE = """#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv) {
    double a = atof(argv[1]), b = atof(argv[2]), c = atof(argv[3]);
    printf("%.17g\\n", a * b + c);   /* one rounding with FMA, two without */
    return 0;
}
"""


@pytest.mark.skipif("fma" not in Path("/proc/cpuinfo").read_text(errors="replace").split(),
                    reason="this CPU has no FMA: -march=native fuses nothing")
def test_native_first_value_keeps_floating_point_results(tmp_path) -> None:
    """The native knob's first value keeps FP output as the recorded build computes it;
    -march=native alone fuses a*b+c on an FMA CPU and changes it."""
    clang = toolchain.find_tool("clang")
    source = tmp_path / "fuse.c"
    source.write_text(_FUSABLE)
    [knob] = [k for k in default_space(native=True).knobs if k.name == "march"]
    args = ("0.1", "10", "-1")    # 0.1*10 rounds to exactly 1.0; fused, the residue shows

    def output(*flags: str) -> str:
        exe = tmp_path / ("exe" + str(len(flags)) + "".join(f.strip("-=") for f in flags))
        subprocess.run([clang, "-O2", *flags, str(source), "-o", str(exe)], check=True)
        return subprocess.run([str(exe), *args], check=True, capture_output=True,
                              text=True).stdout

    recorded = output()
    assert output(*knob.values[1]) == recorded, knob.values[1]
    assert output(*knob.values[2]) != recorded, "expected FMA contraction to change it"
