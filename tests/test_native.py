"""The native stage (`tune --native`): -march=native on every unit, measured against the
build the link-time stages settled on, kept when verified faster, written to the
database's target section and rebuilt by apply mode; left out, with why, where the
metric cannot run its code (callgrind and AVX-512)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from support import AUTOPASS, recorded_copy

from autopass_build.candidates import stages
from autopass_build.core import flags_db, names, stage_flags
from autopass_build.core.cpu import Cpu, lacking, this_cpu
from autopass_build.core.files import hash_file
from autopass_build.core.names import SHIPPED_STAGES
from autopass_build.measuring.benchmark import native_unmeasurable
from autopass_build.tuning.journal import Journal, Phase

NATIVE_MINI = Path(__file__).parent / "data" / "native-mini"
CPU_FLAGS = next((line.split(":", 1)[1].split() for line in
                  Path("/proc/cpuinfo").read_text(errors="replace").splitlines()
                  if line.startswith("flags")), [])
CONFIG = """
[build]
command = "make -s"
clean = "make -s clean"
[run]
command = ["{exe}", "200000"]
[measure]
metric = "cpu"
min_pairs = 3
max_pairs = 10
[tune]
strategy = "random"
budget = 6
stages = ["lto"]
native = true
max_units = 1
"""


def test_the_native_stage_is_a_stage_only_with_native() -> None:
    assert names.SHIPPED_STAGES == tuple(s.value for s in stages.Stage)
    assert "native" not in names.STAGES                 # never tried by default
    native = stage_flags.flags(("pgo", "lto", "native"), "-O3", "-fprofile-instr-use=p")
    assert native.unit_flags == ("-fprofile-instr-use=p", "-march=native",
                                 "-ffp-contract=off", "-flto", "-ffat-lto-objects")
    assert stage_flags.flags(("native",), "-O2") == stage_flags.StageFlags(
        stage_flags.NATIVE_FLAGS, ())
    with pytest.raises(ValueError, match="tried with --native"):
        stages.parse("pgo,native")
    done = subprocess.run([AUTOPASS, "tune", "--stages", "native"], capture_output=True,
                          text=True)
    assert done.returncode != 0 and "tried with --native" in done.stderr
    assert "Traceback" not in done.stderr


def test_callgrind_cannot_measure_native_code_on_an_avx512_cpu(tmp_path) -> None:
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nflags\t\t: fpu sse2 avx2 avx512f avx512vl\n")
    why = native_unmeasurable("instructions", str(cpuinfo))
    assert "valgrind" in why and "AVX-512" in why and "--metric cpu" in why
    assert native_unmeasurable("cpu", str(cpuinfo)) == ""
    older = tmp_path / "cpuinfo-avx2"     # another machine (a file is read once a process)
    older.write_text("processor\t: 0\nflags\t\t: fpu sse2 avx2\n")
    assert native_unmeasurable("instructions", str(older)) == ""
    assert native_unmeasurable("instructions", str(tmp_path / "none")) == ""


@pytest.mark.skipif("avx512f" not in CPU_FLAGS, reason="only an AVX-512 CPU leaves it out")
def test_native_is_left_out_where_callgrind_measures(tmp_path) -> None:
    """F48 (docs/RELIABILITY.md)."""
    root = recorded_copy(NATIVE_MINI, tmp_path / "mini",
                         CONFIG.replace('"cpu"', '"instructions"').replace("200000", "20"))
    done = subprocess.run([AUTOPASS, "tune", "--budget", "2"], cwd=root,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert "-march=native left out: metric instructions runs the benchmark under valgrind" \
        in done.stderr
    journal = Journal.latest(str(root / ".autopass"))
    assert not any("native" in e.stages for e in journal.entries)
    assert not any("-march=native" in " ".join(e.flags.values()) for e in journal.entries)


@pytest.mark.skipif("avx2" not in CPU_FLAGS, reason="no wider vectors than x86-64's SSE2")
def test_native_on_top_of_the_stages_is_kept_and_apply_rebuilds_it(tmp_path) -> None:
    root = recorded_copy(NATIVE_MINI, tmp_path / "mini", CONFIG)
    done = subprocess.run([AUTOPASS, "tune"], cwd=root, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr
    journal = Journal.latest(str(root / ".autopass"))
    steps = {e.stages: e for e in journal.of_phase(Phase.STAGE, Phase.STAGE_CONFIRM)}
    [native] = [e for name, e in steps.items() if name.split("+")[-1] == "native"]
    # measured against the build without it (LTO when LTO was kept), and confirmed
    assert native.phase == Phase.STAGE_CONFIRM and native.verdict == "faster", \
        native.interval_text()
    assert native.ratio < 0.8          # vectors 2-4x wider in the loop that is the run
    before = native.stages.rpartition("+")[0] or "the recorded build"
    assert f"baseline: {native.stages}, {native.interval_text()} over {before};" in done.stderr
    db = flags_db.load(str(root / "autopass.flags.json"))
    assert db.target is not None and db.target.stages[-1] == "native"
    assert db.cpu                       # the database says which CPU it is for
    report = subprocess.run([AUTOPASS, "report"], cwd=root, capture_output=True, text=True)
    assert "-march=native on top: kept" in report.stdout
    assert f"baseline of the per-file search: {native.stages}" in report.stdout
    verify = subprocess.run([AUTOPASS, "verify", "--no-measure"], cwd=root,
                            capture_output=True, text=True, timeout=600)
    assert verify.returncode == 0, verify.stderr
    assert "two clean tuned builds are bit-identical" in verify.stdout
    # apply mode built the loop with this CPU's vectors: x86-64 alone has no ymm/zmm
    applied = subprocess.run([AUTOPASS, "apply", "--", "make", "-s", "-B"], cwd=root,
                             capture_output=True, text=True)
    assert applied.returncode == 0, applied.stderr
    code = subprocess.run(["objdump", "-d", "--no-show-raw-insn", str(root / "kern.o")],
                          capture_output=True, text=True, check=True).stdout
    assert "%ymm" in code or "%zmm" in code


def test_a_database_may_list_the_native_stage(tmp_path) -> None:
    path = tmp_path / "db.json"
    target = {"output": "x", "stages": ["lto", "native"], "opt_level": "-O3", "units": ["a.c"]}
    path.write_text(json.dumps({"schema": 1, "entries": {}, "target": target}))
    assert flags_db.load(str(path)).target.stages == ("lto", "native")
    target["stages"] = ["lto", "avx"]
    path.write_text(json.dumps({"schema": 1, "entries": {}, "target": target}))
    with pytest.raises(flags_db.FlagsDbError,
                       match=f"of {', '.join(SHIPPED_STAGES)}\\)"):
        flags_db.load(str(path))


def test_an_older_database_names_its_cpu_by_a_string_and_a_wrong_shape_is_refused(
        tmp_path) -> None:
    path = tmp_path / "db.json"
    path.write_text(json.dumps({"schema": 1, "entries": {}, "cpu": "x86_64"}))
    assert flags_db.load(str(path)).cpu == Cpu("x86_64", ())     # nothing to check
    for cpu in ({"model": "m"}, {"model": "m", "isa": "avx2"}, 3, ["avx2"]):
        path.write_text(json.dumps({"schema": 1, "entries": {}, "cpu": cpu}))
        with pytest.raises(flags_db.FlagsDbError, match='"cpu" must be null or'):
            flags_db.load(str(path))
    here = this_cpu()
    assert lacking(Cpu("m", here.isa), here) == [] and lacking(Cpu("m", ()), here) == []
    assert lacking(Cpu("m", here.isa + ("avx99",)), here) == ["avx99"]


@pytest.mark.skipif("avx2" not in CPU_FLAGS, reason="no wider vectors than x86-64's SSE2")
def test_native_code_is_left_out_on_a_cpu_that_lacks_what_it_was_tuned_for(tmp_path) -> None:
    """F49: a database tuned with --native on a CPU with an extension this one lacks (a
    build farm's older host): apply mode builds without -march=native, stage and entries,
    with one warning, so the program does not die of SIGILL; apply-anyway builds it."""
    root = recorded_copy(NATIVE_MINI, tmp_path / "mini", CONFIG)
    db = flags_db.empty()
    db.cpu = Cpu("a newer CPU", this_cpu().isa + ("avx99",))
    db.target = flags_db.TargetStages("nativemini", ("native",), "-O3", ("kern.c", "main.c"))
    db.entries["kern.c"] = flags_db.FlagsEntry(
        ("-march=native", "-ffp-contract=off"), hash_file(str(root / "kern.c")),
        flags_db.Gain("cpu", 0.5, 0.4, 0.6, 10), "by hand", "run")
    flags_db.save(str(root / "autopass.flags.json"), db)

    def vectors(*policy: str) -> tuple[bool, str]:
        done = subprocess.run([AUTOPASS, "apply", *policy, "--", "make", "-s", "-B"],
                              cwd=root, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        code = subprocess.run(["objdump", "-d", str(root / "kern.o")], capture_output=True,
                              text=True, check=True).stdout
        return "%ymm" in code or "%zmm" in code, done.stderr

    shown = subprocess.run([AUTOPASS, "db", "show"], cwd=root, capture_output=True, text=True)
    assert "tuned on a newer CPU (" in shown.stdout
    checked = subprocess.run([AUTOPASS, "db", "check"], cwd=root, capture_output=True,
                             text=True)
    assert checked.returncode == 1 and "whose avx99 this CPU lacks" in checked.stdout
    wide, said = vectors()
    assert not wide
    assert ("the database's native stage was tuned with -march=native on a newer CPU, "
            "whose avx99 this CPU lacks: building without -march=native") in said
    assert "kern.c: entry not applied: it was tuned with -march=native on a newer CPU" in said
    assert subprocess.run(["./nativemini", "3"], cwd=root, capture_output=True).returncode == 0
    wide, said = vectors("--policy", "apply-anyway")
    assert wide and "lacks" not in said


def test_a_native_object_is_cached_for_the_cpu_that_compiled_it(tmp_path, monkeypatch) -> None:
    """F99: cluster nodes share the store's object cache: -march=native compiled on a node of
    another CPU is code for that CPU, and must not be the object this machine (or a node
    of the target group) finds for the same flags.  Objects without it keep one key."""
    from autopass_build.candidates.replay import Replayer
    from autopass_build.core import cpu
    from autopass_build.store.index import Store

    root = recorded_copy(NATIVE_MINI, tmp_path / "mini", CONFIG)
    replayer = Replayer(Store.open_existing(str(root / ".autopass")))
    unit = next(iter(replayer.units.values()))
    native, plain = stage_flags.NATIVE_FLAGS, ("-O3",)
    here = {f: replayer._object_path(unit, f, None)[0] for f in (native, plain)}
    monkeypatch.setitem(cpu._read, cpu.CPUINFO, Cpu("Another CPU", ("sse2",)))
    there = {f: replayer._object_path(unit, f, None)[0] for f in (native, plain)}
    assert here[native] != there[native]
    assert here[plain] == there[plain]
