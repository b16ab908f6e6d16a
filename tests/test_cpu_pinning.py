"""Measured runs are pinned to one CPU before they start, unless they run in parallel.

RELIABILITY F45: an OpenMP program was measured with `omp_get_max_threads() == 1` in 30
of 30 pinned runs, tuned for one CPU its users do not have, and the affinity was set just
after exec, a race with any runtime that sizes itself at start-up."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from support import c_program

from autopass_build import config as cfg
from autopass_build.core.outcome import Outcome
from autopass_build.instruments.benchmark import Benchmark, run_once
from autopass_build.instruments.cpu_pinning import pinned_cpu
from autopass_build.instruments.measure import compare

pytestmark = pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2,
                                reason="pinning needs two CPUs to choose from")

# Prints how many CPUs it may use, read first thing (as OpenMP and thread pools do), then
# keeps `argv[1]` threads busy for about 0.4 s each.
SIZES_ITSELF = r"""
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
static void *spin(void *sink) {
    volatile unsigned long s = 0;
    for (unsigned long i = 0; i < 150000000UL; i++) s += i;
    *(unsigned long *)sink = s;
    return 0;
}
int main(int argc, char **argv) {
    cpu_set_t set;
    sched_getaffinity(0, sizeof set, &set);
    printf("cpus %d\n", CPU_COUNT(&set));
    int n = atoi(argv[1]);
    pthread_t threads[8];
    unsigned long sinks[8];
    for (int i = 0; i < n; i++) pthread_create(&threads[i], 0, spin, &sinks[i]);
    for (int i = 0; i < n; i++) pthread_join(threads[i], 0);
    return 0;
}
"""


@pytest.fixture(scope="module")
def sizes_itself(tmp_path_factory) -> Path:
    return c_program(tmp_path_factory.mktemp("pinning"), "sizes", SIZES_ITSELF, "-pthread")


def bench_for(folder: Path, threads: int, command: str = '["{exe}", "THREADS"]') -> Benchmark:
    command = command.replace("THREADS", str(threads))
    config = cfg.parse(f"[run]\ncommand = {command}\ntimeout = 30\n"
                       "[measure]\nmin_pairs = 2\nmax_pairs = 2\n", project_dir=str(folder))
    return Benchmark.from_config(config)


def test_a_pinned_run_is_on_its_cpu_from_its_first_instruction(sizes_itself) -> None:
    bench = bench_for(sizes_itself.parent, 1)
    cpu = pinned_cpu(bench.measure)
    assert cpu == max(os.sched_getaffinity(0))      # away from CPU 0
    pinned = run_once(bench, str(sizes_itself), {}, 30, cpu=cpu)
    free = run_once(bench, str(sizes_itself), {}, 30)
    assert pinned.stdout == b"cpus 1\n"
    assert free.stdout == f"cpus {len(os.sched_getaffinity(0))}\n".encode()
    assert os.sched_getaffinity(0) != {cpu}          # our own mask is given back


def test_a_parallel_benchmark_is_measured_unpinned_and_says_so(sizes_itself, tmp_path) -> None:
    """Two busy threads keep two CPUs busy: every run (reference and pairs) sees all the
    CPUs, so the output check passes, and the note says why."""
    candidate = tmp_path / "candidate"
    shutil.copy(sizes_itself, candidate)
    said: list[str] = []
    result = compare(bench_for(sizes_itself.parent, 2), str(sizes_itself), {},
                     str(candidate), {}, progress=said.append)
    assert result.outcome == Outcome.OK, result.detail
    assert [line for line in said if "CPUs busy" in line and "measured unpinned" in line]


def test_a_single_threaded_benchmark_stays_pinned(sizes_itself, tmp_path) -> None:
    """One thread: after the one unpinned look, every run is pinned, and nothing is said."""
    candidate = tmp_path / "candidate"
    shutil.copy(sizes_itself, candidate)
    said: list[str] = []
    logging = bench_for(tmp_path, 1, '["sh", "-c", "{exe} THREADS | tee -a seen.log"]')
    result = compare(logging, str(sizes_itself), {}, str(candidate), {},
                     progress=said.append)
    assert result.outcome == Outcome.OK, result.detail
    assert not [line for line in said if "CPUs busy" in line]
    everyone = len(os.sched_getaffinity(0))
    seen = (tmp_path / "seen.log").read_text().splitlines()
    assert seen[0] == f"cpus {everyone}" and len(seen) >= 4
    assert set(seen[1:]) == {"cpus 1"}
