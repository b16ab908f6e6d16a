"""Replay = apply, per knob: for every knob of the default space, on every unit of the
examples, the object replay builds equals the object a compile of the unit's source with
those flags appended produces (what apply mode does).  What we measure is what ships."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from support import AUTOPASS, EXAMPLES

from autopass_build.core import toolchain
from autopass_build.core.flags import replayable_from_ir
from autopass_build.instruments.fidelity import compare_objects
from autopass_build.instruments.replay import Replayer
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
    space = default_space(native=True)
    clang = toolchain.find_tool("clang")
    space = probe(space, clang, str(stores[0].dir) + "/probe", toolchain.stamp_of(clang))
    assert not space.notes, space.notes          # clang 19 takes every knob of the space
    started = time.monotonic()
    jobs = []
    for store in stores:
        replayer = Replayer(store)
        units = store.units()
        for knob in space.knobs:
            # Every unit at the knob's last value; the first unit at every value.
            for unit in units:
                values = knob.values[1:] if unit is units[0] else knob.values[-1:]
                jobs += [(replayer, unit, v) for v in values
                         if replayable_from_ir(v, unit.opt_level)]  # else built from source
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        mismatches = [why for why in pool.map(lambda job: _same(*job), jobs) if why]
    checked = len(jobs)
    assert checked > 250, checked
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
