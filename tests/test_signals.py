"""Signals at every step of a build under autopass (docs/RELIABILITY.md F63): real make,
real clang behind a slow front (a script that sleeps first), real signals.  A killed
compile is never taken for a rejected flag, nothing is left that a later build would
trust, the exit status is the signal's, no traceback reaches the build's log."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import psutil
import pytest
from support import AUTOPASS, AUTOPASS_CC, fake_compiler, write

from autopass_build.capture.apply.applier import compiler_id
from autopass_build.core.files import hash_file

MAKEFILE = "app: a.o b.o\n\t$(CC) -o app a.o b.o\n%.o: %.c\n\t$(CC) -O2 -c $< -o $@\n"
A = "int b(int);\nint main(void) { return b(3) == 9 ? 0 : 1; }\n"
B = "int b(int x) { return x * 3; }\n"


def _project(root: Path) -> Path:
    write(root / "Makefile", MAKEFILE)
    write(root / "a.c", A)
    write(root / "b.c", B)
    return root


def _slow_clang(folder: Path, clang: str, log: Path) -> str:
    """clang after a 30 s sleep (the sleep is where the signal lands)."""
    return fake_compiler(folder, "slow-clang",
                         f'case "$*" in *--version*) exec "{clang}" "$@";; esac\n'
                         f'echo "$*" >> "{log}"\nsleep 30\nexec "{clang}" "$@"\n')


def _wait_for(pid: int, name: str) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if any(c.name() == name for c in psutil.Process(pid).children(recursive=True)):
                return
        except psutil.Error:
            pass
        time.sleep(0.05)
    raise AssertionError(f"no {name} under {pid}")


def _tree_gone(pids: list[int]) -> bool:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        alive = [p for p in pids if psutil.pid_exists(p)
                 and psutil.Process(p).status() != psutil.STATUS_ZOMBIE]
        if not alive:
            return True
        time.sleep(0.1)
    return False


def _database(root: Path, clang: str) -> Path:
    db = root / "autopass.flags.json"
    entries = {name: {"flags": ["-O1"], "source_hash": hash_file(str(root / name))}
               for name in ("a.c", "b.c")}
    db.write_text(json.dumps({"schema": 1, "cpu": None, "entries": entries,
                              "toolchain": {"compiler": compiler_id(clang), "target": ""}}))
    return db


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupted_apply_build_keeps_no_plain_object(tmp_path, clang, signum):
    """Ctrl-C (the build's whole process group) or SIGTERM to it during a tuned compile:
    no plain compile follows, no object is left, and the next apply build compiles the
    units with their tuned flags (it used to find a plain object and trust it)."""
    root = _project(tmp_path / "p")
    db = _database(root, clang)
    log = tmp_path / "calls.log"
    env = {**os.environ, "AUTOPASS_CC": _slow_clang(tmp_path, clang, log)}
    build = subprocess.Popen([AUTOPASS, "apply", "--db", str(db), "--", "make"], cwd=root,
                             env=env, start_new_session=True, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
    _wait_for(build.pid, "sleep")
    tree = [p.pid for p in psutil.Process(build.pid).children(recursive=True)]
    os.killpg(build.pid, signum)
    _, err = build.communicate(timeout=30)
    assert build.returncode == 128 + signum, err
    assert b"Traceback" not in err and b"rejected the tuned flags" not in err, err
    assert _tree_gone(tree)
    assert not list(root.glob("*.o"))
    assert len(log.read_text().splitlines()) == 1     # the interrupted compile, and no other
    again = subprocess.run([AUTOPASS, "apply", "--db", str(db), "--policy", "error", "--",
                            "make"], cwd=root, capture_output=True)
    assert again.returncode == 0, again.stderr
    subprocess.run([clang, "-O2", "-c", "b.c", "-O1", "-o", "tuned.o"], cwd=root, check=True)
    assert (root / "b.o").read_bytes() == (root / "tuned.o").read_bytes()


def test_sigterm_to_autopass_alone_stops_the_whole_build(tmp_path, clang):
    """A CI timeout's SIGTERM to `autopass record` only: make, the launcher and the
    compiler stop too (they ran on as orphans), and record exits as the signal says."""
    root = _project(tmp_path / "p")
    log = tmp_path / "calls.log"
    env = {**os.environ, "AUTOPASS_CC": _slow_clang(tmp_path, clang, log)}
    build = subprocess.Popen([AUTOPASS, "record", "--", "make"], cwd=root, env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    _wait_for(build.pid, "sleep")
    tree = [p.pid for p in psutil.Process(build.pid).children(recursive=True)]
    build.send_signal(signal.SIGTERM)
    _, err = build.communicate(timeout=30)
    assert build.returncode == 128 + signal.SIGTERM, err
    assert b"interrupted (signal 15)" in err and b"Traceback" not in err
    assert _tree_gone(tree), [psutil.Process(p).cmdline() for p in tree
                              if psutil.pid_exists(p)]
    assert not list(root.glob("*.o"))


def test_ctrl_c_in_the_ir_step_is_quiet_and_leaves_nothing(rec, clang, tmp_path):
    """The Python wrapper's own wait (the IR step of a two-pass record): Ctrl-C ends it
    as the signal would, without the 20-line KeyboardInterrupt traceback, and the
    half-written IR is removed."""
    write(rec.root / "a.c", B)
    hang = fake_compiler(tmp_path, "hang-clang",
                         'for a; do [ "$a" = -emit-llvm ] && exec sleep 30; done\n'
                         f'exec "{clang}" "$@"\n')
    wrapped = subprocess.Popen([AUTOPASS_CC, hang, "-O2", "-c", "a.c"], cwd=rec.root,
                               env=rec.env, start_new_session=True, stderr=subprocess.PIPE)
    _wait_for(wrapped.pid, "sleep")
    os.killpg(wrapped.pid, signal.SIGINT)
    _, err = wrapped.communicate(timeout=30)
    assert wrapped.returncode == -signal.SIGINT, err
    assert err == b""
    assert list((rec.store_dir / "tmp").iterdir()) == []


def test_a_killed_clang_under_a_gcc_named_build_is_not_rebuilt_by_gcc(tmp_path, clang):
    """A Makefile that says CC = gcc gets clang under record; a clang killed by Ctrl-C
    was taken for a refusal, rebuilt by gcc and listed as clang_rejects."""
    root = tmp_path / "p"
    write(root / "Makefile", "CC = gcc\n" + MAKEFILE)
    write(root / "a.c", A)
    write(root / "b.c", B)
    log = tmp_path / "calls.log"
    env = {**os.environ, "AUTOPASS_CC": _slow_clang(tmp_path, clang, log)}
    build = subprocess.Popen([AUTOPASS, "record", "--", "make"], cwd=root, env=env,
                             start_new_session=True, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
    _wait_for(build.pid, "sleep")
    os.killpg(build.pid, signal.SIGINT)
    _, err = build.communicate(timeout=30)
    assert build.returncode == 128 + signal.SIGINT, err
    assert not list(root.glob("*.o"))
    units = subprocess.run([AUTOPASS, "units"], cwd=root, capture_output=True, text=True)
    assert "clang_rejects" not in units.stdout, units.stdout
