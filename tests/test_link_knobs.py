"""The link-level knobs (issue 60, item 4): options of the LTO link's own optimization and
code generation (ext-TSP block order, the inliner's threshold, the vectorizer by
bandwidth), where a unit's own -mllvm options no longer reach the code.  Each reaches
the code of a real LTO link, tune measures each on top of the build so far and keeps
what is faster, and apply builds it at the user's own link."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from support import AUTOPASS, TUNE_MINI_MEASURED, recorded_copy

from autopass_build.core import stage_flags, toolchain
from autopass_build.tuning.journal import Journal, Phase

LINK_KNOBS = Path(__file__).parent / "data" / "link-knobs"
CONFIG = TUNE_MINI_MEASURED.replace('"{exe}", "20"', '"{exe}", "20000"') + """[tune]
strategy = "random"
budget = 1
stages = ["lto", "inline", "bandwidth"]
"""


def test_the_knobs_go_to_the_lto_link_alone() -> None:
    full = stage_flags.flags(("pgo", "lto", "exttsp", "inline"), "-O2", "-fprofile-use=p")
    assert full.link_flags[-2:] == ("-Wl,-mllvm,-enable-ext-tsp-block-placement",
                                    "-Wl,-mllvm,-inline-threshold=500")
    assert "-Wl,-mllvm,-inline-threshold=500" not in full.unit_flags
    # without LTO the link makes no code: the per-file search holds these options
    plain = stage_flags.flags(("pgo", "exttsp", "inline", "bandwidth"), "-O2", "-fprofile-use=p")
    assert plain.link_flags == () and plain.unit_flags == ("-fprofile-use=p",)


def _text(binary: Path) -> bytes:
    """The code of `binary` (its .text section)."""
    from elftools.elf.elffile import ELFFile

    with open(binary, "rb") as handle:
        return ELFFile(handle).get_section_by_name(".text").data()


def _linked(folder: Path, stages: tuple[str, ...]) -> Path:
    """The fixture's two units compiled and linked with `stages`' flags, by clang and lld."""
    clang = toolchain.find_tool("clang")
    flags = stage_flags.flags(stages, "-O2", lld=toolchain.find_tool("ld.lld"))
    objects = []
    for unit in ("main", "work"):
        objects.append(str(folder / f"{unit}.o"))
        subprocess.run([clang, "-O2", *flags.unit_flags, "-c", str(LINK_KNOBS / f"{unit}.c"),
                        "-o", objects[-1]], check=True)
    binary = folder / ("-".join(stages) or "plain")
    subprocess.run([clang, "-O2", *flags.link_flags, "-o", str(binary), *objects], check=True)
    return binary


def _defines(binary: Path, function: str) -> bool:
    """Whether `binary`'s symbol table has `function` (not inlined into every caller)."""
    from elftools.elf.elffile import ELFFile

    with open(binary, "rb") as handle:
        return any(s.name == function for s in ELFFile(handle).get_section_by_name(".symtab")
                   .iter_symbols())


@pytest.mark.parametrize("lto", ["lto", "thinlto"])
def test_each_knob_reaches_the_code_of_the_lto_link(tmp_path, lto) -> None:
    built = {knob: _linked(tmp_path / knob, (lto, knob) if knob else (lto,))
             for knob in ("", "again", "exttsp", "inline", "bandwidth") if
             (tmp_path / knob).mkdir(parents=True, exist_ok=True) or True}
    answer = subprocess.run([str(built[""]), "2000"], capture_output=True, text=True).stdout
    for knob, binary in built.items():
        assert subprocess.run([str(binary), "2000"], capture_output=True, text=True
                              ).stdout == answer, knob
    plain = _text(built[""])
    assert _text(built["again"]) == plain            # the plain link gives the same code
    assert _text(built["exttsp"]) != plain           # blocks in another order
    assert _text(built["bandwidth"]) != plain        # the link's loops vectorized wider
    if lto == "lto":   # work() costs 425 to inline, over -O2's 225, under 500
        assert _defines(built[""], "work") and not _defines(built["inline"], "work")


