"""Replay from IR and the measurement loop, on the recorded make-c example (real clang).

docs/RELIABILITY.md F4 (compiler crash/hang), F5 (benchmark hangs or forks), F6 (wrong output,
crash), F9 (SIGTERM) are here; F7 (noise) is in test_stats.py.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import psutil
import pytest
from support import AUTOPASS, EXAMPLES, fake_compiler, write

from autopass_build import config as cfg
from autopass_build.candidates import fidelity
from autopass_build.candidates.evaluate import (
    IDENTICAL,
    EvaluateError,
    Evaluator,
    parse_unit_flags,
)
from autopass_build.candidates.replay import Replayer
from autopass_build.core.outcome import EvaluationError, Outcome
from autopass_build.measuring.benchmark import Benchmark, MeasureError, run_once
from autopass_build.measuring.measure import compare
from autopass_build.measuring.stats import SAME, Estimate
from autopass_build.store.index import Store
from autopass_build.tuning.journal import Journal, Phase
from autopass_build.tuning.measuring import Measurements
from autopass_build.tuning.settings import RunSettings

CONFIG = """
[run]
command = ["{exe}", "1"]
timeout = 60
[measure]
min_pairs = 2
max_pairs = 2
"""


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("replay") / "make-c"
    shutil.copytree(EXAMPLES / "make-c", root,
                    ignore=shutil.ignore_patterns(".autopass", "*.o", "*.a", "*.d"))
    subprocess.run([AUTOPASS, "record", "--", "make", "-j2"], cwd=root, check=True,
                   capture_output=True)
    (root / "autopass.toml").write_text(CONFIG)
    (root / "expected-1.txt").write_bytes(
        subprocess.run([root / "dataproc", "1"], capture_output=True, check=True).stdout)
    return root


def store_of(project: Path) -> Store:
    return Store.open_existing(str(project / ".autopass"))


def unit_named(store: Store, source_rel: str):
    [unit] = [u for u in store.units() if u.source_rel == source_rel]
    return unit


def test_replay_check_reproduces_every_object(project):
    results = fidelity.check(store_of(project))
    assert len(results) == 11
    assert all(r.reproduced and r.reason == "" for r in results), \
        [(r.unit.source_rel, r.reason) for r in results if r.reason]
    out = subprocess.run([AUTOPASS, "replay", "--check"], cwd=project, capture_output=True,
                         text=True)
    assert out.returncode == 0 and "11/11 units reproduce" in out.stdout


def test_baseline_replay_is_the_recorded_binary_byte_for_byte(project):
    replayer = Replayer(store_of(project))
    baseline = replayer.build(str(project / "dataproc"), {})
    assert Path(baseline.binary).read_bytes() == (project / "dataproc").read_bytes()


def test_one_changed_unit_recompiles_exactly_one_unit(project):
    store = store_of(project)
    replayer = Replayer(store)
    replayer.build(str(project / "dataproc"), {})
    lz = unit_named(store, "lib/lz.c")
    before = (replayer.stats.compiled, replayer.stats.cached)
    candidate = replayer.build(str(project / "dataproc"), {lz.id: ("-O3", "-funroll-loops")})
    assert replayer.stats.compiled - before[0] == 1
    assert replayer.stats.cached - before[1] == 10
    assert Path(candidate.binary).read_bytes() != (project / "dataproc").read_bytes()
    out = subprocess.run([candidate.binary, "1"], capture_output=True, check=True).stdout
    assert out == (project / "expected-1.txt").read_bytes()


def test_front_end_flags_recompile_from_source(project):
    store = store_of(project)
    replayer = Replayer(store)
    nbody = unit_named(store, "lib/nbody.c")
    replayer.build(str(project / "dataproc"), {nbody.id: ("-ffast-math",)})
    assert replayer.stats.from_source == 1


def test_fast_math_on_the_float_unit_is_wrong_output(project):
    config = cfg.load(start=str(project))
    evaluator = Evaluator(store_of(project), config)
    flags = parse_unit_flags(["lib/nbody.c=-O2 -ffast-math"], evaluator.units)
    evaluation = evaluator.evaluate(flags)
    assert evaluation.outcome == Outcome.WRONG_OUTPUT
    assert "nbody: energy" in evaluation.detail


def test_a_candidate_identical_to_the_baseline_is_not_measured(project, tmp_path):
    """-fvectorize is on already: the candidate is the baseline's program byte for byte, so
    it is SAME at exactly 1.0 without a run, and the journal knows it was not measured
    (the tuner does not count it against the budget)."""
    config = cfg.load(start=str(project))
    evaluator = Evaluator(store_of(project), config)
    flags = parse_unit_flags(["lib/lz.c=-fvectorize"], evaluator.units)
    evaluation = evaluator.evaluate(flags)
    assert evaluation.outcome == Outcome.OK and evaluation.comparison is not None
    assert evaluation.comparison.verdict == SAME and evaluation.comparison.runs == 0
    assert evaluation.comparison.estimate == Estimate(1.0, 1.0, 1.0, 0, 1.0)
    assert evaluation.detail == IDENTICAL
    measured = evaluator.evaluate(flags, measure_identical=True).comparison   # an A/A
    assert measured is not None and measured.runs > 0 and measured.estimate.pairs == 2
    changed = evaluator.evaluate(parse_unit_flags(["lib/lz.c=-O1"], evaluator.units))
    assert changed.comparison is not None and changed.comparison.runs > 0
    journal = Journal.create(str(tmp_path), RunSettings(sources=("lib/lz.c",)))
    measurements = Measurements(journal, evaluator, config,
                                {"lib/lz.c": list(flags)}, lambda _: None)
    entry = measurements.measure(Phase.SEARCH, {"lib/lz.c": ("-fvectorize",)})
    assert entry.identical and entry.ratio == 1.0 and entry.timing.runs == 0
    assert Journal.latest(str(tmp_path)).entries[0].identical      # read back


def test_try_prints_a_verdict(project):
    out = subprocess.run([AUTOPASS, "try", "--flags", "lib/lz.c=-O3"], cwd=project,
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "outcome: OK" in out.stdout
    assert "wall: speedup " in out.stdout and "2 pairs" in out.stdout
    assert "verdict: " in out.stdout
    assert "candidate built: 1 of 11 units compiled, the rest from the cache" in out.stderr


@pytest.mark.parametrize("flags, message", [
    (["lib/lz.c=-fplugin=/tmp/x.so"], "rejected"),
    (["lib/nope.c=-O3"], "no unit 'lib/nope.c'"),
    (["lib/lz.c"], "SOURCE=FLAGS"),
])
def test_try_rejects_bad_flags_clearly(project, flags, message):
    config = cfg.load(start=str(project))
    evaluator = Evaluator(store_of(project), config)
    with pytest.raises(EvaluateError, match=message):
        parse_unit_flags(flags, evaluator.units)


def test_an_unknown_unit_in_a_large_binary_names_a_few_and_the_command_for_all(project):
    """glslang's 55 units made a 3,000-character line of one error: a dozen are named,
    then how many more and the command that lists them."""
    from dataclasses import replace

    [one] = [u for u in store_of(project).units() if u.source_rel == "lib/lz.c"]
    many = [replace(one, id=f"u{n}", source_rel=f"src/part{n:02}.c") for n in range(55)]
    with pytest.raises(EvaluateError) as error:
        parse_unit_flags(["nope.c=-O3"], many + [replace(one, id="twin")])
    said = str(error.value)
    assert said.startswith("--flags: no unit 'nope.c' in this binary; units: lib/lz.c, "
                           "src/part00.c, ")
    assert "lib/lz.c" in said and "src/part10.c" in said and "src/part11.c" not in said
    assert said.endswith(" and 44 more (`autopass units` lists them)"), said


def test_try_without_a_benchmark_says_how_to_add_one(project, tmp_path):
    empty = tmp_path / "empty.toml"
    empty.write_text("")
    out = subprocess.run([AUTOPASS, "try", "--config", str(empty), "--flags", "lib/lz.c=-O3"],
                         cwd=project, capture_output=True, text=True)
    assert out.returncode == 2 and "add a [run] command" in out.stderr


# ---- F4 ----------------------------------------------------------------------------------
@pytest.mark.parametrize("behaviour, outcome", [
    ('case "$*" in *-funroll-loops*) kill -SEGV $$;; esac\n', Outcome.COMPILE_CRASH),
    ('case "$*" in *-funroll-loops*) exec sleep 271;; esac\n', Outcome.COMPILE_TIMEOUT),
    ('case "$*" in *-funroll-loops*) echo "error: boom" >&2; exit 1;; esac\n',
     Outcome.COMPILE_FAIL),
])
def test_f4_compiler_crash_or_hang_is_an_outcome(project, tmp_path, clang, behaviour, outcome):
    fake = fake_compiler(tmp_path, "fake-clang", behaviour + f'exec {clang} "$@"\n')
    store = store_of(project)
    replayer = Replayer(store, compile_timeout=2, compiler_override=fake)
    lz = unit_named(store, "lib/lz.c")
    with pytest.raises(EvaluationError) as error:
        replayer.build(str(project / "dataproc"), {lz.id: ("-funroll-loops",)})
    assert error.value.outcome == outcome
    assert not [p for p in psutil.process_iter(["cmdline"]) if p.info["cmdline"] == ["sleep", "271"]]


# ---- F5 / F6 -----------------------------------------------------------------------------
def bench_for(tmp_path: Path, command: list[str], check: str = "",
              timeout_factor: float = 3.0) -> Benchmark:
    """A benchmark running `command` in tmp_path; `check`: a [check] section's lines."""
    config = cfg.parse(f"[run]\ncommand = {command!r}\ntimeout = 30\n"
                       + (f"[check]\n{check}" if check else "")
                       + "[measure]\nmin_pairs = 2\nmax_pairs = 4\n"
                       f"timeout_factor = {timeout_factor}\n",
                       project_dir=str(tmp_path))
    return Benchmark.from_config(config)


