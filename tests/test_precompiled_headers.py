"""Precompiled headers (RELIABILITY F35): a source compiled against a PCH is a unit like any
other, the header's own compile is a quiet skip, and tuning never proposes the flags the
header fixes (-Os, -march), which fail to compile against it (clang: "__OPTIMIZE_SIZE__
predefined macro was disabled in PCH file but is currently enabled")."""

from __future__ import annotations

import subprocess
from pathlib import Path

from support import AUTOPASS, write

from autopass_build.core.outcome import Outcome
from autopass_build.tuning.journal import Journal, Phase

HEADER = "static inline unsigned step(unsigned x) { return x * 1103515245u + 12345u; }\n"
MAIN = """#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv) {
    unsigned x = 1, n = argc > 1 ? (unsigned)atoi(argv[1]) : 1000;
    for (unsigned i = 0; i < n; i++) x = step(x) ^ (x >> 3);
    printf("%u\\n", x);
    return 0;
}
"""
# The PCH built at -O3 the way a Makefile would (clang's own spelling, not CMake's).
BUILD = ("cc -O3 -x c-header all.h -o all.h.pch && "
         "cc -O3 -include-pch all.h.pch -c main.c -o main.o && cc main.o -o app")
CONFIG = """
[run]
command = ["{exe}", "3000000"]
[measure]
metric = "cpu"
min_pairs = 2
max_pairs = 2
[tune]
stages = []
native = true
max_units = 1
"""


def test_a_unit_compiled_with_a_precompiled_header_is_tuned_without_what_the_header_fixes(
        tmp_path: Path) -> None:
    root = tmp_path / "pch"
    write(root / "all.h", HEADER)
    write(root / "main.c", MAIN)
    done = subprocess.run([AUTOPASS, "record", "--", "sh", "-c", BUILD], cwd=root,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "recorded 1 unit and 1 link" in done.stderr
    assert "skipped" not in done.stderr          # the header's compile is not a loss
    write(root / "autopass.toml", f'[build]\ncommand = "{BUILD}"\n' + CONFIG)
    tune = subprocess.run([AUTOPASS, "tune", "--strategy", "random", "--budget", "8"],
                          cwd=root, capture_output=True, text=True, timeout=600)
    assert tune.returncode == 0, tune.stderr
    assert ("main.c is compiled with a precompiled header: the knobs march, opt keep only the values "
            "the header was built with") in tune.stderr
    searched = Journal.latest(str(root / ".autopass")).of_phase(Phase.SEARCH)
    tried = [" ".join(e.flags.values()) for e in searched]
    assert len(searched) >= 6, tried
    assert not any("-Os" in f.split() or "-march=native" in f for f in tried), tried
    assert all(e.outcome == Outcome.OK for e in searched), [e.interval_text() for e in searched]