def test_tune_keeps_the_knob_that_is_faster_and_apply_builds_it(tmp_path) -> None:
    root = recorded_copy(LINK_KNOBS, tmp_path / "knobs", CONFIG, ("make",))
    before = subprocess.run([str(root / "prog"), "20000"], capture_output=True, text=True).stdout
    done = subprocess.run([AUTOPASS, "tune"], cwd=root, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    looked = {e.stages: e for e in Journal.latest(str(root / ".autopass")).of_phase(Phase.STAGE)}
    # in instructions: more inlining is 4 % more here, the wider loops 0.5 % fewer
    assert looked["lto+inline"].verdict == "slower", done.stderr
    assert looked["lto+bandwidth"].verdict == "faster", done.stderr
    assert "inline" in done.stderr and "not kept" in done.stderr
    target = json.loads((root / "autopass.flags.json").read_text())["target"]
    assert target["stages"] == ["lto", "bandwidth"], target
    shown = subprocess.run([AUTOPASS, "db", "show"], cwd=root, capture_output=True, text=True)
    assert "prog: its LTO link with -mllvm -vectorizer-maximize-bandwidth" in shown.stdout, \
        shown.stdout
    subprocess.run(["make", "-s", "clean"], cwd=root, check=True)
    applied = subprocess.run([AUTOPASS, "apply", "--", "make", "-s"], cwd=root,
                             capture_output=True, text=True)
    assert applied.returncode == 0 and "warning" not in applied.stderr, applied.stderr
    assert subprocess.run([str(root / "prog"), "20000"], capture_output=True, text=True
                          ).stdout == before
    with_knob = _text(root / "prog")
    # the same database less the knob: another program, so the knob reached apply's link
    database = json.loads((root / "autopass.flags.json").read_text())
    database["target"]["stages"] = ["lto"]
    (root / "autopass.flags.json").write_text(json.dumps(database))
    subprocess.run(["make", "-s", "clean"], cwd=root, check=True)
    subprocess.run([AUTOPASS, "apply", "--", "make", "-s"], cwd=root, check=True,
                   capture_output=True)
    assert _text(root / "prog") != with_knob
    shutil.rmtree(root / ".autopass", ignore_errors=True)


def test_a_step_that_changes_what_a_library_exports_is_refused(tmp_path) -> None:
    """Each step on top but BOLT is held to the exports of the build without it (the
    program's and every project library's): the check itself, on libraries that differ
    only in one function's visibility."""
    from autopass_build.candidates.candidate import Candidate
    from autopass_build.candidates.exports import ExportsKept
    from autopass_build.core.outcome import EvaluationError, Outcome

    clang = toolchain.find_tool("clang")
    source = tmp_path / "lib.c"
    source.write_text("VIS int kept(void) { return 1; }\nint other(void) { return 2; }\n")
    main = tmp_path / "main.c"
    main.write_text("int main(void) { return 0; }\n")

    def built(name: str, visibility: str) -> Candidate:
        folder = tmp_path / name
        folder.mkdir()
        subprocess.run([clang, "-shared", "-fPIC", f"-DVIS={visibility}", str(source), "-o",
                        str(folder / "libwork.so")], check=True)
        subprocess.run([clang, str(main), "-o", str(folder / "prog")], check=True)
        return Candidate(str(folder / "prog"), str(folder))

    before = built("before", "")
    check = ExportsKept(lambda: before, "the inline step")
    same = built("same", "")
    assert check(same) is same
    hidden = built("hidden", '__attribute__((visibility("hidden")))')
    with pytest.raises(EvaluationError) as refused:
        check(hidden)
    assert refused.value.outcome == Outcome.POST_LINK_FAIL
    assert "the inline step changed what libwork.so exports (lost kept)" in str(refused.value)
