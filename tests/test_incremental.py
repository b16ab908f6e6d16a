"""A candidate at the cost of what changed (issue 44): replay compiles a build's units
as many at once as the machine has cores, and a ThinLTO relink generates code again only
for the modules a candidate changed and those importing them (work/thinlto-cache)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from support import AUTOPASS, write

from autopass_build.candidates.replay import Replayer
from autopass_build.candidates.replay_args import thinlto_cache
from autopass_build.store.index import Store

UNITS = 6


def _thin_project(root: Path) -> Path:
    """A program of UNITS units, recorded as a ThinLTO build linked by lld."""
    calls = []
    for i in range(UNITS):
        write(root / f"u{i}.c", f"int f{i}(int x) {{ for (int k = 0; k < 50; k++) "
                                f"x = x * {i + 3} % 1009; return x; }}\n")
        calls.append(f"s += f{i}(i);")
    write(root / "main.c", "#include <stdio.h>\n"
          + "".join(f"int f{i}(int);\n" for i in range(UNITS))
          + "int main(void) { int s = 0; for (int i = 0; i < 1000; i++) { "
          + " ".join(calls) + " } printf(\"%d\\n\", s); return 0; }\n")
    sources = [f"u{i}.c" for i in range(UNITS)] + ["main.c"]
    build = " && ".join(f"cc -O2 -flto=thin -c {s}" for s in sources) \
        + " && cc -flto=thin -fuse-ld=lld -o app " + " ".join(s[:-2] + ".o" for s in sources)
    subprocess.run([AUTOPASS, "record", "--", "sh", "-c", build], cwd=root, check=True,
                   capture_output=True)
    return root / "app"


def _entries(folder: Path) -> set[str]:
    return {p.name for p in folder.glob("llvmcache-*")} if folder.is_dir() else set()


def test_a_thinlto_candidate_relinks_only_what_it_changed(tmp_path):
    app = _thin_project(tmp_path)
    store = Store.open_existing(str(tmp_path / ".autopass"))
    replayer = Replayer(store)
    cache = Path(replayer.work) / "thinlto-cache"
    baseline = replayer.build(str(app))
    first = _entries(cache)
    assert len(first) >= UNITS + 1            # one entry for each module's code
    leaf = next(u for u in store.units() if u.source_rel == "u3.c")
    candidate = replayer.build(str(app), {leaf.id: ("-mllvm", "-unroll-threshold=600")})
    new = _entries(cache) - first
    assert 1 <= len(new) <= 2, new            # u3.c, and main.c, which imports f3
    for built in (baseline, candidate):
        ran = subprocess.run([built.binary], capture_output=True, text=True, check=True)
        assert ran.stdout == subprocess.run([str(app)], capture_output=True,
                                            text=True).stdout


def test_the_cache_option_follows_the_links_lto_and_linker():
    assert thinlto_cache(["-flto=thin", "-fuse-ld=lld"], "/c")[0] == \
        "-Wl,--thinlto-cache-dir=/c"
    assert thinlto_cache(["-flto=thin", "--ld-path=/usr/bin/ld.lld-19"], "/c")[0] == \
        "-Wl,--thinlto-cache-dir=/c"
    assert thinlto_cache(["-flto=thin"], "/c")[0] == "-Wl,-plugin-opt,cache-dir=/c"  # GNU ld
    assert thinlto_cache(["-flto=thin", "-flto", "-fuse-ld=lld"], "/c") == []  # full LTO
    assert thinlto_cache(["-O2"], "/c") == []


def test_units_compiled_at_once_make_the_same_program(tmp_path):
    app = _thin_project(tmp_path)
    store = Store.open_existing(str(tmp_path / ".autopass"))
    flags = {u.id: ("-fno-lto",) for u in store.units()}      # machine code, no cache
    together = Replayer(store)
    together.jobs = 4
    one_by_one = Replayer(store)
    one_by_one.jobs = 1
    built = together.build(str(app), flags)
    assert together.stats.compiled == UNITS + 1
    binary = Path(built.binary).read_bytes()
    shutil.rmtree(built.folder)      # the other replayer compiles and links anew
    for unit in store.units():
        Path(one_by_one.object_for(unit, flags[unit.id])).unlink()
    assert Path(one_by_one.build(str(app), flags).binary).read_bytes() == binary
    assert one_by_one.stats.compiled == UNITS + 1
