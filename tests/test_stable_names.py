"""The folder of stable names each measuring process makes in $TMPDIR (F101)."""

from __future__ import annotations

import os
import subprocess
import tempfile
import time

from autopass_build.measuring import binaries


def test_a_folder_left_by_a_process_that_is_gone_is_swept(tmp_path, monkeypatch) -> None:
    """F101: a process killed without its exit handler (kill -9, a cluster node's bench
    ended by Ray) left its stable-name folder in $TMPDIR, one a run (nine in /tmp after
    an hour and a half of runs and tests).  The next process's first run sweeps
    those of processes that are gone, untouched for a day; a live process's folder, one
    used lately (a process of another PID namespace sharing $TMPDIR looks gone) and
    others stay."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(binaries, "_stable_folder", [])
    gone = subprocess.Popen(["true"])
    gone.wait()                       # its pid names no process now
    left = tmp_path / f"autopass-exe-{gone.pid}-x1y2"
    (left / "a").mkdir(parents=True)
    (left / "a" / "prog").symlink_to("/bin/true")
    alive = tmp_path / f"autopass-exe-{os.getppid()}-live"
    alive.mkdir()
    older = tmp_path / "autopass-exe-k3j4"       # an older autopass's name: no pid
    other = tmp_path / "something-else"
    older.mkdir()
    other.mkdir()
    recent = tmp_path / f"autopass-exe-{gone.pid}-used"    # gone from here, used lately:
    (recent / "a").mkdir(parents=True)                   # another PID namespace's?
    day_ago = time.time() - binaries.SWEEP_AFTER_S - 60
    for folder in (left, left / "a"):
        os.utime(folder, (day_ago, day_ago))
    link = binaries.stable_name("/bin/true")
    assert not left.exists()
    assert alive.exists() and older.exists() and other.exists() and recent.exists()
    ours = os.path.dirname(os.path.dirname(link))
    assert os.path.basename(ours).startswith(f"autopass-exe-{os.getpid()}-")
    assert os.path.dirname(ours) == str(tmp_path)
