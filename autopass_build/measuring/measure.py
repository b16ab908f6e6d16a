"""Judging a candidate against the baseline (A/B): baseline and candidate alternate
(ABBA...), each candidate run's output is checked against the baseline's, and pairs
accumulate until the interval of the ratio (see `stats.py`) separates from 1, or is
narrower than the precision, or the cap is hit.  One run of the benchmark is
measuring/benchmark.py's.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field, replace
from typing import Callable

from autopass_build.config import MeasureConfig
from autopass_build.core.outcome import Outcome
from autopass_build.measuring import stats
from autopass_build.measuring.benchmark import (
    DETERMINISTIC_METRICS,
    KERNEL_SHARE_NOTE,
    TIMED_METRICS,
    USER_METRIC_MIN_S,
    Benchmark,
    MeasureError,
    RunResult,
    run_once,
)
from autopass_build.measuring.cpu_pinning import (
    parallel_note,
    pinned_cpu,
    runs_in_parallel,
)
from autopass_build.measuring.duet import (
    Side,
    duet_cpus,
    run_both,
    swapped_pairs_merged,
    why_not,
)
from autopass_build.measuring.output_check import (
    Reference,
    baseline_files_problem,
    check_output,
    compared_lines,
    ignore_suggestion,
)


@dataclass
class Comparison:
    outcome: Outcome
    verdict: stats.Verdict | None = None
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


def tightened(cfg: MeasureConfig) -> MeasureConfig:
    """A final re-measurement's settings: twice the pairs, half the precision."""
    return replace(cfg, max_pairs=2 * cfg.max_pairs, precision=cfg.precision / 2)


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
        runnable: list[int] = []
        probe = run_once(bench, exe, env, bench.run.timeout, metric="wall", watch=runnable)
        _parallel[key] = probe.outcome == Outcome.OK and \
            runs_in_parallel(probe.cpu_time, probe.wall, runnable)
        if _parallel[key] and progress:
            _note_once("parallel", parallel_note(probe.cpu_time, probe.wall, runnable),
                       progress)
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
            level: float = 0.95, baseline_memo: list[float] | None = None,
            floor: float = stats.DETERMINISTIC_FLOOR, until: float | None = None
            ) -> Comparison:
    """Interleaved, adaptive A/B of a candidate against the baseline.

    `baseline_memo` (kept by the caller across comparisons) saves re-running the
    baseline when the metric is deterministic (instructions): its i-th value is reused
    as the baseline of pair i.  Timing metrics always re-run it, interleaved.  `floor`:
    the least log ratio a deterministic count is known to (stats.estimate).  `until`
    (time.monotonic(), the run's --time): past it, no pair starts after the first look;
    the pairs so far decide (stats.Sequential.judge)."""
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
    # on a deterministic metric 2 equal pairs decide (see stats)
    duet = _duet(bench, cpu, reference, progress)
    rule = stats.Sequential(cfg.min_pairs, cfg.max_pairs, cfg.precision, level,
                            deterministic=cfg.metric in DETERMINISTIC_METRICS,
                            pairs_per_value=1 if duet is None else 2, floor=floor)
    result = Comparison(Outcome.OK)
    slowdown = _metric_slowdown(cfg)
    sides = (Side(base_exe, base_env, bench.run.timeout * slowdown),
             Side(cand_exe, cand_env, cand_timeout * slowdown))
    while len(result.baseline) < cfg.max_pairs:
        base_value, cand_run, spent = _pair(bench, sides, memo, cpu, duet,
                                            len(result.baseline))
        runs += spent
        problem = _judge(bench, reference, cand_run)
        if problem and problem[0] == Outcome.WRONG_OUTPUT and duet is not None:
            # run under the partner's name: its output may name its own path
            alone = run_once(bench, cand_exe, cand_env, sides[1].timeout, cpu=cpu)
            runs += 1
            if _judge(bench, reference, alone) is None:
                duet = None
                if progress:
                    _note_once("duet-path", "note: the benchmark's output names the "
                               "program's own path, which a duet's partner runs under "
                               "another name: the pairs run one after the other", progress)
                continue
        if problem:
            return Comparison(problem[0], runs=runs, detail=problem[1],
                              baseline=result.baseline, candidate=result.candidate)
        assert cand_run.value is not None       # a run that finished OK has its metric
        result.baseline.append(base_value)
        result.candidate.append(cand_run.value)
        n = len(result.baseline)
        out_of_time = until is not None and time.monotonic() >= until
        base_values, cand_values = ((result.baseline, result.candidate) if duet is None or n < 2
                                    else swapped_pairs_merged(result.baseline, result.candidate))
        est, decided = rule.judge(base_values, cand_values, pairs=n, out_of_time=out_of_time)
        if est is not None:
            result.estimate = est
            if progress:
                progress(f"{n} pairs: {est.describe_speedup()}")
        if decided:
            result.verdict = decided
            if out_of_time and decided == stats.UNCLEAR and n < cfg.max_pairs and progress:
                progress(f"--time is up: judged on the {n} pairs so far")
            break
    result.runs = runs
    return result


