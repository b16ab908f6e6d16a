"""A real Debian source package (Lua 5.4) built by its own Makefile under record mode:
every object and binary byte-identical to a plain clang-19 build, every unit captured."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import AUTOPASS, BIN, REPO, verify_ir

sys.path.insert(0, str(REPO / "bench"))
import debian_sources  # noqa: E402

from autopass_build.store import Store  # noqa: E402
from autopass_build.targets import resolve  # noqa: E402

pytestmark = pytest.mark.debian


def _make(argv, cwd, env):
    result = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result.stdout + result.stderr


def _objects(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in folder.iterdir()
            if p.suffix in (".o", ".a") or p.name in ("lua", "luac")}


def test_lua_from_debian_sources_records_byte_identical(tmp_path, opt):
    program = debian_sources.LUA
    tree = debian_sources.fresh_copy(program.package, tmp_path / "lua")
    build_dir = tree / program.build_dir
    env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ['PATH']}")
    _make(list(program.build) + list(program.plain_overrides) + ["-j2"], build_dir, env)
    plain = _objects(build_dir)
    assert len([n for n in plain if n.endswith(".o")]) >= 30
    _make(list(program.clean), build_dir, env)

    out = _make([AUTOPASS, "record", "--root", str(tree), "--"] + list(program.build) + ["-j2"],
                build_dir, env)
    assert _objects(build_dir) == plain
    store = Store.open_existing(str(tree / ".autopass"))
    units = store.units()
    n_objects = len([n for n in plain if n.endswith(".o")])
    assert len(units) == n_objects, out
    assert store.log_lines() == []
    for unit in units:
        verify_ir(opt, tree / ".autopass", unit.ir_hash)
    targets = {t.output_rel: t for t in resolve(store, str(tree))}
    assert set(targets) == {"src/lua", "src/luac"}
    for target in targets.values():
        assert target.unmatched == []
    assert "src/lua.c" in targets["src/lua"].unit_sources
    assert "src/lapi.c" in targets["src/lua"].unit_sources  # through liblua.a
    result = subprocess.run(["./lua", "-e", "print(string.format('%d', 6*7))"], cwd=build_dir,
                            capture_output=True, text=True, check=True)
    assert result.stdout == "42\n"
