"""Helpers the tests share: where the installed commands are, running them, a recording
store in a temporary project, small files and fake compilers.  Fixtures are in conftest.py."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from autopass_build.store.index import Store
from autopass_build.store.targets import resolve

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples"
BIN = Path(sys.executable).parent
AUTOPASS = str(BIN / "autopass")
AUTOPASS_CC = str(BIN / "autopass-cc")
AUTOPASS_CXX = str(BIN / "autopass-c++")


TUNE_MINI = Path(__file__).parent / "data" / "tune-mini"
# tune-mini's benchmark, measured in callgrind instructions (stable: two equal pairs
# decide); a test's config adds its [tune] to it.  The layout A/A (two relinks and two
# more counted runs per tune) is off: its own tests are tests/test_layout_spread.py, and
# tests/test_cpp_features.py runs it end to end.
TUNE_MINI_MEASURED = """
[run]
command = ["{exe}", "20"]
timeout = 60
[measure]
metric = "instructions"
layout_check = false
min_pairs = 2
max_pairs = 2
"""


def recorded_copy(source: Path, root: Path, config: str,
                  build: tuple[str, ...] = ("make", "-s")) -> Path:
    """A copy of the project `source` at `root`, recorded with `autopass record --
    <build>`, with `config` as its autopass.toml."""
    shutil.copytree(source, root)
    subprocess.run([AUTOPASS, "record", "--", *build], cwd=root, check=True,
                   capture_output=True)
    (root / "autopass.toml").write_text(config)
    return root


def recorded_sources(root: Path, files: dict[str, str], config: str) -> Path:
    """A throwaway project of `files` (name -> text, a Makefile among them) at `root`,
    recorded with `autopass record -- make -s`, with `config` as its autopass.toml."""
    source = root.parent / f"{root.name}-source"
    source.mkdir()
    for name, text in files.items():
        (source / name).write_text(text)
    return recorded_copy(source, root, config)


def recorded_tune_mini(root: Path, config: str, profile: bool = True) -> Path:
    """A copy of tests/data/tune-mini at `root`, recorded with `autopass record -- make`,
    with `config` as its autopass.toml and, when `profile`, `autopass profile` run."""
    recorded_copy(TUNE_MINI, root, config, ("make",))
    if profile:
        subprocess.run([AUTOPASS, "profile"], cwd=root, check=True, capture_output=True)
    return root


def fix_tune_mini_profile(root: Path) -> None:
    """A fixed profile of tune-mini (what callgrind reports for it), so that which units
    are tuned does not depend on a few perf samples of a 5 ms run (on a loaded machine
    perf saw warm.c too little, one unit was tuned, and a test that needs two failed)."""
    import json

    from autopass_build import config as cfg
    from autopass_build.measuring.benchmark import Benchmark
    (root / ".autopass" / "profile.json").write_text(json.dumps({
        "target": "mini", "method": "callgrind", "functions": [
            {"name": "hot_checksum", "share": 62.0, "units": ["hot.c"]},
            {"name": "warm_sort_blocks", "share": 31.0, "units": ["warm.c"]},
            {"name": "hot_scale", "share": 4.0, "units": ["hot.c"]}],
        "workload": Benchmark.from_config(cfg.load(str(root / "autopass.toml"))).workload()}))


@dataclass
class Ran:
    returncode: int
    stdout: bytes
    stderr: bytes


def run(argv: list, cwd: Path | str, env: dict | None = None, timeout: float = 300) -> Ran:
    result = subprocess.run([os.fsencode(a) if isinstance(a, bytes) else str(a) for a in argv],
                            cwd=cwd, env=env, capture_output=True, timeout=timeout,
                            stdin=subprocess.DEVNULL)
    return Ran(result.returncode, result.stdout, result.stderr)


@dataclass
class Recording:
    """A store in a temporary project, and the environment that records into it."""
    root: Path
    store_dir: Path
    env: dict

    def store(self) -> Store:
        return Store.open_existing(str(self.store_dir))

    def exists(self) -> bool:
        return (self.store_dir / "spool").is_dir()

    def units(self):
        return self.store().units() if self.exists() else []

    def skipped(self):
        return self.store().skipped() if self.exists() else []

    def links(self):
        return self.store().links() if self.exists() else []

    def log(self) -> list[str]:
        return Store(str(self.store_dir)).log_lines()


def recording_env(root: Path, store_dir: Path, clang: str, clangxx: str) -> dict:
    env = dict(os.environ)
    env.update({"AUTOPASS_STORE": str(store_dir), "AUTOPASS_ROOT": str(root),
                "AUTOPASS_MODE": "record", "AUTOPASS_CC": clang, "AUTOPASS_CXX": clangxx})
    return env


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def c_program(folder: Path, name: str, source: str, *flags: str) -> Path:
    """`source` compiled by clang 19 at -O1 into folder/name: a small program a test runs."""
    (folder / f"{name}.c").write_text(source)
    clang = shutil.which("clang-19") or "clang"
    subprocess.run([clang, "-O1", *flags, f"{name}.c", "-o", name], cwd=folder, check=True)
    return folder / name


def fake_compiler(directory: Path, name: str, body: str) -> str:
    """A shell script standing in for the compiler, for faults clang cannot produce."""
    path = directory / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return str(path)


def verify_ir(opt: str, store_dir: Path, ir_hash: str) -> None:
    with Store(str(store_dir)).blob_copy("ir", ir_hash, ".bc") as blob:
        result = subprocess.run([opt, "-passes=verify", "-disable-output", blob],
                                capture_output=True, text=True)
    assert result.returncode == 0, f"{blob} fails opt -passes=verify: {result.stderr}"


# -- the examples, built for real ---------------------------------------------------------
def copy_example(name: str, tmp_path: Path) -> Path:
    dest = tmp_path / name
    shutil.copytree(EXAMPLES / name, dest,
                    ignore=shutil.ignore_patterns("build", ".autopass", "*.o", "*.a", "*.d"))
    return dest


def sh(argv: list[str], cwd: Path, env: dict | None = None) -> str:
    result = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True)
    assert result.returncode == 0, f"{argv} failed:\n{result.stdout}\n{result.stderr}"
    return result.stdout + result.stderr


def snapshot(root: Path, patterns: tuple[str, ...]) -> dict[str, bytes]:
    files = {}
    for pattern in patterns:
        for path in root.rglob(pattern):
            if ".autopass" not in path.parts:
                files[str(path.relative_to(root))] = path.read_bytes()
    return files


def env_with_autopass() -> dict:
    env = dict(os.environ)
    env["PATH"] = f"{BIN}{os.pathsep}{env['PATH']}"
    for key in ("CC", "CXX", "AUTOPASS_STORE", "AUTOPASS_MODE"):
        env.pop(key, None)
    return env


def check_recorded(root: Path, opt: str, binary: str, n_units: int) -> None:
    store = Store.open_existing(str(root / ".autopass"))
    units = store.units()
    assert len(units) == n_units
    for unit in units:
        verify_ir(opt, root / ".autopass", unit.ir_hash)
    [target] = [t for t in resolve(store, str(root)) if t.output_rel == binary]
    assert sorted(target.unit_sources) == sorted(u.source_rel for u in units)
    assert target.unmatched == []
    assert store.log_lines() == []



def shipped_database(root: Path, output: str, units: tuple[str, ...],
                     stages: tuple[str, ...]) -> None:
    """root/autopass.flags.json as tune would have shipped it with `stages` for the
    binary `output`, as far as apply --train cares; the profiles it names are not there
    (a build that falls back to them builds without them, with a warning)."""
    from autopass_build.core import flags_db

    bolt_ref = flags_db.ProfileRef("autopass.fdata", "0" * 40) if "bolt" in stages else None
    db = flags_db.empty()
    db.target = flags_db.TargetStages(output, stages, "-O2", units, bolt=bolt_ref,
                                      bolt_binary="0" * 40 if bolt_ref else "")
    db.profile = flags_db.ProfileRef("autopass.profdata", "0" * 40) if "pgo" in stages else None
    db.toolchain = {"compiler": "", "target": ""}
    flags_db.save(str(root / "autopass.flags.json"), db)


@contextmanager
def tmpfs(folder: Path, size: str) -> Iterator[Path]:
    """`folder`, made and mounted as a tmpfs of `size` ("64m") for the block: a real full
    disk (mounting needs root, which CI has; elsewhere the test is skipped with why)."""
    folder.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", folder],
                             capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", folder], capture_output=True)
