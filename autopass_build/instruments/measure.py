"""Running the benchmark and judging a candidate against the baseline.

One run: the user's command with `{exe}` replaced, in its own session (so the whole
process group can be killed), pinned to one CPU unless it runs in parallel (see
`cpu_pinning`), output to files (no pipe deadlocks), with a timeout.  Metrics: `wall`;
`cpu` (user+sys of the whole waited-for process tree, from wait4); `user` (its user
time alone: kernel work -- page faults, I/O -- is the same code in every candidate and
the part of a run that varies most on a VM; for runs of 0.5 s or more, see
USER_METRIC_MIN_S); `instructions`
(callgrind: deterministic, ~50x slower; valgrind 3.19 cannot run AVX-512 code); `cycles`
(`perf stat`, only where the host supports it).

A/B: baseline and candidate alternate (ABBA...), each candidate run's output is checked
against the baseline's, and pairs accumulate until the interval of the ratio (see
`stats.py`) separates from 1, or is narrower than the precision, or the cap is hit.
"""

from __future__ import annotations

import json
import os
import resource
import select
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from typing import Callable

from autopass_build.config import CheckConfig, Config, MeasureConfig, RunConfig
from autopass_build.core import proc
from autopass_build.core.cpu import CPUINFO, this_cpu
from autopass_build.core.files import hash_json
from autopass_build.core.outcome import Outcome
from autopass_build.instruments import stats
from autopass_build.instruments.binaries import debugless_copy, stable_name
from autopass_build.instruments.cpu_pinning import (
    parallel_note,
    pinned_cpu,
    runs_in_parallel,
    spawned_on,
)
from autopass_build.instruments.output_check import (
    Reference,
    baseline_files_problem,
    check_output,
    compared_lines,
    file_signatures,
    ignore_suggestion,
    read_output,
    written_files,
)
from autopass_build.instruments.sampling import CALLGRIND

# Metrics that give the same value for the same binary and input every time.
DETERMINISTIC_METRICS = frozenset({"instructions"})
# Metrics read from the clock (wall) or the kernel's accounting (wait4), with no tool
# around the benchmark; in this order in `profile`'s spread line (steadiness.py).
TIMED_METRICS = ("wall", "cpu", "user")
# Above this share of a run's CPU time in the kernel, a timed metric other than `user`
# measures mostly what no compiler flag changes (a markdown parser building an 80 MB
# document's tree: 26 % in the kernel, its run-to-run spread 30 % against user time's 2 %).
KERNEL_SHARE_NOTE = 0.15
# The kernel measures a process's CPU time exactly but splits it into user and system
# time by timer ticks (tick accounting, 4 ms at HZ=250), so `user` carries a sampling
# error of a few ticks: on Lua's 0.07 s benchmark its run-to-run spread was 4.6 % against
# cpu's 1.0 %; on LAME's 0.75 s, 0.5 % against 1.0 %.  Below this, `user` is no help.
USER_METRIC_MIN_S = 0.5


class MeasureError(Exception):
    pass


@dataclass
class RunResult:
    outcome: Outcome
    value: float | None      # the metric; None unless the run finished
    wall: float
    status: int              # exit code, negative for a signal
    stdout: bytes
    stderr: bytes
    detail: str = ""
    files: tuple[tuple[str, str], ...] = ()   # [check].files: (path, digest) after the run
    cpu_time: float = 0.0    # user+sys of the waited-for process tree
    kernel_time: float = 0.0  # its sys part

    @property
    def user_time(self) -> float:
        return self.cpu_time - self.kernel_time
    stdout_cut: str = ""     # "" when `stdout` is all of it, else the whole one's digest