def script(tmp_path: Path, name: str, body: str) -> str:
    return fake_compiler(tmp_path, name, body)


def no_process_with(marker: str) -> bool:
    return not [p for p in psutil.process_iter(["cmdline"])
                if marker in " ".join(p.info["cmdline"] or [])]


def test_f5_a_hanging_benchmark_that_forks_is_killed_whole(tmp_path):
    good = script(tmp_path, "good", "sleep 0.2; echo result 42\n")
    hang = script(tmp_path, "hang", "(sleep 377 &) ; sleep 366; echo result 42\n")
    bench = bench_for(tmp_path, ["{exe}"])
    started = time.monotonic()
    result = compare(bench, good, {}, hang, {})
    assert result.outcome == Outcome.RUN_TIMEOUT
    assert time.monotonic() - started < 20  # killed at ~3 x 0.2 s, not after 366 s
    time.sleep(0.2)
    assert no_process_with("sleep 377") and no_process_with("sleep 366")


@pytest.mark.parametrize("body, outcome", [
    ("sleep 0.1; echo result 43\n", Outcome.WRONG_OUTPUT),
    ("sleep 0.1; echo result 42; exit 3\n", Outcome.WRONG_OUTPUT),
    ("kill -SEGV $$\n", Outcome.RUN_CRASH),
])
def test_f6_wrong_output_and_crashes_are_never_fast(tmp_path, body, outcome):
    good = script(tmp_path, "good", "sleep 0.1; echo result 42\n")
    bad = script(tmp_path, "bad", body)
    result = compare(bench_for(tmp_path, ["{exe}"]), good, {}, bad, {})
    assert result.outcome == outcome and result.verdict is None



