"""Real Debian source packages built by their own build systems under record mode:
every object, library and binary byte-identical to a plain clang-19 build, every unit
captured, every IR valid, every binary mapped to its units.

Lua 5.4: a Makefile that hard-codes `CC= gcc -std=gnu99`, a static library.
libpng 1.6: autotools + libtool: configure probes, PIC and non-PIC compiles of every
source, a shared library and programs linked against it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support import AUTOPASS, BIN, REPO, verify_ir

sys.path.insert(0, str(REPO / "bench"))
import debian_sources  # noqa: E402

from autopass_build.candidates import fidelity  # noqa: E402
from autopass_build.candidates.replay import Replayer  # noqa: E402
from autopass_build.evidence.unit import Evidence  # noqa: E402
from autopass_build.store.index import Store  # noqa: E402
from autopass_build.store.targets import resolve  # noqa: E402

pytestmark = [pytest.mark.debian, pytest.mark.slow]   # builds of real programs: 10-40 s each


def _sh(argv, cwd, env):
    result = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result.stdout + result.stderr


def _outputs(folder: Path) -> dict[str, bytes]:
    """Objects, archives, shared libraries and executables (by the ELF magic)."""
    found = {}
    for path in folder.rglob("*"):
        if ".autopass" in path.parts or not path.is_file() or path.is_symlink():
            continue
        with open(path, "rb") as handle:
            if handle.read(4) in (b"\x7fELF", b"!<ar"):
                found[str(path.relative_to(folder))] = path.read_bytes()
    return found


def record_and_compare(program, tmp_path: Path, opt: str):
    tree = debian_sources.fresh_copy(program.package, tmp_path / program.package)
    build_dir = tree / program.build_dir
    env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ['PATH']}")
    for key in ("CC", "CXX", "AUTOPASS_STORE"):
        env.pop(key, None)
    _sh(list(program.plain_build), build_dir, env)
    plain = _outputs(build_dir)
    _sh(list(program.clean), build_dir, env)
    assert not [p for p in _outputs(build_dir) if p.endswith(".o")]

    out = _sh([AUTOPASS, "record", "--root", str(tree), "--"] + list(program.build),
              build_dir, env)
    assert _outputs(build_dir) == plain
    store = Store.open_existing(str(tree / ".autopass"))
    units = store.units()
    n_objects = len([p for p in plain if p.endswith(".o")])
    assert len(units) == n_objects, out
    assert store.log_lines() == []
    for unit in units:
        verify_ir(opt, tree / ".autopass", unit.ir_hash)
    results = fidelity.check(store)
    assert [(r.unit.source_rel, r.reason) for r in results if not r.reproduced] == []
    return tree, store, {t.output_rel: t for t in resolve(store, str(tree))}


def test_lua_makefile_build_records_byte_identical(tmp_path, opt):
    tree, store, targets = record_and_compare(debian_sources.LUA, tmp_path, opt)
    assert set(targets) == {"src/lua", "src/luac"}
    for target in targets.values():
        assert target.unmatched == []
    assert "src/lua.c" in targets["src/lua"].unit_sources
    assert "src/lapi.c" in targets["src/lua"].unit_sources  # through liblua.a
    result = subprocess.run(["src/lua", "-e", "print(string.format('%d', 6*7))"], cwd=tree,
                            capture_output=True, text=True, check=True)
    assert result.stdout == "42\n"
    replayer = Replayer(store)
    baseline = replayer.build(str(tree / "src/lua"), {})
    assert Path(baseline.binary).read_bytes() == (tree / "src/lua").read_bytes()
    lvm = [u for u in store.units() if u.source_rel == "src/lvm.c"][0]
    before = replayer.stats.compiled
    candidate = replayer.build(str(tree / "src/lua"), {lvm.id: ("-O3", "-funroll-loops")})
    assert replayer.stats.compiled - before == 1
    result = subprocess.run([candidate.binary, "-e", "print(6*7)"], capture_output=True,
                            text=True, check=True)
    assert result.stdout == "42\n"
    # The evidence for the interpreter's hot unit fits an LLM's budget and names what the
    # compiler missed in the interpreter loop.
    found = Evidence(store).unit_evidence(lvm)
    compact = json.dumps(found.to_json(), separators=(",", ":"))
    assert len(compact) < 24000  # ~6k tokens
    execute = found.remarks["luaV_execute"]
    assert any(entry["missed"] for entry in execute.values())
    assert any("inlined into luaV_execute" in r["message"] and "Cost" in r.get("numbers", {})
               for r in execute["inline"]["passed"])


def test_libpng_autotools_libtool_build_records_byte_identical(tmp_path, opt):
    """Recorded byte-identical, replayed byte-identical with its shared library, then
    applied through its own configure and make."""
    tree, store, targets = record_and_compare(debian_sources.LIBPNG, tmp_path, opt)
    units = store.units()
    png_c = [u for u in units if u.source_rel == "png.c"]
    assert sorted(os.path.relpath(u.output, tree) for u in png_c) == [".libs/png.o", "png.o"]
    [shared] = [t for name, t in targets.items() if name.startswith(".libs/libpng16.so")]
    assert shared.kind == "shared" and "png.c" in shared.unit_sources
    assert shared.unmatched == []
    pngfix = targets[".libs/pngfix"]
    assert pngfix.unit_sources == ["contrib/tools/pngfix.c"]
    assert any(lib.startswith(".libs/libpng16.so") for lib in pngfix.shared_libraries)
    # the program and the shared library it loads, rebuilt from IR: byte-identical
    replayer = Replayer(store)
    baseline = replayer.build(str(tree / ".libs/pngfix"), {})
    assert Path(baseline.binary).read_bytes() == (tree / ".libs/pngfix").read_bytes()
    real_so = os.path.realpath(tree / ".libs/libpng16.so")
    rebuilt_so = Path(baseline.folder) / os.path.basename(real_so)
    assert rebuilt_so.read_bytes() == Path(real_so).read_bytes()
    ldd = subprocess.run(["ldd", baseline.binary], env={**os.environ, **baseline.env},
                         capture_output=True, text=True, check=True).stdout
    assert f"{baseline.folder}/libpng16.so.16" in ldd  # found first
    # configure's probes went straight through: nothing recorded from conftest
    assert not [u for u in units if "conftest" in u.source]
    assert not [s for s in store.skipped() if "conftest" in " ".join(s.argv)]
    # the same tree, then built in apply mode (one recording for both: a libpng build
    # is 20 s here)
    _apply_mode_through_configure_and_make(tree)


def _apply_mode_through_configure_and_make(tree: Path) -> None:
    """Apply mode in an autotools build: configure's probes pass through untouched (same
    config.h), only png.c's two libtool objects (PIC and non-PIC) get the tuned flags."""
    plain = _outputs(tree)
    config_h = (tree / "config.h").read_bytes()
    from autopass_build.capture.apply.applier import compiler_id
    from autopass_build.core import toolchain
    from autopass_build.core.files import hash_file
    (tree / "autopass.flags.json").write_text(json.dumps({
        "schema": 1, "cpu": None,
        "toolchain": {"compiler": compiler_id(toolchain.find_tool("clang")), "target": ""},
        "entries": {"png.c": {"flags": ["-mllvm", "-align-all-functions=6"],
                              "source_hash": hash_file(str(tree / "png.c")), "why": "test",
                              "gain": {"metric": "cpu", "ratio": 0.95, "low": 0.9,
                                       "high": 0.99, "pairs": 10}}}}))
    env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ['PATH']}")
    _sh(list(debian_sources.LIBPNG.clean), tree, env)
    out = _sh([AUTOPASS, "apply", "--", "sh", "-c", "./configure -q && make -j2"], tree, env)
    assert "autopass: warning" not in out
    assert (tree / "config.h").read_bytes() == config_h
    tuned = _outputs(tree)
    objects = sorted(p for p in plain if p.endswith(".o"))
    assert sorted(p for p in tuned if p.endswith(".o")) == objects
    assert [p for p in objects if tuned[p] != plain[p]] == [".libs/png.o", "png.o"]