@dataclass
class Benchmark:
    run: RunConfig
    check: CheckConfig
    measure: MeasureConfig
    project_dir: str
    extra_env: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_config(cls, config: Config) -> "Benchmark":
        if not config.run.command:
            raise MeasureError("no benchmark: add a [run] command to autopass.toml, e.g. "
                               'command = "{exe} input.txt" (`autopass init` writes a starter)')
        cwd = config.resolve(config.run.cwd)
        for path in config.run.inputs:      # as the benchmark names them: from its folder
            if not os.path.exists(os.path.join(cwd, path)):
                raise MeasureError(f"[run].inputs: {path} does not exist in {cwd} (the "
                                   "benchmark's folder, [run].cwd, which inputs are "
                                   "relative to)")
        if not os.path.isdir(cwd):
            raise MeasureError(f"[run].cwd: {config.resolve(config.run.cwd)} is not a folder; "
                               "give the folder the benchmark runs in, relative to "
                               "autopass.toml")
        if config.run.stdin and not os.path.isfile(config.resolve(config.run.stdin)):
            raise MeasureError(f"[run].stdin: {config.resolve(config.run.stdin)} is not a "
                               "file; give the file the benchmark reads on standard input, "
                               "relative to autopass.toml")
        return cls(config.run, config.check, config.measure, config.project_dir)

    def argv(self, exe: str) -> list[str]:
        return [token.replace("{exe}", exe) for token in self.run.command]

    def workload(self) -> str:
        """What a run does, as a key: the command, the training command, stdin, folder
        and environment.  A profile trained or sampled under another workload is stale
        (the user changed [run]); the key says so without running anything."""
        run = self.run
        return hash_json([list(run.command), list(run.train), run.stdin, run.cwd,
                          sorted(dict(run.env).items())])[:16]

    def env(self, candidate_env: dict[str, str]) -> dict[str, str]:
        """The benchmark's environment: ours, then [run].env, then the candidate's own
        (where its rebuilt shared libraries are).  Its LD_LIBRARY_PATH goes first, before
        the user's, not in place of it: a program that finds a library outside the
        tree only through the user's (a vendor's, an install prefix) still finds it."""
        env = proc.clean_env(dict(os.environ))
        env.update(dict(self.run.env))
        for name, value in candidate_env.items():
            if name == "LD_LIBRARY_PATH" and env.get(name):
                value = os.pathsep.join((value, env[name]))
            env[name] = value
        return env

    @property
    def cwd(self) -> str:
        return os.path.normpath(os.path.join(self.project_dir, self.run.cwd))

    @property
    def stdin(self) -> str | None:
        """The file every run of the benchmark reads as standard input; None: nothing
        (/dev/null), so a benchmark that reads it can never wait on a terminal."""
        return os.path.join(self.project_dir, self.run.stdin) if self.run.stdin else None


# -- one run ------------------------------------------------------------------------------
def metric_prefix(metric: str, out_file: str) -> list[str]:
    if metric == "instructions":
        if shutil.which("valgrind") is None:
            raise MeasureError("metric 'instructions' needs valgrind: apt-get install valgrind")
        # Every process the benchmark starts is counted (a wrapper script, `sh -c`, ...).
        return [*CALLGRIND, "--trace-children=yes",
                f"--callgrind-out-file={out_file}.%p", "--"]
    if metric == "cycles":
        if not cycles_supported():
            raise MeasureError("metric 'cycles' is not supported on this host (perf stat "
                               "cannot count cycles here); use wall, cpu, user or instructions")
        return ["perf", "stat", "-x,", "-e", "cycles", "-o", out_file, "--"]
    return []


_cycles_supported: bool | None = None


def cycles_supported() -> bool:
    global _cycles_supported
    if _cycles_supported is None:
        perf = shutil.which("perf")
        if perf is None:
            _cycles_supported = False
        else:
            done = proc.run_captured([perf, "stat", "-x,", "-e", "cycles", "true"], ".",
                                     timeout=30)
            text = done.stderr.decode("utf-8", "replace")
            _cycles_supported = done.status == 0 and "not supported" not in text \
                and "<not counted>" not in text
    return _cycles_supported


