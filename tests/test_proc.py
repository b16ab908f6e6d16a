"""core/proc: the children autopass starts never outlive a stop."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

# A SIGTERM that lands while a child is being started: between its fork and Popen's
# return (a few ms, longer on a loaded machine).  The Popen here is the real one; the
# signal is sent from inside it, the one moment a test cannot otherwise hit.
SCENARIO = textwrap.dedent("""
    import os, signal, subprocess, sys
    from autopass_build.cli.main import _terminate
    from autopass_build.core import proc
    from autopass_build.config.loading import parse
    from autopass_build.measuring import benchmark

    SLEEPER = benchmark.Benchmark.from_config(parse('[run]\\ncommand = ["{{exe}}", "30"]'))

    started = []

    class SignalledWhileStarting(subprocess.Popen):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            started.append(self.pid)
            os.kill(os.getpid(), signal.SIGTERM)

    signal.signal(signal.SIGTERM, _terminate)
    subprocess.Popen = SignalledWhileStarting
    try:
        {call}
    except KeyboardInterrupt:
        pass
    alive = [pid for pid in started if os.path.exists(f"/proc/{{pid}}")
             and open(f"/proc/{{pid}}/stat").read().split(") ")[1][0] != "Z"]
    print("started", len(started), "alive", alive)
""")

CALLS = {
    "run_captured": 'proc.run_captured(["sleep", "30"], ".")',
    "run_build": 'proc.run_build(["sleep", "30"], dict(os.environ))',
    "run_once": "benchmark.run_once(SLEEPER, '/bin/sleep', {}, 60)",
}


@pytest.mark.parametrize("call", sorted(CALLS))
def test_a_stop_while_a_child_starts_stops_that_child(call):
    done = subprocess.run([sys.executable, "-c", SCENARIO.format(call=CALLS[call])],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["started", "1", "alive", "[]"]
