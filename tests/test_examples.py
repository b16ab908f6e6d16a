"""Record the bundled examples through their own build systems: byte-identical outputs."""

from __future__ import annotations

import shutil
import subprocess

import pytest
from support import (
    AUTOPASS,
    REPO,
    check_recorded,
    copy_example,
    env_with_autopass,
    sh,
    snapshot,
)


@pytest.mark.parametrize("jobs", ["-j2", "-j8"])
def test_make_example_records_byte_identical(tmp_path, clang, opt, jobs):
    root = copy_example("make-c", tmp_path)
    env = env_with_autopass()
    sh(["make", jobs, f"CC={clang}"], root, env)
    plain = snapshot(root, ("*.o", "*.a", "*.d", "dataproc"))
    assert len([p for p in plain if p.endswith(".o")]) == 11
    sh(["make", "clean"], root, env)
    out = sh([AUTOPASS, "record", "--", "make", jobs], root, env)
    assert "recorded 11 units and 1 link" in out
    assert snapshot(root, ("*.o", "*.a", "*.d", "dataproc")) == plain
    check_recorded(root, opt, "dataproc", 11)
    result = subprocess.run(["./dataproc"], cwd=root, capture_output=True, check=True)
    assert result.stdout == (root / "expected.txt").read_bytes()


def test_cmake_example_via_autopass_cmake_and_via_record(tmp_path, clangxx, opt):
    root = copy_example("cmake-cpp", tmp_path)
    env = env_with_autopass()
    configure = ["cmake", "-S", ".", "-B", "build", "-G", "Ninja"]
    sh(configure + [f"-DCMAKE_CXX_COMPILER={clangxx}"], root, env)
    sh(["cmake", "--build", "build"], root, env)
    plain = snapshot(root / "build", ("*.o", "*.a", "routeplan"))
    assert len([p for p in plain if p.endswith(".o")]) == 5

    shutil.rmtree(root / "build")
    out = sh(configure + [f"-DCMAKE_PROJECT_TOP_LEVEL_INCLUDES={REPO}/cmake/AutoPass.cmake"],
             root, env)
    assert "AutoPass: record mode" in out
    sh(["cmake", "--build", "build"], root, env)
    assert snapshot(root / "build", ("*.o", "*.a", "routeplan")) == plain
    check_recorded(root, opt, "build/routeplan", 5)
    # no `record --` command to take: init takes the CMake folder the compiles ran in
    said = sh([AUTOPASS, "init"], root, env)
    assert "(build: cmake --build build; clean: cmake --build build --target clean)" in said
    (root / "autopass.toml").unlink()

    shutil.rmtree(root / "build")
    shutil.rmtree(root / ".autopass")
    sh([AUTOPASS, "record", "--", "sh", "-c",
        "cmake -S . -B build -G Ninja && cmake --build build"], root, env)
    assert snapshot(root / "build", ("*.o", "*.a", "routeplan")) == plain
    check_recorded(root, opt, "build/routeplan", 5)
    result = subprocess.run(["build/routeplan"], cwd=root, capture_output=True, check=True)
    assert result.stdout == (root / "expected.txt").read_bytes()


def test_cli_units_and_targets_report_what_was_recorded(tmp_path, clang):
    root = copy_example("make-c", tmp_path)
    env = env_with_autopass()
    sh([AUTOPASS, "record", "--", "make", "-j2"], root, env)
    units = sh([AUTOPASS, "units"], root / "lib", env)   # the store is found upwards
    assert "lib/lz.c" in units and "11 units" in units
    targets = sh([AUTOPASS, "targets"], root, env)
    assert targets.startswith("dataproc (executable): 11 units")
    import json
    data = json.loads(subprocess.run([AUTOPASS, "targets", "--json"], cwd=root, env=env,
                                     capture_output=True, check=True).stdout)
    assert data[0]["kind"] == "executable" and len(data[0]["units"]) == 11
    assert "lib/libdp.a" in data[0]["archives"]


def test_cli_errors_name_the_problem_and_the_fix(tmp_path):
    env = env_with_autopass()
    result = subprocess.run([AUTOPASS, "units"], cwd=tmp_path, env=env, capture_output=True,
                            text=True)
    assert result.returncode == 2
    assert "no autopass store" in result.stderr and "autopass record --" in result.stderr
    result = subprocess.run([AUTOPASS, "record"], cwd=tmp_path, env=env, capture_output=True,
                            text=True)
    assert result.returncode == 2 and "give the build command after `--`" in result.stderr
    result = subprocess.run([AUTOPASS, "record", "--", "no-such-build-tool"], cwd=tmp_path,
                            env=env, capture_output=True, text=True)
    assert result.returncode == 2 and "build command not found" in result.stderr
    assert not (tmp_path / ".autopass").exists()     # no empty store made for it


def test_doctor_finds_the_toolchain():
    result = subprocess.run([AUTOPASS, "doctor"], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout
    assert "version 19." in result.stdout and "ok: LLVM 19" in result.stdout


def test_doctor_says_how_to_install_what_is_missing(tmp_path):
    env = {"PATH": str(tmp_path), "AUTOPASS_CC": str(tmp_path / "nope")}
    result = subprocess.run([AUTOPASS, "doctor", "--llvm-version", "7"], env=env,
                            capture_output=True, text=True)
    assert result.returncode == 1
    assert "MISSING" in result.stdout and "apt-get install clang-7 llvm-7" in result.stdout
    # the stages' tools are optional: a note naming the package, not an error
    assert "llvm-bolt missing: the BOLT stage is skipped" in result.stdout
    assert "apt-get install bolt-7" in result.stdout
    assert "error: missing" in result.stdout and "llvm-bolt" not in result.stdout.split(
        "error: missing")[1].splitlines()[0]