def native_unmeasurable(metric: str, cpuinfo: str = CPUINFO) -> str:
    """Why a -march=native build cannot be measured by `metric` on this CPU ("" when it
    can): callgrind (valgrind 3.19) stops at the first AVX-512 instruction, and clang
    emits them for a CPU that has them (a znver5's vectorized loops are zmm code)."""
    if metric != "instructions" or "avx512f" not in this_cpu(cpuinfo).isa:
        return ""
    return ("metric instructions runs the benchmark under valgrind, which cannot execute "
            "the AVX-512 code -march=native makes on this CPU; use --metric cpu or wall")


def read_metric(metric: str, out_file: str) -> float:
    if metric == "instructions":
        return _callgrind_total(out_file)
    with open(out_file, encoding="utf-8", errors="replace") as handle:
        text = handle.read()
    for line in text.splitlines():  # perf stat -x, : value,unit,event,...
        fields_ = line.split(",")
        if len(fields_) > 2 and fields_[2].startswith("cycles"):
            return float(fields_[0])
    raise MeasureError("perf stat reported no cycle count")


def _callgrind_total(prefix: str) -> float:
    """Instructions summed over the callgrind files of every traced process."""
    folder, stem = os.path.split(prefix)
    total, found = 0.0, False
    for name in os.listdir(folder):
        if not name.startswith(stem + "."):
            continue
        with open(os.path.join(folder, name), encoding="utf-8", errors="replace") as handle:
            for line in handle:
                if line.startswith(("summary:", "totals:")):
                    total += float(line.split()[1])
                    found = True
                    break
    if not found:
        raise MeasureError("callgrind wrote no instruction total")
    return total


def _wait(pid: int, timeout: float) -> tuple[int, resource.struct_rusage, bool]:
    """Wait for `pid` with a timeout; (wait status, rusage, timed out)."""
    fd = os.pidfd_open(pid)
    try:
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        exited = bool(poller.poll(max(1, int(timeout * 1000))))
    finally:
        os.close(fd)
    if not exited:
        proc.kill_group(pid)
    _, status, usage = os.wait4(pid, 0)
    return status, usage, not exited


LOADER_FAILED = 127                                   # glibc's ld.so exit status
LOADER_ERROR = b"error while loading shared libraries"


def run_once(bench: Benchmark, exe: str, candidate_env: dict[str, str], timeout: float,
             metric: str | None = None, cpu: int | None = None) -> RunResult:
    import subprocess

    metric = metric or bench.measure.metric
    with tempfile.TemporaryDirectory(prefix="autopass-run-") as scratch:
        out_path, err_path = os.path.join(scratch, "stdout"), os.path.join(scratch, "stderr")
        metric_file = os.path.join(scratch, "metric")
        if metric == "instructions":
            exe = debugless_copy(exe, scratch)
        argv = metric_prefix(metric, metric_file) + bench.argv(stable_name(exe))
        outputs_before = file_signatures(bench)
        with open(out_path, "wb") as out, open(err_path, "wb") as err, \
                open(bench.stdin or os.devnull, "rb") as source:
            started = time.perf_counter()
            try:
                with spawned_on(cpu):
                    child = subprocess.Popen(argv, cwd=bench.cwd, env=bench.env(candidate_env),
                                             stdin=source, stdout=out, stderr=err,
                                             start_new_session=True)
            except OSError as error:
                return RunResult(Outcome.RUN_CRASH, None, 0.0, -1, b"", b"",
                                 f"cannot start {argv[0]}: {error.strerror}")
            try:
                status, usage, timed_out = _wait(child.pid, timeout)
            except BaseException:
                proc.kill_group(child.pid)
                child.wait()
                raise
            wall = time.perf_counter() - started
            child.returncode = os.waitstatus_to_exitcode(status)  # reaped by wait4
            proc.kill_group(child.pid)  # children it left behind
        stdout, cut = read_output(out_path, keep_all=bench.check.mode == "command")
        stderr, _ = read_output(err_path)
        code = child.returncode
        if timed_out:
            return RunResult(Outcome.RUN_TIMEOUT, None, wall, code, stdout, stderr,
                             f"killed after {timeout:.1f}s")
        if code < 0:
            return RunResult(Outcome.RUN_CRASH, None, wall, code, stdout, stderr,
                             f"killed by signal {-code}")
        if code == LOADER_FAILED and LOADER_ERROR in stderr:  # not the program's own 127
            said = stderr[stderr.index(LOADER_ERROR):].split(b"\n")[0]
            return RunResult(Outcome.RUN_CRASH, None, wall, code, stdout, stderr,
                             "the dynamic loader cannot start it ("
                             + said.decode("utf-8", "replace")[:200] + ")")
        cpu_time = usage.ru_utime + usage.ru_stime
        if metric == "wall":
            value = wall
        elif metric == "cpu":
            value = cpu_time
        elif metric == "user":
            value = usage.ru_utime
        else:
            value = read_metric(metric, metric_file)
        return RunResult(Outcome.OK, value, wall, code, stdout, stderr,
                         files=written_files(bench, outputs_before), cpu_time=cpu_time,
                         kernel_time=usage.ru_stime, stdout_cut=cut)


