"""Duet measurement ([measure].duet): each pair's baseline and candidate run at the
same time, each pinned to a CPU of its own, the CPUs swapped from one pair to the next.

On a shared or virtual machine most noise comes in bursts that slow everything running
at that moment (another tenant, the hypervisor taking the CPUs back, a cron job): runs
one after the other meet different bursts, runs at once meet the same one, and their
ratio cancels it.  Published duet benchmarking (Bulej et al., 2020) found its
measurements in cloud instances several times less variable.  What it costs: the two
runs share the caches and memory bandwidth, which slows both alike, and it needs two
CPUs free of anything else.  bench/measure_calibration.py --duet measures it side by
side with one-at-a-time pairs: on the 2-CPU VM autopass is developed on, A/A intervals
came out about 3x wider (one of the two CPUs is CPU 0, which also serves interrupts and
this process; the two runs share a core's caches), so it is off by default.

It is not used where it cannot be fair or safe (said once, with the reason): a metric
that counts rather than times, a benchmark that runs in parallel or writes files (two
runs at once would write the same ones), runs that are not pinned, or fewer than two
CPUs to run on.  The two run under two names of one length (binaries.stable_name); a
program whose output names its own path is found by its first differing pair and
measured one run at a time from there (measure.py).
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from autopass_build.measuring.benchmark import (
    DETERMINISTIC_METRICS,
    Benchmark,
    RunResult,
    run_once,
)
from autopass_build.measuring.binaries import SLOTS


@dataclass(frozen=True)
class Side:
    """One program of a pair: what to run and how long it may take."""
    exe: str
    env: dict[str, str]
    timeout: float


def duet_cpus(cpu: int) -> tuple[int, int] | None:
    """The pinned `cpu` and another this process may run on (the highest other than
    CPU 0 where there is one, for interrupts tend to land there), or None."""
    try:
        allowed = sorted(os.sched_getaffinity(0) - {cpu}, reverse=True)
    except (OSError, AttributeError):
        return None
    others = [c for c in allowed if c != 0] or allowed
    return (cpu, others[0]) if others else None


def why_not(metric: str, cpu: int | None, files_written: bool) -> str:
    """Why a duet cannot measure these runs ("" when it can)."""
    if metric in DETERMINISTIC_METRICS:
        return f"the {metric} metric counts, and a count needs no partner"
    if cpu is None:
        return "the runs are not pinned (the benchmark runs in parallel, or pin_cpu is off)"
    if files_written:
        return "the benchmark writes files, and two runs at once would write the same ones"
    if duet_cpus(cpu) is None:
        return "this process may run on one CPU only"
    return ""


def run_both(bench: Benchmark, base: Side, cand: Side, cpus: tuple[int, int],
             swapped: bool) -> tuple[RunResult, RunResult]:
    """The baseline and the candidate started together, each on one of `cpus` (swapped
    every other pair, so that neither CPU favours one side); both results."""
    base_cpu, cand_cpu = (cpus[1], cpus[0]) if swapped else cpus
    with ThreadPoolExecutor(max_workers=2) as pool:   # each waits on its own child
        base_run = pool.submit(run_once, bench, base.exe, base.env, base.timeout,
                               cpu=base_cpu)
        cand_run = pool.submit(run_once, bench, cand.exe, cand.env, cand.timeout,
                               cpu=cand_cpu, slot=SLOTS[1])
        return base_run.result(), cand_run.result()


def swapped_pairs_merged(base: list[float], cand: list[float]
                         ) -> tuple[list[float], list[float]]:
    """Each two pairs whose CPUs were swapped, as one (geometric means): a CPU slower
    than the other (CPU 0 takes the interrupts) adds to one pair's ratio what it takes
    from the next's, and would otherwise widen the interval by itself."""
    import math

    n = len(base) // 2 * 2
    return ([math.sqrt(base[i] * base[i + 1]) for i in range(0, n, 2)],
            [math.sqrt(cand[i] * cand[i + 1]) for i in range(0, n, 2)])
