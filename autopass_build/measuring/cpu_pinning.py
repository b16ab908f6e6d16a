"""Which CPU a measured run is held to, and how it is held there.

Pinning a single-threaded benchmark to one CPU (away from CPU 0, where interrupts tend
to land) takes the scheduler's migrations out of the noise.  Two things it must not do:

- let the program start before it is pinned: a runtime that sizes itself from its
  affinity at start-up (OpenMP, `nproc`, thread pools) would read one CPU in one run and
  all of them in the next, and a baseline and a candidate would not be comparable.  So
  the affinity is set on the spawning thread before the fork and inherited through exec.
- squeeze a program that runs in parallel onto one CPU: it would be tuned for a machine
  its users do not have.  One unpinned run of the baseline shows how many CPUs it keeps
  busy; one that keeps more than one busy is measured unpinned, with a note.
"""

from __future__ import annotations

import contextlib
import os
from typing import Iterator

from autopass_build.config import MeasureConfig

# cpu time / wall time above which a run is taken to be parallel: a single-threaded
# program, or one that runs its helpers one after another, stays at or below 1.0.
PARALLEL_RATIO = 1.25


CLAIMS = "/tmp/autopass-bench-cpus"   # host-wide: one lock file per CPU and slot
_claimed: int | None = None            # the CPU this process claimed (claim_cpu)
_claim_handle = None                   # its lock, held for the process's life


def pinned_cpu(measure: MeasureConfig) -> int | None:
    """The CPU this process claimed, else the last CPU we may run on; None where pinning
    is off or unavailable."""
    if not measure.pin_cpu:
        return None
    if _claimed is not None:
        return _claimed
    try:
        allowed = sorted(os.sched_getaffinity(0))
    except (OSError, AttributeError):
        return None
    return allowed[-1] if len(allowed) > 1 else None


def claim_cpu() -> tuple[int | None, int]:
    """A CPU of this host for this process's measured runs, held until it exits: the
    last one no other process claimed, else the one claimed by the fewest.  Several
    measuring nodes of a cluster on one host (one per NUMA domain, or a test's) would
    otherwise all pin their runs to the same last CPU and time each other.  Returns
    (the CPU, how many processes held it before): 0 means it is this process's alone."""
    import fcntl

    global _claimed, _claim_handle
    try:
        allowed = sorted(os.sched_getaffinity(0), reverse=True)
        os.makedirs(CLAIMS, exist_ok=True)
    except (OSError, AttributeError):
        return None, 0
    for sharing in range(64):
        for cpu in allowed:
            handle = open(os.path.join(CLAIMS, f"cpu{cpu}.{sharing}"), "a")
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                handle.close()
                continue
            _claimed, _claim_handle = cpu, handle
            return cpu, sharing
    return None, 0


@contextlib.contextmanager
def spawned_on(cpu: int | None) -> Iterator[None]:
    """Processes started inside this block start on `cpu` alone.

    Linux's sched_setaffinity(0) applies to the calling thread only, and a fork inherits
    that thread's mask, so other threads of ours are untouched; the mask is put back
    after.  Pinning is an improvement, not a requirement: where it fails, runs go on."""
    if cpu is None:
        yield
        return
    try:
        before = os.sched_getaffinity(0)
        os.sched_setaffinity(0, {cpu})
    except (OSError, AttributeError):
        yield
        return
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


# Of a run's looks at its threads, the share with two or more runnable above which it
# runs in parallel: it asks for several CPUs a quarter of its time at least.
PARALLEL_LOOKS = 0.25


def runs_in_parallel(cpu_time: float, wall: float, runnable: list[int] | None = None) -> bool:
    """Whether a run kept more than one CPU busy: by its CPU time over its wall time, or,
    on a machine too loaded to give it the CPUs it asks for, by how often two or more
    of its threads were runnable at once (`runnable`: proc.runnable_threads, looked at
    as it ran)."""
    return (wall > 0 and cpu_time > PARALLEL_RATIO * wall) or _asks_for_cpus(runnable)


def _asks_for_cpus(runnable: list[int] | None) -> bool:
    looks = runnable or []
    return bool(looks) and sum(n >= 2 for n in looks) >= PARALLEL_LOOKS * len(looks)


def parallel_note(cpu_time: float, wall: float, runnable: list[int] | None = None) -> str:
    how = (f"keeps {cpu_time / wall:.1f} CPUs busy (cpu time over wall time)"
           if wall > 0 and cpu_time > PARALLEL_RATIO * wall else
           f"has two or more threads runnable at once in "
           f"{sum(n >= 2 for n in runnable or []) / max(1, len(runnable or [])):.0%} of "
           "looks at it")
    return (f"note: the benchmark {how}: it runs in parallel, so it is measured unpinned, "
            "as its users run it; pinning would put all its threads and processes on one "
            "CPU")