# -- A/B ----------------------------------------------------------------------------------
@dataclass
class Comparison:
    outcome: Outcome
    verdict: str | None = None          # stats.FASTER / SLOWER / SAME / UNCLEAR
    estimate: stats.Estimate | None = None
    baseline: list[float] = field(default_factory=list)
    candidate: list[float] = field(default_factory=list)
    runs: int = 0                       # benchmark runs spent, warm-up included
    detail: str = ""


Progress = Callable[[str], None]


def baseline_reference(bench: Benchmark, exe: str, env: dict[str, str],
                       cpu: int | None) -> tuple[Reference, RunResult]:
    """Run the baseline once (plain metric-free run): its output, and the run."""
    result = run_once(bench, exe, env, bench.run.timeout, metric="wall", cpu=cpu)
    if result.outcome != Outcome.OK:
        raise MeasureError(f"the baseline does not run: {result.outcome} {result.detail}; "
                           f"stderr: {result.stderr[-300:].decode('utf-8', 'replace')}")
    problem = baseline_files_problem(result.files)
    if problem:
        raise MeasureError(f"{problem} (in {bench.cwd}): list the files the benchmark "
                           "writes, relative to [run].cwd")
    return Reference(result.status, result.stdout, result.stderr, result.files,
                     result.stdout_cut), result


_parallel: dict[tuple[str, str, int], bool] = {}   # (exe, its command, mtime): in parallel?


def measured_cpu(bench: Benchmark, exe: str, env: dict[str, str],
                 progress: Progress | None) -> int | None:
    """The CPU the A/B runs are pinned to: none for a benchmark that runs in parallel,
    which one unpinned run of the baseline (once per baseline binary) tells."""
    cpu = pinned_cpu(bench.measure)
    if cpu is None:
        return None
    try:
        key = (exe, json.dumps(bench.run.command), os.stat(exe).st_mtime_ns)
    except OSError:
        return cpu          # the baseline's own run says what is wrong with it
    if key not in _parallel:
        probe = run_once(bench, exe, env, bench.run.timeout, metric="wall")
        _parallel[key] = probe.outcome == Outcome.OK and \
            runs_in_parallel(probe.cpu_time, probe.wall)
        if _parallel[key] and progress:
            _note_once("parallel", parallel_note(probe.cpu_time, probe.wall), progress)
    return None if _parallel[key] else cpu


SHORT_RUN_S = 0.05
_said: set[str] = set()      # the notes said in this process: each is said once


def _note_once(key: str, message: str, progress: Progress) -> None:
    if key not in _said:
        _said.add(key)
        progress(message)


