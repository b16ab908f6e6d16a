"""An A/B started shortly before `tune --time` ends stops taking pairs when the time is
up (RELIABILITY F105).  Before, a step given its place by an estimate of its cost took
every pair its verdict wanted: cppcheck's layout step took 60 pairs of a 2.2 s run,
and the run ended 2.6 minutes past `--time 25m`.

The pairs so far decide, and only at a look of the schedule the verdict rule is
calibrated for (stats.Sequential): stopping early can leave a step unclear, never make
one faster."""

from __future__ import annotations

import math
import random
import time

from support import c_program

from autopass_build import config as cfg
from autopass_build.core.outcome import Outcome
from autopass_build.measuring import stats
from autopass_build.measuring.benchmark import Benchmark
from autopass_build.measuring.measure import compare

SPIN = r"""
#include <stdio.h>
int main(void) {
    volatile unsigned long spin = 0;
    for (unsigned long i = 0; i < 3000000UL; i++) spin += i;
    printf("%lu\n", (unsigned long)spin);
    return 0;
}
"""


def test_out_of_time_ends_the_ab_and_decides_only_at_a_scheduled_look() -> None:
    rule = stats.Sequential(10, 40, precision=0.01)
    assert rule.looks == [10, 20, 40]
    rng = random.Random(7)
    base = [math.exp(rng.gauss(0, 0.05)) for _ in range(40)]
    alike = [math.exp(rng.gauss(0, 0.05)) for _ in range(40)]
    faster = [0.8 * b for b in base]
    # before the first look nothing can be said: the pairs go on to it
    assert rule.judge(base[:5], faster[:5], out_of_time=True) == (None, None)
    # between looks: the A/B ends, unclear, even where a look would call it faster
    est, decided = rule.judge(base[:15], faster[:15], out_of_time=True)
    assert decided == stats.UNCLEAR and est is not None and est.ratio < 0.85
    assert rule.judge(base[:15], faster[:15]) == (None, None)
    # at a look: the look is the last one; what it can tell it still tells
    assert rule.judge(base[:20], alike[:20])[1] is None      # in time, more pairs follow
    assert rule.judge(base[:20], alike[:20], out_of_time=True)[1] == stats.UNCLEAR
    assert rule.judge(base[:20], faster[:20], out_of_time=True)[1] == stats.FASTER


def test_a_comparison_past_its_time_stops_at_its_first_look(tmp_path) -> None:
    """A real A/B of one program against its copy, with a precision no pair count
    reaches (the rule would take all 64 pairs): past its time, it ends at the first
    look and says so."""
    program = c_program(tmp_path, "spin", SPIN)
    copy = tmp_path / "spin-copy"
    copy.write_bytes(program.read_bytes())
    copy.chmod(0o755)
    config = cfg.parse('[run]\ncommand = ["{exe}"]\ntimeout = 30\n[measure]\nmetric = "cpu"\n'
                       'min_pairs = 4\nmax_pairs = 64\nprecision = 0.0001\n',
                       project_dir=str(tmp_path))
    first_look = stats.Sequential(4, 64, 0.0001).looks[0]
    said: list[str] = []
    result = compare(Benchmark.from_config(config), str(program), {}, str(copy), {},
                     progress=said.append, until=time.monotonic())
    assert result.outcome == Outcome.OK, result.detail
    assert len(result.baseline) == first_look < 64, said
    if result.verdict == stats.UNCLEAR:     # a same-program A/B: the usual verdict
        assert said[-1] == f"--time is up: judged on the {first_look} pairs so far", said
    else:                                   # a look's false alarm ends it there too
        assert result.verdict in (stats.FASTER, stats.SLOWER), said