@pytest.mark.parametrize("body, said", [
    ("echo compiled 3; echo 'failed: b.frag' >&2; exit 1\n", "its last line: 'failed: b.frag'"),
    ("echo compiled 2; echo 'failed: c.frag'; exit 1\n", "its last line: 'failed: c.frag'"),
    ("exit 1\n", "the baseline's was 0"),
])
def test_a_different_exit_code_is_told_with_the_runs_last_line(tmp_path, body, said):
    """A benchmark script that stops at its first failure ("failed: shader.frag") said
    only "exit code 1, the baseline's was 0": which input failed is its last line."""
    good = script(tmp_path, "good", "echo compiled 3\n")
    result = compare(bench_for(tmp_path, ["{exe}"]), good, {}, script(tmp_path, "bad", body), {})
    assert result.outcome == Outcome.WRONG_OUTPUT
    assert result.detail.startswith("exit code 1, the baseline's was 0") and said in result.detail
    assert ("last line" in result.detail) == ("failed" in body)

BIG = "yes 'abcdefg 12345' | head -c 69206016"     # 66 MiB of stdout, past STDOUT_KEPT


@pytest.mark.parametrize("body, check, why", [
    (f"{BIG}; echo end 1\n", "", ""),                           # the same, compared whole
    (f"{BIG}; echo end 2\n", "",
     "stdout differs after its first 64 MiB, where autopass compares it as a whole"),
    # past the kept bytes, neither [check] ignore nor a tolerance can apply: a digest
    (f"{BIG}; echo end 2\n", "ignore = ['^end']\n", "stdout differs after its first 64 MiB"),
    (f"echo start 2; {BIG}; echo end 1\n", "",
     "stdout line 1: expected 'start 1', got 'start 2'"),
])
def test_a_stdout_of_many_megabytes_is_compared_whole_without_holding_it(
        tmp_path, body, check, why):
    """`xz -dc` prints gigabytes: each run's stdout was read into memory whole, beside the
    baseline's.  Past 64 MiB a run keeps the first 64 MiB (to quote a difference) and the
    digest of the whole (to compare); every byte is still checked."""
    from autopass_build.measuring.output_check import STDOUT_KEPT

    assert STDOUT_KEPT == 64 << 20
    first = "echo start 1; " if "start" in body else ""
    base = script(tmp_path, "base", f"{first}{BIG}; echo end 1\n")
    cand = script(tmp_path, "cand", body)
    # not a test of the time limit: on a loaded VM the candidate took over 3x the
    # baseline's 0.3 s and was killed
    bench = bench_for(tmp_path, ["{exe}"], check, timeout_factor=30.0)
    kept = run_once(bench, base, {}, 30)
    assert len(kept.stdout) == STDOUT_KEPT and kept.stdout_cut
    result = compare(bench, base, {}, cand, {})
    if why:
        assert result.outcome == Outcome.WRONG_OUTPUT and why in result.detail, result.detail
    else:
        assert result.outcome == Outcome.OK, result.detail


def _files_bench(tmp_path: Path, files: str = '["out/result.bin"]') -> Benchmark:
    return bench_for(tmp_path, ["{exe}"], f'mode = "exit-code"\nfiles = {files}\n')


@pytest.mark.parametrize("body, why", [
    ("printf 'B\\0' > out/result.bin; echo took $$ ms\n",
     "out/result.bin differs from the baseline's ([check].files)"),
    # writes nothing: the baseline's file, still there from the run before, must not pass
    ("echo took $$ ms\n", "out/result.bin was not written by this run ([check].files)"),
])
def test_files_the_benchmark_writes_are_checked_in_every_run(tmp_path, body, why):
    """opj_compress writes its output to `-o out.j2k` and prints "encode time: 1556 ms":
    stdout varies, and mode = "exit-code" left the output itself unchecked.  [check].files
    holds each run to the baseline's files, byte for byte."""
    (tmp_path / "out").mkdir()
    good = script(tmp_path, "good", "printf 'A\\0' > out/result.bin; echo took $$ ms\n")
    bad = script(tmp_path, "bad", body)
    bench = _files_bench(tmp_path)
    assert compare(bench, good, {}, good, {}).outcome == Outcome.OK
    result = compare(bench, good, {}, bad, {})
    assert result.outcome == Outcome.WRONG_OUTPUT and result.detail == why
    assert (tmp_path / "out" / "result.bin").exists()     # nothing deleted


def test_a_file_written_with_the_inputs_modification_time_is_written(tmp_path):
    """F59: flac (like gzip, xz and zstd) gives its output the input's modification time,
    and overwrites the same bytes in place: size, inode and mtime were all the run
    before's, and the baseline "did not write" bench/out.flac."""
    (tmp_path / "out").mkdir()
    (tmp_path / "in.wav").write_text("input\n")
    like_flac = script(tmp_path, "flac", "printf 'A\\0' > out/result.bin; "
                                         "touch -r in.wav out/result.bin\n")
    bench = _files_bench(tmp_path)
    assert compare(bench, like_flac, {}, like_flac, {}).outcome == Outcome.OK
    silent = script(tmp_path, "silent", "true\n")
    result = compare(bench, like_flac, {}, silent, {})
    assert result.outcome == Outcome.WRONG_OUTPUT and "was not written by this run" in \
        result.detail