def _note_a_short_run(wall: float, progress: Progress) -> None:
    """Below ~50 ms, process start-up and timer noise outweigh the code a candidate
    changes: say so once, with the fix, rather than let every verdict read UNCLEAR."""
    if wall < SHORT_RUN_S:
        _note_once("short", f"note: the benchmark runs in {wall * 1000:.0f} ms, where "
                   "start-up and timer noise weigh more than the code: give it a bigger "
                   "input ([run].command), so that a run takes 0.5-5 s", progress)


def _note_kernel_time(metric: str, run: RunResult, progress: Progress) -> None:
    """A run that spends much of its CPU time in the kernel, measured by a metric that
    counts it: the note names the metric that leaves it out."""
    share = run.kernel_time / run.cpu_time if run.cpu_time > 0 else 0.0
    if metric in ("wall", "cpu") and share >= KERNEL_SHARE_NOTE:
        longer = ("" if run.cpu_time >= USER_METRIC_MIN_S else
                  f", on a run of {USER_METRIC_MIN_S} s or more (a bigger input: the kernel "
                  "splits user from system time by timer ticks)")
        _note_once("kernel", f"note: the benchmark spends {share:.0%} of its CPU time in "
                   "the kernel (page faults, I/O, system calls): work no compiler flag "
                   "changes, and on a VM the part of a run that varies most; "
                   "[measure].metric = \"user\" (--metric user) measures the program's "
                   f"own code only{longer}", progress)


def _note_an_unchecked_output(bench: Benchmark, reference: Reference,
                              progress: Progress) -> None:
    """A benchmark that prints nothing (jsoncpp's test runner writes its result to files)
    leaves [check] mode = "output" only the exit code to compare: a candidate computing
    a wrong result would pass.  Said once, with the fixes."""
    if bench.check.mode in ("output", "numbers") and not reference.stdout.strip() \
            and not bench.check.files:
        _note_once("unchecked", "note: the benchmark prints nothing on stdout, so the output "
                   "check compares exit codes only: have [run].command print its result "
                   "(e.g. `sh -c '{exe} ... && cat OUTFILE'`), or name the files it writes "
                   "in [check].files", progress)