def _pair(bench: Benchmark, sides: tuple[Side, Side], memo: list[float] | None,
          cpu: int | None, duet: tuple[int, int] | None, n: int
          ) -> tuple[float, RunResult, int]:
    """Pair `n`: the baseline's value, the candidate's run, and the runs it took.  One
    after the other, in ABBA order (a deterministic baseline's value from `memo`), or
    both at once on the `duet` CPUs."""
    base, cand = sides
    if duet is not None:
        base_run, cand_run = run_both(bench, base, cand, duet, swapped=n % 2 == 1)
        return _baseline_value(base_run), cand_run, 2
    remembered = memo[n] if memo is not None and n < len(memo) else None
    ran: dict[str, RunResult] = {}
    for which, side in ((("base", base), ("cand", cand)) if n % 2 == 0
                        else (("cand", cand), ("base", base))):
        if which == "base" and remembered is not None:
            continue
        ran[which] = run_once(bench, side.exe, side.env, side.timeout, cpu=cpu)
        if which == "cand" and ran[which].outcome != Outcome.OK:
            break                   # judged by the caller; the baseline need not run
    if "base" not in ran:           # remembered, or not run after a failed candidate
        return remembered or 0.0, ran["cand"], len(ran)
    value = _baseline_value(ran["base"])
    if memo is not None:
        memo.append(value)
    return value, ran["cand"], len(ran)


def _baseline_value(run: RunResult) -> float:
    if run.outcome != Outcome.OK:
        raise MeasureError(f"the baseline failed during measurement: {run.outcome}")
    assert run.value is not None       # a run that finished OK has its metric
    return run.value


def _duet(bench: Benchmark, cpu: int | None, reference: Reference,
          progress: Progress | None) -> tuple[int, int] | None:
    """The two CPUs of a duet ([measure].duet), or None: not asked, or not possible
    here (said once, with why)."""
    if not bench.measure.duet:
        return None
    why = why_not(bench.measure.metric, cpu, bool(reference.files or bench.check.files))
    if why:
        if progress:
            _note_once("duet", f"note: [measure].duet is on, but the pairs run one after "
                       f"the other: {why}", progress)
        return None
    assert cpu is not None
    return duet_cpus(cpu)


def _baseline_output_holds(bench: Benchmark, exe: str, env: dict[str, str],
                           reference: Reference, cpu: int | None) -> None:
    """A candidate's output differed: unless the baseline gives its own output again,
    the check cannot tell a wrong candidate from a benchmark that prints a time, a date
    or a random number, and every candidate would be rejected as WRONG_OUTPUT."""
    again = run_once(bench, exe, env, bench.run.timeout, metric="wall", cpu=cpu)
    why = check_output(bench, reference, again) if again.outcome == Outcome.OK else ""
    if why and bench.check.mode == "command":
        raise MeasureError(f"the [check] command rejects a run of the baseline itself "
                           f"({_clipped(why)}): fix the check, so that it passes the program "
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
                           f"binary ({_clipped(why)}), so no candidate can pass the output "
                           f"check: {fix}")


def _clipped(text: str, most: int = 160) -> str:
    """`text` cut to `most` characters, marked where cut (tinyxml2's timing line was
    cut inside its quote, which then read as the whole line)."""
    return text if len(text) <= most else text[:most].rstrip() + "..."


def _metric_slowdown(cfg: MeasureConfig) -> float:
    return 60.0 if cfg.metric == "instructions" else 1.0  # callgrind is ~50x slower


def _judge(bench: Benchmark, reference: Reference, run: RunResult
           ) -> tuple[Outcome, str] | None:
    if run.outcome != Outcome.OK:
        return run.outcome, run.detail
    why = check_output(bench, reference, run)
    return (Outcome.WRONG_OUTPUT, why) if why else None