def test_a_check_file_the_baseline_does_not_write_is_named(tmp_path):
    """A path named by mistake (the input, a typo, the folder the output goes to) is one
    line, and is never deleted."""
    (tmp_path / "input.txt").write_text("data\n")
    reads = script(tmp_path, "reads", "cat input.txt > /dev/null; mkdir -p out; "
                                      "date +%N > out/a\n")
    with pytest.raises(MeasureError, match=r"\[check\].files names input.txt, which the "
                                           r"baseline's run did not write"):
        compare(_files_bench(tmp_path, '["input.txt"]'), reads, {}, reads, {})
    assert (tmp_path / "input.txt").read_text() == "data\n"
    with pytest.raises(MeasureError, match=r"names out, which cannot be read as a file "
                                           r"\(Is a directory\)"):
        compare(_files_bench(tmp_path, '["out"]'), reads, {}, reads, {})


def test_a_broken_baseline_is_a_clear_error(tmp_path):
    broken = script(tmp_path, "broken", "exit 1\n")
    crash = script(tmp_path, "crash", "kill -SEGV $$\n")
    with pytest.raises(MeasureError, match="the baseline does not run"):
        compare(bench_for(tmp_path, ["{exe}"]), crash, {}, broken, {})


def test_metrics_cpu_and_instructions(tmp_path):
    busy = script(tmp_path, "busy", "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done; echo ok\n")
    bench = bench_for(tmp_path, ["{exe}"])
    cpu = run_once(bench, busy, {}, 30, metric="cpu")
    assert cpu.outcome == Outcome.OK and 0 < cpu.value <= cpu.wall * 1.5
    first = run_once(bench, "/bin/true", {}, 60, metric="instructions")
    second = run_once(bench, "/bin/true", {}, 60, metric="instructions")
    assert first.outcome == Outcome.OK and first.value > 1000
    assert first.value == second.value  # deterministic
    twice = run_once(bench_for(tmp_path, ["sh", "-c", "{exe}; {exe}"]), "/bin/true", {}, 60,
                     metric="instructions")
    assert twice.value > 2 * first.value  # children are counted too