def compare(bench: Benchmark, base_exe: str, base_env: dict[str, str], cand_exe: str,
            cand_env: dict[str, str], progress: Progress | None = None,
            level: float = 0.95, baseline_memo: list[float] | None = None) -> Comparison:
    """Interleaved, adaptive A/B of a candidate against the baseline.

    `baseline_memo` (kept by the caller across comparisons) saves re-running the
    baseline when the metric is deterministic (instructions): its i-th value is reused
    as the baseline of pair i.  Timing metrics always re-run it, interleaved."""
    memo = baseline_memo if bench.measure.metric in DETERMINISTIC_METRICS else None
    cfg = bench.measure
    cpu = measured_cpu(bench, base_exe, base_env, progress)
    reference, reference_run = baseline_reference(bench, base_exe, base_env, cpu)
    base_wall = reference_run.wall
    if progress and cfg.metric in TIMED_METRICS:
        _note_a_short_run(base_wall, progress)
    if progress:
        _note_kernel_time(cfg.metric, reference_run, progress)
        _note_an_unchecked_output(bench, reference, progress)
    cand_timeout = max(1.0, cfg.timeout_factor * base_wall)
    runs = 1
    first = run_once(bench, cand_exe, cand_env, cand_timeout, metric="wall", cpu=cpu)
    runs += 1
    problem = _judge(bench, reference, first)
    if problem and problem[0] == Outcome.WRONG_OUTPUT:
        _baseline_output_holds(bench, base_exe, base_env, reference, cpu)
        runs += 1
    if problem:
        return Comparison(problem[0], runs=runs, detail=problem[1])
    for _ in range(max(0, cfg.warmup - 1)):
        run_once(bench, base_exe, base_env, bench.run.timeout * _metric_slowdown(cfg), cpu=cpu)
        runs += 1
    looks = stats.look_schedule(cfg.min_pairs, cfg.max_pairs)
    if cfg.metric not in DETERMINISTIC_METRICS:  # there, 2 equal pairs decide (see stats)
        looks = stats.useful_looks(looks, level)
    look_level = stats.per_look_level(level, len(looks))
    result = Comparison(Outcome.OK)
    while len(result.baseline) < cfg.max_pairs:
        order = ("base", "cand") if len(result.baseline) % 2 == 0 else ("cand", "base")
        pair: dict[str, float] = {}
        for which in order:
            n = len(result.baseline)
            if which == "base" and memo is not None and n < len(memo):
                pair["base"] = memo[n]
                continue
            exe, env, timeout = ((base_exe, base_env, bench.run.timeout) if which == "base"
                                 else (cand_exe, cand_env, cand_timeout))
            timeout *= _metric_slowdown(cfg)
            run = run_once(bench, exe, env, timeout, cpu=cpu)
            runs += 1
            if which == "cand":
                problem = _judge(bench, reference, run)
                if problem:
                    return Comparison(problem[0], runs=runs, detail=problem[1],
                                      baseline=result.baseline, candidate=result.candidate)
            elif run.outcome != Outcome.OK:
                raise MeasureError(f"the baseline failed during measurement: {run.outcome}")
            assert run.value is not None       # a run that finished OK has its metric
            if which == "base" and memo is not None:
                memo.append(run.value)
            pair[which] = run.value
        result.baseline.append(pair["base"])
        result.candidate.append(pair["cand"])
        n = len(result.baseline)
        if n in looks:
            est = stats.estimate(result.baseline, result.candidate, look_level,
                                 deterministic=cfg.metric in DETERMINISTIC_METRICS)
            result.estimate = est
            if progress:
                progress(f"{n} pairs: candidate/baseline {est.describe()}")
            decided = stats.verdict(est, cfg.precision, final=n >= cfg.max_pairs)
            if decided:
                result.verdict = decided
                break
    result.runs = runs
    return result


def _baseline_output_holds(bench: Benchmark, exe: str, env: dict[str, str],
                           reference: Reference, cpu: int | None) -> None:
    """A candidate's output differed: unless the baseline gives its own output again,
    the check cannot tell a wrong candidate from a benchmark that prints a time, a date
    or a random number, and every candidate would be rejected as WRONG_OUTPUT."""
    again = run_once(bench, exe, env, bench.run.timeout, metric="wall", cpu=cpu)
    why = check_output(bench, reference, again) if again.outcome == Outcome.OK else ""
    if why and bench.check.mode == "command":
        raise MeasureError(f"the [check] command rejects a run of the baseline itself "
                           f"({why[:120]}): fix the check, so that it passes the program "
                           "as recorded")
    if why:
        fix = ("take that file out of [check].files, or check it with a [check] command "
               "that ignores what varies" if "([check].files)" in why else
               "set [check] mode = \"exit-code\" (with [check].files naming the files it "
               "writes), or a [check] command that ignores what varies")
        pattern = ignore_suggestion(*(compared_lines(bench.check.ignore, out)
                                      for out in (reference.stdout, again.stdout)))
        if pattern and why.startswith("stdout line"):
            fix = (f"set [check] ignore = [{json.dumps(pattern)}] to skip that line (a "
                   f"regular expression), or {fix}")
        raise MeasureError(f"the benchmark's output changes from run to run of the same "
                           f"binary ({why[:120]}), so no candidate can pass the output "
                           f"check: {fix}")


def _metric_slowdown(cfg: MeasureConfig) -> float:
    return 60.0 if cfg.metric == "instructions" else 1.0  # callgrind is ~50x slower


def _judge(bench: Benchmark, reference: Reference, run: RunResult
           ) -> tuple[Outcome, str] | None:
    if run.outcome != Outcome.OK:
        return run.outcome, run.detail
    why = check_output(bench, reference, run)
    return (Outcome.WRONG_OUTPUT, why) if why else None
