"""The direct step (issue 60, item 4): calls inside the project's shared libraries bound
to the library's own functions (-fno-semantic-interposition, -Bsymbolic-functions),
measured by tune on top of the build where the program loads such a library, and built
by apply at the library's own link: the PLT call is gone from the library that runs."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from support import AUTOPASS, TUNE_MINI_MEASURED, recorded_copy

from autopass_build.core import stage_flags
from autopass_build.tuning.journal import Journal, Phase

DIRECT_MINI = Path(__file__).parent / "data" / "direct-mini"
CONFIG = TUNE_MINI_MEASURED.replace('"{exe}", "20"', '"{exe}", "300"') + """[tune]
strategy = "random"
budget = 2
stages = ["direct"]
"""


def test_direct_flags_go_to_every_unit_and_every_link() -> None:
    flags = stage_flags.flags(("pgo", "thinlto", "direct"), "-O2", "-fprofile-use=p")
    assert flags.unit_flags[-1] == "-fno-semantic-interposition"
    assert flags.link_flags[-1] == "-Wl,-Bsymbolic-functions"
    assert stage_flags.flags(("pgo",), "-O2", "-fprofile-use=p").link_flags == ()


def plt_calls(library: Path) -> list[str]:
    """The calls to `step` in `library`'s code, as llvm-objdump prints their targets."""
    from autopass_build.core import toolchain

    objdump = toolchain.find_tool("llvm-objdump")
    assert objdump, "llvm-objdump is part of the toolchain this suite sets up"
    listing = subprocess.run([objdump, "-d", "--no-show-raw-insn", str(library)],
                             capture_output=True, text=True, check=True).stdout
    return [line.split("<", 1)[1].rstrip(">") for line in listing.splitlines()
            if "call" in line and "<step" in line]


def exports(library: Path) -> list[str]:
    """The functions and data `library` exports (its dynamic symbol table's definitions)."""
    from elftools.elf.elffile import ELFFile

    with open(library, "rb") as handle:
        table = ELFFile(handle).get_section_by_name(".dynsym")
        return sorted(f"{s.name} {s['st_info']['type']} {s['st_info']['bind']}"
                      for s in table.iter_symbols() if s["st_shndx"] != "SHN_UNDEF")


def test_tune_keeps_direct_calls_and_apply_builds_them_in_the_library(tmp_path) -> None:
    root = recorded_copy(DIRECT_MINI, tmp_path / "mini", CONFIG, ("make",))
    assert plt_calls(root / "libwork.so") == ["step@plt"]          # as the project builds it
    before = subprocess.run([str(root / "prog"), "300"], capture_output=True, text=True).stdout
    exported = exports(root / "libwork.so")
    done = subprocess.run([AUTOPASS, "tune"], cwd=root, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    looked = {e.stages: e for e in Journal.latest(str(root / ".autopass")).of_phase(Phase.STAGE)}
    assert looked["direct"].verdict == "faster", done.stderr     # one instruction less a call
    target = json.loads((root / "autopass.flags.json").read_text())["target"]
    assert target["stages"] == ["direct"] and target["libraries"] == ["libwork.so"], target
    shown = subprocess.run([AUTOPASS, "db", "show"], cwd=root, capture_output=True, text=True)
    assert "prog: stages direct" in shown.stdout and "libwork.so: linked with " \
        "-Bsymbolic-functions" in shown.stdout, shown.stdout
    subprocess.run(["make", "-s", "clean"], cwd=root, check=True)
    applied = subprocess.run([AUTOPASS, "apply", "--", "make", "-s"], cwd=root,
                             capture_output=True, text=True)
    assert applied.returncode == 0 and "warning" not in applied.stderr, applied.stderr
    assert plt_calls(root / "libwork.so") == ["step"]              # bound in the library
    assert exports(root / "libwork.so") == exported                  # what it exports: the same
    assert subprocess.run([str(root / "prog"), "300"], capture_output=True, text=True
                          ).stdout == before


def test_a_program_that_loads_no_project_library_skips_the_step(tmp_path) -> None:
    from support import recorded_tune_mini

    root = recorded_tune_mini(tmp_path / "mini", TUNE_MINI_MEASURED + '[tune]\nstrategy = '
                              '"random"\nbudget = 1\nstages = ["direct"]\n', profile=False)
    done = subprocess.run([AUTOPASS, "tune"], cwd=root, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "stage direct skipped: " in done.stderr and "loads no shared library" in done.stderr
    assert not Journal.latest(str(root / ".autopass")).of_phase(Phase.STAGE)