# ---- F9 ----------------------------------------------------------------------------------
def test_f9_sigterm_stops_try_and_everything_it_started(project, tmp_path):
    hang_config = tmp_path / "hang.toml"
    hang_config.write_text('[run]\ncommand = ["sh", "-c", "sleep 389; {exe}"]\n')
    child = subprocess.Popen([AUTOPASS, "try", "--config", str(hang_config),
                              "--flags", "lib/lz.c=-O3"], cwd=project,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while no_process_with("sleep 389") and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not no_process_with("sleep 389"), "the benchmark never started"
    child.send_signal(signal.SIGTERM)
    _, err = child.communicate(timeout=30)
    assert child.returncode == 130
    assert "interrupted" in err
    time.sleep(0.2)
    assert no_process_with("sleep 389")


def test_s2_benchmark_arguments_never_reach_a_shell(tmp_path):
    canary = tmp_path / "canary"
    bench = bench_for(tmp_path, ["{exe}", f"$(touch {canary})", f"; touch {canary}"])
    result = run_once(bench, "/bin/echo", {}, 10)
    assert result.outcome == Outcome.OK
    assert result.stdout == f"$(touch {canary}) ; touch {canary}\n".encode()
    assert not canary.exists()


def test_a_program_the_loader_cannot_start_is_a_failed_run_not_an_ok_one(tmp_path):
    """ld.so exits 127 when a shared library is missing; that run read as OK (exit code
    127, as the baseline's), so a profile of it showed the loader's own functions."""
    write(tmp_path / "gone.c", "int gone(void) { return 0; }\n")
    write(tmp_path / "main.c", "int gone(void);\nint main(void) { return gone(); }\n")
    subprocess.run(["cc", "-shared", "-fPIC", "-o", "libgone.so", "gone.c"], cwd=tmp_path,
                   check=True)
    subprocess.run(["cc", "-o", "app", "main.c", "-L.", "-lgone"], cwd=tmp_path, check=True)
    (tmp_path / "libgone.so").unlink()
    result = run_once(bench_for(tmp_path, ["{exe}"]), str(tmp_path / "app"), {}, 10)
    assert result.outcome == Outcome.RUN_CRASH
    assert "dynamic loader" in result.detail and "libgone.so" in result.detail
    exits_127 = run_once(bench_for(tmp_path, ["{exe}", "-c", "exit 127"]), "/bin/sh", {}, 10)
    assert exits_127.outcome == Outcome.OK and exits_127.status == 127


def test_a_failed_training_run_is_said_in_one_line(tmp_path):
    """BOLT's instrumented x264 died of SIGSEGV: the journal's reason was "exit -11" and
    the first 300 characters of x264's chatter, cut mid-line across three lines."""
    from autopass_build.candidates import training

    bench = bench_for(tmp_path, ["{exe}", "-c", "echo 'x264 [info]: 1280x720p' >&2; "
                                 "echo 'the last line' >&2; kill -SEGV $$"])
    with pytest.raises(training.TrainingError) as failed:
        training.run(bench, "/bin/sh", {}, lambda m: None)
    assert str(failed.value) == ("the training run failed (killed by signal 11): "
                                 "the last line")


def test_s5_api_keys_do_not_reach_the_benchmark(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    bench = bench_for(tmp_path, ["{exe}"])
    result = run_once(bench, "/usr/bin/env", {}, 10)
    assert b"sk-secret" not in result.stdout and b"OPENAI_API_KEY" not in result.stdout


# ---- profile (issue 4) -------------------------------------------------------------------
def test_profile_finds_the_hot_function_in_its_unit(project):
    from autopass_build.evidence.hotspots import load, profile

    evaluator = Evaluator(store_of(project), cfg.load(start=str(project)))
    result = profile(evaluator)
    top = result.functions[0]
    assert top.name == "dp_lz_compress" and top.units == ["lib/lz.c"]
    assert next(iter(result.unit_shares())) == "lib/lz.c"
    assert load(str(project / ".autopass")).functions[0].name == "dp_lz_compress"
    stored = subprocess.run([AUTOPASS, "profile", "--stored"], cwd=project,
                            capture_output=True, text=True)      # kept: nothing runs
    assert stored.returncode == 0, stored.stderr
    assert "dp_lz_compress" in stored.stdout and "lib/lz.c" in stored.stdout
    assert "profiling" not in stored.stderr


def test_callgrind_fallback_reads_a_debug_build(project, tmp_path):
    """valgrind 3.19 cannot read clang 19's DWARF 5: the binary runs stripped of it."""
    from autopass_build.evidence.hotspots import _callgrind_samples
    from autopass_build.measuring.binaries import debugless_copy

    binary = debugless_copy(str(project / "dataproc"), str(tmp_path))
    samples = dict(_callgrind_samples([binary, "1"], str(project), None, 120))
    assert max(samples, key=samples.get) == "dp_lz_compress"
    assert "merge_rec" in samples  # recursion levels merged


def test_a_static_debug_binary_is_stripped_for_valgrind(tmp_path):
    """F44: minisat links -static: llvm-strip 19 refuses the binary ("Link field value 36 in
    section .rela.plt is not a symbol table"), and valgrind then gave up on its DWARF 5
    (no profile, no instructions metric).  GNU strip takes over."""
    from autopass_build.core import toolchain
    from autopass_build.evidence.hotspots import _callgrind_samples
    from autopass_build.measuring.binaries import debugless_copy

    source = tmp_path / "st.c"
    source.write_text("#include <stdio.h>\n#include <string.h>\nint count(const char *s)"
                      " { return (int)strlen(s); }\nint main(int c, char **v)"
                      " { printf(\"%d\\n\", count(v[0])); return 0; }\n")
    binary = tmp_path / "st"
    subprocess.run([toolchain.find_tool("clang"), "-g", "-O1", "-static", str(source), "-o",
                    str(binary)], check=True)
    folder = tmp_path / "stripped"
    folder.mkdir()
    stripped = debugless_copy(str(binary), str(folder))
    assert stripped != str(binary)
    samples = dict(_callgrind_samples([stripped], str(tmp_path), None, 120))
    assert sum(samples.values()) > 50        # counted: valgrind read the binary


def test_instructions_metric_on_a_debug_build(project, tmp_path):
    bench = bench_for(tmp_path, ["{exe}", "1"])
    result = run_once(bench, str(project / "dataproc"), {}, 300, metric="instructions")
    assert result.outcome == Outcome.OK and result.value > 1e8


VERSIONED = {
    "lib.c": "int foo(int x) { return x + 1; }\nint bar(int x) { return x * 2; }\n",
    "main.c": "int foo(int);\nint main(void) { return foo(-1); }\n",
    "lib.ver": "{ global: foo; local: *; };\n",
    "Makefile": "CC ?= cc\nprog: main.c libv.so\n\t$(CC) -O2 -o $@ main.c -L. -lv\n"
                "libv.so: lib.c lib.ver\n\t$(CC) -O2 -fPIC -shared -o $@ lib.c "
                "-Wl,--version-script=lib.ver\n",
}


def test_a_relink_reads_the_trees_version_script_as_it_is_now(tmp_path) -> None:
    """A shared library's link reads a version script from the tree (libtool's
    libjq.ver).  The user's next build may rewrite it; a relink cached before would be
    stale (jq kept failing on a .ver a broken build had emptied, until the cache went)."""
    for name, text in VERSIONED.items():
        (tmp_path / name).write_text(text)
    subprocess.run([AUTOPASS, "record", "--", "make", "-s"], cwd=tmp_path, check=True,
                   capture_output=True)
    store = Store.open_existing(str(tmp_path / ".autopass"))

    def exported() -> str:
        built = Replayer(store).build(str(tmp_path / "prog"))
        return subprocess.run(["nm", "-D", "--defined-only", f"{built.folder}/libv.so"],
                              capture_output=True, text=True, check=True).stdout

    assert " foo" in exported() and " bar" not in exported()
    (tmp_path / "lib.ver").write_text("{ global: foo; bar; local: *; };\n")
    assert " bar" in exported()


STDIN_CONFIG = """
[run]
command = ["sh", "-c", "read rounds && exec {exe} $rounds"]
stdin = "rounds.txt"
[measure]
metric = "cpu"
min_pairs = 2
max_pairs = 2
"""


def test_the_benchmark_reads_its_standard_input_from_run_stdin(tmp_path) -> None:
    """[run].stdin feeds a file to every run of the benchmark: measured runs, the
    profile (perf) and the PGO training run.  Without it stdin is /dev/null, `read`
    fails, and the baseline itself is an error; a missing file is one line."""
    from support import recorded_tune_mini

    root = recorded_tune_mini(tmp_path / "mini", STDIN_CONFIG, profile=False)
    (root / "rounds.txt").write_text("20\n")
    for command in (["try", "--flags", "hot.c=-O2"], ["profile"], ["pgo"]):
        done = subprocess.run([AUTOPASS, *command], cwd=root, capture_output=True, text=True)
        assert done.returncode == 0, (command, done.stderr)
    shares = subprocess.run([AUTOPASS, "profile"], cwd=root, capture_output=True,
                            text=True).stdout.partition("units by share:")[2]
    assert "hot.c" in shares or "warm.c" in shares   # the program ran (a 5 ms run: few samples)
    (root / "rounds.txt").unlink()
    done = subprocess.run([AUTOPASS, "try", "--flags", "hot.c=-O2"], cwd=root,
                          capture_output=True, text=True)
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert "[run].stdin" in done.stderr and "rounds.txt is not a file" in done.stderr
    # a [run].cwd that is not a folder: said as such, not "cannot start <the binary>"
    (root / "rounds.txt").write_text("20\n")
    (root / "autopass.toml").write_text(STDIN_CONFIG.replace("[run]\n", "[run]\ncwd = 'data'\n"))
    done = subprocess.run([AUTOPASS, "try", "--flags", "hot.c=-O2"], cwd=root,
                          capture_output=True, text=True)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert f"[run].cwd: {root / 'data'} is not a folder" in done.stderr


def test_a_benchmark_of_a_few_milliseconds_gets_a_note_with_the_fix(tmp_path) -> None:
    """tune-mini runs in ~5 ms: start-up and timer noise outweigh any flag, so every
    verdict would read UNCLEAR without saying why.  `try` says it once, and what to do."""
    said = _try_on_tune_mini(tmp_path, '["{exe}", "1"]')
    assert said.count("note: the benchmark runs in") == 1
    assert "give it a bigger input" in said


def test_a_benchmark_that_prints_nothing_gets_a_note_that_its_output_is_unchecked(
        tmp_path) -> None:
    """jsoncpp's jsontestrunner writes its result to files and prints nothing: the
    output check compared exit codes only, and nothing said so."""
    said = _try_on_tune_mini(tmp_path, '["sh", "-c", "{exe} 1 > /dev/null"]')
    assert said.count("note: the benchmark prints nothing on stdout") == 1
    assert "or name the files it writes in [check].files" in said


def test_a_store_that_lost_its_ir_says_to_record_again(tmp_path) -> None:
    """The IR blobs deleted (a cleanup script, a partial copy of the store): a candidate
    made from the unit's IR cannot be built (the baseline is the build's own objects),
    and the one line names the unit and the fix instead of clang's "no such file or
    directory" on a path in the store."""
    from support import recorded_tune_mini

    root = recorded_tune_mini(tmp_path / "mini", '[run]\ncommand = ["{exe}", "1"]\n',
                              profile=False)
    for blob in (root / ".autopass" / "blobs" / "ir").rglob("*.bc*"):
        blob.unlink()
    done = subprocess.run([AUTOPASS, "try", "--flags", "hot.c=-mllvm -inline-threshold=500"],
                          cwd=root, capture_output=True, text=True)
    said = done.stdout + done.stderr
    assert "Traceback" not in said and "COMPILE_FAIL" in said, said
    assert "hot.c: the store lost its recorded IR" in said
    assert "record the build again" in said, said


def _try_on_tune_mini(tmp_path, command: str) -> str:
    """`autopass try` once on tune-mini with this [run].command (two pairs): its stderr."""
    from support import recorded_tune_mini

    root = recorded_tune_mini(tmp_path / "mini", f'[run]\ncommand = {command}\n'
                              '[measure]\nmin_pairs = 2\nmax_pairs = 2\n', profile=False)
    done = subprocess.run([AUTOPASS, "try", "--flags", "hot.c=-O2"], cwd=root,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stderr


ARGV0_PROGRAM = r"""
#include <stdio.h>
int main(int argc, char **argv) {
    unsigned long s = 0;
    for (unsigned long i = 0; i < 3000000; i++) s += i * i % 7;
    printf("/* Command-line: %s */\n%lu\n", argv[0], s);
    return 0;
}
"""


@pytest.mark.parametrize("metric", ["cpu", "instructions"])
def test_a_program_that_prints_its_own_path_is_not_wrong_output(tmp_path, metric) -> None:
    """gperf prints its command line, argv[0] included, and the baseline and every
    candidate live in folders of their own: every candidate and every stage was
    WRONG_OUTPUT.  Each runs under one stable name (a link) for the whole process."""
    root = tmp_path / "argv0"
    (root).mkdir()
    (root / "prog.c").write_text(ARGV0_PROGRAM)
    subprocess.run([AUTOPASS, "record", "--", "sh", "-c", "cc -O1 -c prog.c && cc -o prog prog.o"],
                   cwd=root, check=True, capture_output=True)
    (root / "autopass.toml").write_text(f'[run]\ncommand = ["{{exe}}"]\n[measure]\n'
                                        f'metric = "{metric}"\nmin_pairs = 2\nmax_pairs = 2\n')
    done = subprocess.run([AUTOPASS, "try", "--flags", "prog.c=-O2"], cwd=root,
                          capture_output=True, text=True)
    assert done.returncode == 0 and "outcome: OK" in done.stdout, done.stdout + done.stderr


THIN = {
    "lib/sq.c": "int sq(int x) { return x * x; }\n",
    "lib/cube.c": "int cube(int x) { return x * x * x; }\n",
    "main.c": '#include <stdio.h>\nint sq(int); int cube(int);\n'
              'int main(int c, char **v) { printf("%d\\n", sq(c + 2) + cube(c)); return 0; }\n',
    # Meson's way: objects in libt.a.p/, a thin archive naming them (`ar csrDT`)
    "build.sh": "set -e\nmkdir -p out/libt.a.p\n"
                "for s in sq cube; do cc -O2 -c lib/$s.c -o out/libt.a.p/$s.c.o; done\n"
                "ar csrDT out/libt.a out/libt.a.p/sq.c.o out/libt.a.p/cube.c.o\n"
                "cc -O2 -c main.c -o out/main.o && cc -o out/prog out/main.o out/libt.a\n",
}


def test_a_thin_archive_replays_after_the_tree_is_cleaned(tmp_path) -> None:
    """F28: Meson makes every static library thin: the archive names its members' files.
    The store kept the thin archive as it was, and replay read the members through the
    store's copy: a traceback (dav1d 1.0.0).  Now it keeps the members themselves, so
    the binary replays, byte for byte, with no object of the tree left."""
    for name, text in THIN.items():
        write(tmp_path / name, text)
    subprocess.run([AUTOPASS, "record", "--", "sh", "build.sh"], cwd=tmp_path, check=True,
                   capture_output=True)
    assert (tmp_path / "out/libt.a").read_bytes().startswith(b"!<thin>\n")
    recorded = (tmp_path / "out/prog").read_bytes()
    store = store_of(tmp_path)
    targets = subprocess.run([AUTOPASS, "targets"], cwd=tmp_path, capture_output=True,
                             text=True, check=True).stdout
    assert "out/prog (executable): 3 units" in targets, targets
    shutil.rmtree(tmp_path / "out")
    built = Replayer(store).build(str(tmp_path / "out/prog"), {})
    assert Path(built.binary).read_bytes() == recorded
    changed = Replayer(store).build(str(tmp_path / "out/prog"),
                                    {unit_named(store, "lib/cube.c").id: ("-O1",)})
    assert subprocess.run([changed.binary], capture_output=True, text=True).stdout == "10\n"


SAME_NAMED = {
    "sq/sq.c": "int sq(int x) { return x * x; }\n",
    "app/main.c": '#include <stdio.h>\nint sq(int);\n'
                  'int main(int c, char **v) { printf("%d\\n", sq(c + 2)); return 0; }\n',
    # busybox's Kbuild: every folder's archive is lib.a, `main` is in one of them, and
    # the program is linked as prog_unstripped, then stripped into prog
    "build.sh": "set -e\nfor d in sq app; do for c in $d/*.c; do cc -O2 -c $c -o ${c%.c}.o;"
                " done; ar rcs $d/lib.a $d/*.o; done\n"
                "cc -Wl,--build-id -o prog_unstripped -Wl,--start-group sq/lib.a app/lib.a "
                "-Wl,--end-group\nstrip prog_unstripped -o prog\n",
}


def test_archives_of_one_name_and_a_stripped_copy_of_the_program(tmp_path) -> None:
    """busybox links 56 archives, each lib.a or built-in.o: replay rebuilt them in one
    folder, each overwrote the one before, and the link lost `main`.  Its Makefile then
    strips busybox_unstripped into busybox, the name a user gives as [run].target: that
    was "not found"; the stripped copy keeps the link's build ID, which names it."""
    for name, text in SAME_NAMED.items():
        write(tmp_path / name, text)
    subprocess.run([AUTOPASS, "record", "--", "sh", "build.sh"], cwd=tmp_path, check=True,
                   capture_output=True)
    (tmp_path / "autopass.toml").write_text(
        '[run]\ncommand = ["{exe}"]\ntarget = "prog"\n[measure]\nmin_pairs = 2\n'
        'max_pairs = 2\n')
    done = subprocess.run([AUTOPASS, "try", "--flags", "sq/sq.c=-O1"], cwd=tmp_path,
                          capture_output=True, text=True)
    assert done.returncode == 0 and "outcome: OK" in done.stdout, done.stdout + done.stderr
    assert "baseline of prog_unstripped" in done.stderr


def test_a_shared_library_run_as_the_benchmark_names_the_programs_that_load_it(tmp_path):
    """C11: [run].target a project library while the command runs "{exe}" itself: the
    library was executed, crashed, and the error blamed missing profilers (dav1d)."""
    root = tmp_path / "twin"
    shutil.copytree(Path(__file__).parent / "data" / "twin-mini", root)
    subprocess.run([AUTOPASS, "record", "--", "make", "-s"], cwd=root, check=True,
                   capture_output=True)
    (root / "autopass.toml").write_text('[run]\ncommand = ["{exe}"]\ntarget = "libtwin.so"\n')
    done = subprocess.run([AUTOPASS, "tune", "--budget", "1"], cwd=root, capture_output=True,
                          text=True)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert "[run].target libtwin.so is a shared library" in done.stderr
    assert "these load it: prog" in done.stderr


def test_a_benchmark_that_crashes_on_the_recorded_build_is_named_as_the_problem(project,
                                                                                 tmp_path):
    """C11: no samples from a crashed run were blamed on missing profilers."""
    config = tmp_path / "crash.toml"
    config.write_text(CONFIG.replace('command = ["{exe}", "1"]',
                                     'command = ["sh", "-c", "kill -SEGV $$", "{exe}"]'))
    done = subprocess.run([AUTOPASS, "profile", "--config", str(config)], cwd=project,
                          capture_output=True, text=True)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert "the benchmark does not run on the recorded build: RUN_CRASH" in done.stderr
    assert "fix [run].command" in done.stderr


def test_a_benchmark_that_exits_with_an_error_is_said_to(tmp_path):
    """C11: pcre2grep given a regex that TOML's quoting had mangled exited 2 at once
    ("missing closing parenthesis"); profile showed the loader's functions and tune
    would have tuned that failure, without a word about the exit status."""
    from support import recorded_tune_mini

    config = ('[run]\ncommand = ["sh", "-c", "\\"$0\\" 20; echo \\"mini: bad mode\\" >&2; '
              'exit 3", "{exe}"]\n[measure]\nmetric = "instructions"\nlayout_check = false\nmin_pairs = 2\n'
              'max_pairs = 2\n[tune]\nbudget = 1\nstages = []\n')
    root = recorded_tune_mini(tmp_path / "mini", config, profile=False)
    shown = subprocess.run([AUTOPASS, "profile"], cwd=root, capture_output=True, text=True)
    assert shown.returncode == 0, shown.stderr
    said = ("the benchmark exits with status 3 (mini: bad mode) on the recorded build; "
            "every candidate must end the same way")
    assert said in shown.stdout and "fix [run].command" in shown.stdout
    tuned = subprocess.run([AUTOPASS, "tune"], cwd=root, capture_output=True, text=True)
    assert tuned.returncode == 0 and said in tuned.stderr, tuned.stderr
    (root / "autopass.toml").write_text(config.replace("exit 3", "exit 0"))
    fine = subprocess.run([AUTOPASS, "profile"], cwd=root, capture_output=True, text=True)
    assert fine.returncode == 0 and "the benchmark exits" not in fine.stdout, fine.stdout
    # failing before the program runs at all: no time in any unit, and tune says why
    (root / "autopass.toml").write_text(config.replace('\\"$0\\" 20; ', ""))
    idle = subprocess.run([AUTOPASS, "tune"], cwd=root, capture_output=True, text=True)
    assert idle.returncode == 2 and "Traceback" not in idle.stderr, idle.stderr
    assert idle.stderr.splitlines()[-1].startswith(
        "autopass: error: nothing to tune: the benchmark exits with status 3 (mini: bad mode)")


def test_try_takes_any_spelling_of_a_source_and_inputs_are_the_benchmarks(tmp_path) -> None:
    """F68: `try --flags ./hot.c=...` found no unit; [run].inputs are relative to the
    benchmark's folder, as init's template says (the code read them from autopass.toml's)."""
    from support import recorded_tune_mini

    root = recorded_tune_mini(tmp_path / "mini", '[run]\ncommand = ["{exe}", "1"]\n'
                              'cwd = "data"\ninputs = ["in.txt"]\n[measure]\n'
                              'metric = "instructions"\nlayout_check = false\nmax_pairs = 2\nmin_pairs = 2\n',
                              profile=False)
    (root / "data").mkdir()
    (root / "data" / "in.txt").write_text("x\n")
    done = subprocess.run([AUTOPASS, "try", "--flags", "./hot.c=-O2"], cwd=root,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    (root / "data" / "in.txt").unlink()
    (root / "in.txt").write_text("x\n")          # beside autopass.toml: not the benchmark's
    missing = subprocess.run([AUTOPASS, "try", "--flags", "hot.c=-O2"], cwd=root,
                             capture_output=True, text=True)
    assert missing.returncode == 2 and "in.txt does not exist in" in missing.stderr


THIN_ARCHIVES = Path(__file__).parent / "data" / "thin-archives"


def test_a_thinlto_build_from_archives_replays_as_its_own_code(tmp_path, monkeypatch) -> None:
    """A build that is ThinLTO already (glslang's CMake Release build): its baseline
    replay was not the build's code.  The archives' units were compiled again from IR
    (which keeps the names of local values, so the modules' hashes and the promoted
    names differed), and the archives were linked from folders named by hashes (a link
    orders its ThinLTO modules by path).  BOLT's profile of the one then did not fit
    the build apply made.  Now the baseline takes the archives' members as built and
    the link sees every input at its own path: the replay has the build's code, and so
    does a second one from the ThinLTO cache; a unit given flags is compiled from
    source, as apply mode compiles it."""
    from autopass_build.candidates import relink
    from autopass_build.core import toolchain
    from autopass_build.core.bolt_commands import code_fingerprint

    root = tmp_path / "shapes"
    shutil.copytree(THIN_ARCHIVES, root)
    build = ["make", "-s", f"AR={toolchain.find_tool('llvm-ar')}"]
    subprocess.run([AUTOPASS, "record", "--", *build], cwd=root, check=True,
                   capture_output=True)
    links: list[list[str]] = []
    real_run = relink.proc.run_captured

    def run(argv, *rest, **named):
        if "-o" in argv and argv[argv.index("-o") + 1].endswith("shapes.tmp"):
            links.append(list(argv))
        return real_run(argv, *rest, **named)

    monkeypatch.setattr(relink.proc, "run_captured", run)
    built = code_fingerprint(str(root / "shapes"))
    said = subprocess.run([root / "shapes", "10"], capture_output=True, text=True).stdout
    for _ in range(2):
        replayer = Replayer(store_of(root))
        replayed = replayer.build(str(root / "shapes"), {})
        assert code_fingerprint(replayed.binary) == built
        assert (replayer.stats.compiled, replayer.stats.from_source) == (0, 0)
        assert subprocess.run([replayed.binary, "10"], capture_output=True,
                              text=True).stdout == said
        inputs = [a for a in links[-1] if a.endswith((".a", ".o"))]
        names = ("main.o", "z/libalpha.a", "y/libbeta.a", "x/libgamma.a", "w/libdelta.a")
        assert len(inputs) == len(names) and all(
            given.endswith(f"/tree{root}/{name}") for given, name in zip(inputs, names)), \
            inputs
        assert sorted(os.listdir(replayed.folder)) == ["shapes"]   # the inputs gone
        shutil.rmtree(replayed.folder)          # the second: from the ThinLTO cache
    store = store_of(root)
    replayer = Replayer(store)
    alpha = unit_named(store, "alpha.cpp")
    replayer.build(str(root / "shapes"), {alpha.id: ("-mllvm", "-inline-threshold=100")})
    assert (replayer.stats.from_source, replayer.stats.compiled) == (1, 0)
