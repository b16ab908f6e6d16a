"""How much each timed metric varies between runs of one binary, and which to measure by.

The A/B needs pairs in proportion to the variance of its metric, and which timed metric
is steadiest depends on the program and the host (12 runs each, the 2-core VM):

    program, run            wall     cpu     user
    cmark, 1.2 s            7.2 %    8.1 %   2.5 %    26 % of its CPU time in the kernel
    LAME, 0.75 s            1.0 %    1.0 %   0.5 %
    Lua, 0.07 s             1.1 %    1.0 %   4.6 %    user/sys split by 4 ms timer ticks
    bzip2, 0.13 s           0.3 %    0.2 %   2.5 %

So `profile` measures them on the recorded build and says when another one would need
clearly fewer pairs than the configured one.  A benchmark that keeps several CPUs busy
is left to wall time (its users wait for the wall clock, and cpu and user add the
threads up); a long one is not run again (at most ~20 s spent here).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from autopass_build.core.outcome import Outcome
from autopass_build.measuring.benchmark import TIMED_METRICS, Benchmark, run_once
from autopass_build.measuring.cpu_pinning import pinned_cpu
from autopass_build.measuring.measure import measured_cpu

SPENT_S = 20.0        # at most this long in extra runs
MOST_RUNS = 8
FEWEST_RUNS = 5       # below this, a spread says too little to advise on
CLEARLY = 1.5         # another metric's spread must be this much smaller to be suggested
KERNEL_NOTED = 15.0   # % of the run in the kernel at which the profile names metric user


@dataclass(frozen=True)
class Steadiness:
    runs: int
    spread: dict[str, float]      # metric -> coefficient of variation over the runs, %

    def steadiest(self) -> str:
        return min(TIMED_METRICS, key=lambda metric: self.spread[metric])

    def text(self) -> str:
        return (f"run-to-run spread of the recorded build ({self.runs} runs): "
                + ", ".join(f"{m} {self.spread[m]:.1f}%" for m in TIMED_METRICS))

    def advice(self, configured: str, kernel: float = 0.0) -> str:
        """A line naming a clearly steadier metric than `configured`, or "".  Where the
        profile put `kernel` % of the run in the kernel and said `user` leaves it out,
        a line naming another metric says why user is not it here."""
        best = self.steadiest()
        if configured not in TIMED_METRICS or best == configured or \
                self.spread[configured] < CLEARLY * self.spread[best]:
            return ""
        fewer = (self.spread[configured] / max(self.spread[best], 1e-9)) ** 2
        why_not_user = (f"; user, which leaves the kernel's {kernel:.0f}% out, varies more "
                        f"here ({self.spread['user']:.1f}%: a short run's user time is "
                        "counted in 4 ms ticks)" if best != "user" and kernel >= KERNEL_NOTED
                        else "")
        return (f'[measure].metric = "{best}" (now "{configured}") would need about '
                f"{fewer:.0f}x fewer pairs for the same precision{why_not_user}")


def steadiness(bench: Benchmark, exe: str, env: dict[str, str]) -> Steadiness | None:
    """Spread of wall, cpu and user over a few runs of `exe` as the A/B runs it, or None
    where it would not advise (a parallel or long benchmark, a failing run)."""
    cpu = measured_cpu(bench, exe, env, None)
    if cpu is None and pinned_cpu(bench.measure) is not None:    # runs in parallel
        return None
    first = run_once(bench, exe, env, bench.run.timeout, metric="wall", cpu=cpu)  # warm-up
    if first.outcome != Outcome.OK:
        return None
    count = min(MOST_RUNS, int(SPENT_S / max(first.wall, 1e-3)))
    if count < FEWEST_RUNS:
        return None
    values: dict[str, list[float]] = {metric: [] for metric in TIMED_METRICS}
    for _ in range(count):
        run = run_once(bench, exe, env, bench.run.timeout, metric="wall", cpu=cpu)
        if run.outcome != Outcome.OK:
            return None
        for metric, value in zip(TIMED_METRICS, (run.wall, run.cpu_time, run.user_time)):
            values[metric].append(value)
    spread = {metric: 100 * statistics.stdev(v) / statistics.mean(v) if min(v) > 0
              else float("inf") for metric, v in values.items()}
    return Steadiness(count, spread)
