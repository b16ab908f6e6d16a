"""Which time the A/B measures.  RELIABILITY F62: metric `user`, the benchmark's own
code without the time the kernel spends for it.

A markdown parser building an 80 MB document's tree spent 26 % of its CPU time in the
kernel (page faults); over 12 runs of one binary its sys time varied by 30 %, its user
time by 2 %, so under metric cpu every stage and candidate read "unclear" (intervals of
+-15 % after 30 pairs).  Compiler flags change the user part; `compare` says so once when
the kernel's share is large, naming the metric that leaves it out, and `profile` measures
how much each timed metric varies and names a clearly steadier one."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from support import AUTOPASS, c_program, recorded_copy

from autopass_build import config as cfg
from autopass_build.core.outcome import Outcome
from autopass_build.instruments.measure import Benchmark, compare, run_once
from autopass_build.instruments.steadiness import Steadiness

# Maps, touches and unmaps 8 MB 40 times (about 80 000 page faults: kernel time), then
# spins a little in user code; prints a checksum so the output check has something.
PAGE_FAULTS = r"""
#include <stdio.h>
#include <sys/mman.h>
int main(void) {
    unsigned long sum = 0;
    for (int round = 0; round < 40; round++) {
        unsigned char *p = mmap(0, 8 << 20, PROT_READ | PROT_WRITE,
                                MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        for (long i = 0; i < (8 << 20); i += 4096) { p[i] = (unsigned char)i; sum += p[i]; }
        munmap(p, 8 << 20);
    }
    volatile unsigned long spin = 0;
    for (unsigned long i = 0; i < 20000000UL; i++) spin += i;
    printf("%lu\n", sum);
    return 0;
}
"""


@pytest.fixture(scope="module")
def faults(tmp_path_factory) -> Path:
    return c_program(tmp_path_factory.mktemp("kernel"), "faults", PAGE_FAULTS)


def bench_for(folder: Path, metric: str) -> Benchmark:
    config = cfg.parse(f'[run]\ncommand = ["{{exe}}"]\ntimeout = 30\n[measure]\n'
                       f'metric = "{metric}"\nmin_pairs = 2\nmax_pairs = 2\n',
                       project_dir=str(folder))
    return Benchmark.from_config(config)


def test_metric_user_leaves_the_kernel_time_out(faults) -> None:
    run = run_once(bench_for(faults.parent, "user"), str(faults), {}, 30)
    assert run.outcome == Outcome.OK, run.detail
    assert run.kernel_time > 0.01                      # the page faults were counted...
    assert run.value == pytest.approx(run.cpu_time - run.kernel_time)   # ...and left out
    cpu = run_once(bench_for(faults.parent, "cpu"), str(faults), {}, 30)
    assert cpu.value == pytest.approx(cpu.cpu_time)


@pytest.mark.parametrize("metric, noted", [("cpu", True), ("wall", True), ("user", False)])
def test_a_run_mostly_in_the_kernel_is_noted_with_the_metric_that_fits(
        faults, tmp_path, metric, noted) -> None:
    from autopass_build.instruments import measure
    measure._said.discard("kernel")                    # said once per process
    candidate = tmp_path / "candidate"
    shutil.copy(faults, candidate)
    said: list[str] = []
    result = compare(bench_for(faults.parent, metric), str(faults), {}, str(candidate), {},
                     progress=said.append)
    assert result.outcome == Outcome.OK, result.detail
    kernel = [line for line in said if "in the kernel" in line]
    assert bool(kernel) == noted, said
    if noted:      # a 0.1 s run: `user` would need a longer one to be steadier than cpu
        assert 'metric = "user"' in kernel[0] and "--metric user" in kernel[0]
        assert "0.5 s or more" in kernel[0] and "timer ticks" in kernel[0]


def test_a_long_run_is_told_the_metric_alone() -> None:
    """At 0.5 s and more, the tick-sampled split of user from system time errs by a few
    ticks in hundreds: the note names the metric without asking for a bigger input."""
    from autopass_build.instruments import measure
    cmark_like = measure.RunResult(Outcome.OK, 1.2, 1.25, 0, b"", b"", cpu_time=1.16,
                                   kernel_time=0.30)
    for metric, said in (("cpu", True), ("user", False), ("instructions", False)):
        measure._said.discard("kernel")
        lines: list[str] = []
        measure._note_kernel_time(metric, cmark_like, lines.append)
        assert bool(lines) == said, (metric, lines)
        if said:
            assert "26%" in lines[0] and "--metric user" in lines[0]
            assert "0.5 s or more" not in lines[0]


def test_the_steadiest_metric_is_advised_only_when_clearly_steadier() -> None:
    """The spreads measured on cmark, LAME and Lua (steadiness.py's table)."""
    cmark = Steadiness(12, {"wall": 7.2, "cpu": 8.1, "user": 2.5})
    assert cmark.steadiest() == "user"
    assert cmark.advice("cpu") == ('[measure].metric = "user" (now "cpu") would need about '
                                   "10x fewer pairs for the same precision")
    assert cmark.advice("user") == ""
    assert cmark.advice("instructions") == ""          # not a timed metric: not compared
    lame = Steadiness(12, {"wall": 1.0, "cpu": 1.0, "user": 0.5})
    assert "about 4x fewer pairs" in lame.advice("wall")
    lua = Steadiness(12, {"wall": 1.1, "cpu": 1.0, "user": 4.6})
    assert lua.advice("wall") == ""                     # 1.1x: not clearly steadier
    assert 'metric = "cpu" (now "user")' in lua.advice("user")


def test_profile_says_how_steady_each_timed_metric_is(tmp_path) -> None:
    root = recorded_copy(Path(__file__).parent / "data" / "attr-mini", tmp_path / "mini",
                         '[run]\ncommand = ["{exe}", "3000"]\n[measure]\nmetric = "cpu"\n')
    done = subprocess.run([AUTOPASS, "profile"], cwd=root, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    [line] = [s for s in done.stdout.splitlines() if s.startswith("run-to-run spread")]
    assert re.fullmatch(r"run-to-run spread of the recorded build \(\d runs\): "
                        r"wall \d+\.\d%, cpu \d+\.\d%, user \d+\.\d%", line), line
