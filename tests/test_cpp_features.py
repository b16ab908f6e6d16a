"""C++ as applications build it (issue 44), through the whole job: a shared library with
hidden visibility and a version script, exceptions and RTTI across it, COMDAT templates,
a precompiled header, a CMake unity build, and one source compiled into two programs
(tests/data/cpp-features, CMake + Ninja, Release).  Each is recorded, replayed to its
object, tuned with the LTO stages and applied, bit for bit (metric instructions)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from support import AUTOPASS

from autopass_build.core import flags_db
from autopass_build.store.index import Store
from autopass_build.store.targets import resolve

PROJECT = Path(__file__).parent / "data" / "cpp-features"
BUILD = "cmake -S . -B b -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null && ninja -C b >/dev/null"
CONFIG = f"""
[build]
command = "{BUILD}"
clean = "rm -rf b"
[run]
command = ["{{exe}}"]
target = "b/features"
[measure]
metric = "instructions"
min_pairs = 2
max_pairs = 2
[tune]
budget = 6
stages = ["lto", "thinlto"]
strategy = "random"
"""


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("cpp") / "features"
    shutil.copytree(PROJECT, root)
    done = subprocess.run([AUTOPASS, "record", "--", "sh", "-c", BUILD], cwd=root,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "recorded 7 units and 3 links" in done.stderr, done.stderr
    (root / "autopass.toml").write_text(CONFIG)
    return root


def test_every_kind_of_unit_is_recorded_and_replays_to_its_object(recorded) -> None:
    store = Store.open_existing(str(recorded / ".autopass"))
    sources = sorted(u.source_rel for u in store.units())
    assert sources == ["b/CMakeFiles/util.dir/Unity/unity_0_cxx.cxx", "src/common.cpp",
                       "src/common.cpp", "src/lite.cpp", "src/main.cpp",
                       "src/registry.cpp", "src/shapes.cpp"]
    assert all(u.opt_level == "-O3" for u in store.units())
    main = next(u for u in store.units() if u.source_rel == "src/main.cpp")
    assert "-include-pch" in " ".join(main.argv) or "-include" in main.argv
    targets = {t.output_rel: t for t in resolve(store, str(recorded))}
    assert sorted(targets["b/libshapes.so"].unit_sources) == ["src/registry.cpp",
                                                              "src/shapes.cpp"]
    assert targets["b/libshapes.so"].kind == "shared"
    assert "b/libshapes.so" in " ".join(targets["b/features"].shared_libraries)
    check = subprocess.run([AUTOPASS, "replay", "--check"], cwd=recorded,
                           capture_output=True, text=True)
    assert "7/7 units reproduce" in check.stdout, check.stdout + check.stderr


def test_tuned_with_lto_and_applied_bit_for_bit(recorded) -> None:
    expected = subprocess.run([recorded / "b" / "features"], capture_output=True,
                              check=True).stdout
    tune = subprocess.run([AUTOPASS, "tune"], cwd=recorded, capture_output=True, text=True)
    assert tune.returncode == 0, tune.stderr
    db = flags_db.load(str(recorded / "autopass.flags.json"))
    assert db.target is not None and db.target.stages in (("lto",), ("thinlto",)), \
        tune.stdout
    verify = subprocess.run([AUTOPASS, "verify"], cwd=recorded, capture_output=True,
                            text=True)
    assert verify.returncode == 0, verify.stderr
    assert "two clean tuned builds are bit-identical" in verify.stdout, verify.stdout
    ran = subprocess.run([recorded / "b" / "features"], capture_output=True, check=True)
    assert ran.stdout == expected          # exceptions, RTTI across the library: intact
