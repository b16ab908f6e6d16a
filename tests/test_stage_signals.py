"""Issue 64, case 1: `autopass tune` stopped at each step of its stage phase in turn --
the instrumented build, the PGO training run, the profile merge, the PGO+LTO link, a
composition's measurement, BOLT's instrumentation and rewrite; by Ctrl-C, SIGTERM or
kill -9 of the whole group -- says how to go on, and `tune --resume` ships
what a run never stopped ships.  The metric is instructions, so two runs measure the
same numbers and what each ships can be compared exactly."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from support import AUTOPASS, recorded_copy

from autopass_build.core import bolt_commands, flags_db
from autopass_build.tuning.journal import Journal
from autopass_build.tuning.tuner import FINISHED

LTO_MINI = Path(__file__).parent / "data" / "lto-mini"
BOLT_HERE = bolt_commands.missing() == ""
CONFIG = f"""
[build]
command = "make -s"
clean = "make -s clean"
[run]
command = ["{{exe}}", "50"]
[measure]
metric = "instructions"
layout_check = false
min_pairs = 2
max_pairs = 2
[tune]
strategy = "random"
budget = 6
stages = {'["pgo", "lto", "bolt"]' if BOLT_HERE else '["pgo", "lto"]'}
layout_min_kib = 0
"""
# (what tune says as the step starts, the signal, sent to the whole group or not), in
# the order of the steps: the instrumented build, the training run, the merge of its
# raw profiles, the PGO+LTO link and its measurement, a composition's measurement,
# BOLT's instrumentation and its rewrite
STOPS = [("instrumented (", signal.SIGTERM, True),
         ("training: running the benchmark", signal.SIGINT, True),
         ("training: merging", signal.SIGKILL, True),
         ("[stage 1 of 3] pgo+lto", signal.SIGINT, False),
         ("stage lto against the recorded build", signal.SIGTERM, False)] + (
    [("BOLT: instrumenting the linked binary", signal.SIGINT, True),
     ("BOLT: rewriting the binary", signal.SIGKILL, True)] if BOLT_HERE else [])


def _shipped(root: Path) -> tuple:
    """What a run shipped, as far as two runs of the same measurements must agree."""
    db = flags_db.load(str(root / "autopass.flags.json"))
    target = db.target
    return (target.stages if target else (), db.profile.hash if db.profile else None,
            target.bolt.hash if target and target.bolt else None,
            {source: entry.flags for source, entry in db.entries.items()})


def _stopped_at(root: Path, step: str, signum: int, group: bool, resume: bool) -> str:
    """`tune` (or `tune --resume`) run until it says `step`, then sent `signum`: what it
    said on stderr."""
    argv = [AUTOPASS, "tune"] + (["--resume"] if resume else [])
    tune = subprocess.Popen(argv, cwd=root, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, start_new_session=True)
    assert tune.stderr is not None
    said, deadline = b"", time.monotonic() + 300
    while step.encode() not in said and time.monotonic() < deadline:
        line = tune.stderr.readline()
        if not line:
            break
        said += line
    assert step.encode() in said, said.decode()
    if group:
        os.killpg(tune.pid, signum)
    else:
        os.kill(tune.pid, signum)
    _, rest = tune.communicate(timeout=120)
    text = (said + rest).decode()
    assert "Traceback" not in text, text
    if signum != signal.SIGKILL:
        assert tune.returncode == 130, text
        assert "autopass tune --resume" in text, text
    return text


@pytest.mark.slow
def test_a_stage_phase_stopped_at_any_step_resumes_to_what_an_unstopped_run_ships(tmp_path):
    whole = recorded_copy(LTO_MINI, tmp_path / "whole", CONFIG)
    done = subprocess.run([AUTOPASS, "tune"], cwd=whole, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    stopped = recorded_copy(LTO_MINI, tmp_path / "stopped", CONFIG)
    for number, (step, signum, group) in enumerate(STOPS):
        _stopped_at(stopped, step, signum, group, resume=number > 0)
    resumed = subprocess.run([AUTOPASS, "tune", "--resume"], cwd=stopped,
                             capture_output=True, text=True)
    assert resumed.returncode == 0, resumed.stderr
    assert "Traceback" not in resumed.stderr
    assert _shipped(stopped) == _shipped(whole)
    # each composition measured once in the run that was stopped at every step: what was
    # journaled before a stop is taken, not measured again
    journal = Journal.latest(str(stopped / ".autopass"))
    keys = [(e.phase, e.config) for e in journal.entries]
    assert len(keys) == len(set(keys)), keys
    assert len(list((stopped / ".autopass" / "runs").iterdir())) == 1 + 1  # the run, latest

    # stopped after its last measurement, before it shipped (kill -9 there leaves neither
    # the run's end mark nor the database): the steps on top kept before the stop (BOLT,
    # with the profile it was measured with) are shipped, nothing is measured again
    measured = len(journal.entries)
    Path(journal.folder, FINISHED).unlink()
    (stopped / "autopass.flags.json").unlink()
    again = subprocess.run([AUTOPASS, "tune", "--resume"], cwd=stopped, capture_output=True,
                           text=True)
    assert again.returncode == 0, again.stderr
    assert _shipped(stopped) == _shipped(whole)
    assert len(Journal.latest(str(stopped / ".autopass")).entries) == measured
