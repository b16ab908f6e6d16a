"""Faults: docs/RELIABILITY.md F1, F2, F10, F14, with the real clang-19 and small fake compilers."""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import time
import zlib
from pathlib import Path

import psutil
import pytest
from support import AUTOPASS, AUTOPASS_CC, Recording, fake_compiler, run, tmpfs, verify_ir, write

from autopass_build.core.files import disk_full, hash_bytes

HELLO = "int twice(int x) { return 2 * x; }\n"


# ---- F1 ----------------------------------------------------------------------------------
def test_f1_compile_error_same_status_nothing_recorded(rec, clang):
    write(rec.root / "bad.c", "int f( { return }\n")
    plain = run([clang, "-c", "bad.c"], rec.root)
    wrapped = run([AUTOPASS_CC, "-c", "bad.c"], rec.root, rec.env)
    assert plain.returncode == wrapped.returncode == 1
    assert plain.stderr == wrapped.stderr
    assert rec.units() == []


def test_f1_compiler_crash_status_is_mirrored(rec, tmp_path):
    crash = fake_compiler(tmp_path, "crash-clang", "kill -SEGV $$\n")
    write(rec.root / "a.c", HELLO)
    wrapped = subprocess.run([AUTOPASS_CC, crash, "-c", "a.c"], cwd=rec.root, env=rec.env)
    assert wrapped.returncode == -signal.SIGSEGV
    assert rec.units() == []


# ---- F2 ----------------------------------------------------------------------------------
IR_FAILS = 'for a in "$@"; do [ "$a" = -emit-llvm ] && { echo "ir: boom" >&2; exit 1; }; done\n'
IR_HANGS = 'for a in "$@"; do [ "$a" = -emit-llvm ] && exec sleep 313; done\n'


@pytest.mark.parametrize("behaviour, reason", [(IR_FAILS, "ir_failed"), (IR_HANGS, "ir_timeout")])
def test_f2_ir_step_failure_never_breaks_the_build(rec, clang, tmp_path, behaviour, reason):
    fake = fake_compiler(tmp_path, "flaky-clang", behaviour + f'exec {clang} "$@"\n')
    write(rec.root / "a.c", HELLO)
    run([clang, "-O2", "-c", "a.c", "-o", "plain.o"], rec.root)
    env = dict(rec.env, AUTOPASS_IR_TIMEOUT="2")
    started = time.monotonic()
    wrapped = run([AUTOPASS_CC, fake, "-O2", "-c", "a.c", "-o", "a.o"], rec.root, env)
    assert wrapped.returncode == 0 and wrapped.stderr == b""
    assert time.monotonic() - started < 30
    assert (rec.root / "a.o").read_bytes() == (rec.root / "plain.o").read_bytes()
    assert rec.units() == []
    assert [s.reason for s in rec.skipped()] == [reason]
    assert len(rec.log()) == 1
    assert not [p for p in psutil.process_iter(["cmdline"]) if p.info["cmdline"] == ["sleep", "313"]]


def test_f2_unwritable_store_never_breaks_the_build(rec, clang, tmp_path):
    write(rec.root / "a.c", HELLO)
    blocker = tmp_path / "file-not-dir"
    blocker.write_text("")
    env = dict(rec.env, AUTOPASS_STORE=str(blocker / ".autopass"))
    wrapped = run([AUTOPASS_CC, "-c", "a.c", "-o", "a.o"], rec.root, env)
    assert wrapped.returncode == 0 and wrapped.stderr == b""
    run([clang, "-c", "a.c", "-o", "plain.o"], rec.root)
    assert (rec.root / "a.o").read_bytes() == (rec.root / "plain.o").read_bytes()


# ---- F10 ---------------------------------------------------------------------------------
def _many_units(root: Path, count: int) -> list[str]:
    names = []
    for i in range(count):
        write(root / f"u{i}.c", f"int f{i}(int x) {{ for (int k = 0; k < x; k++) x ^= k * {i}; return x; }}\n")
        names.append(f"u{i}.c")
    return names


def assert_store_consistent(rec: Recording, opt: str) -> None:
    rec.units()  # ingest the spool
    assert [p.name for p in (rec.store_dir / "spool").iterdir()] == []
    with sqlite3.connect(rec.store_dir / "store.db") as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    blobs = list((rec.store_dir / "blobs" / "ir").rglob("*.bc.z"))
    assert blobs
    for blob in blobs:
        digest = blob.name.split(".")[0]
        assert hash_bytes(zlib.decompress(blob.read_bytes())) == digest, f"torn blob {blob}"
    for unit in rec.units():
        verify_ir(opt, rec.store_dir, unit.ir_hash)


def test_f10_parallel_writers_and_two_builds_share_one_store(rec, opt, tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    names = _many_units(rec.root, 16) + []
    _many_units(other, 16)
    procs = [subprocess.Popen([AUTOPASS_CC, "-O2", "-c", n, "-o", n[:-2] + ".o"], cwd=folder,
                              env=rec.env)
             for n in names for folder in (rec.root, other)]
    assert [p.wait(timeout=300) for p in procs] == [0] * len(procs)
    assert len(rec.units()) == 32
    assert_store_consistent(rec, opt)


def test_f10_writers_killed_mid_write_leave_a_consistent_store(rec, opt):
    names = _many_units(rec.root, 12)
    rng = random.Random(7)
    for _ in range(3):
        procs = [subprocess.Popen([AUTOPASS_CC, "-O2", "-c", n], cwd=rec.root, env=rec.env,
                                  start_new_session=True) for n in names]
        time.sleep(rng.uniform(0.05, 0.4))
        for p in procs:
            if rng.random() < 0.6:
                os.killpg(p.pid, signal.SIGKILL)
        for p in procs:
            p.wait(timeout=120)
    assert_store_consistent(rec, opt)
    for n in names:  # the next build records everything
        assert run([AUTOPASS_CC, "-O2", "-c", n], rec.root, rec.env).returncode == 0
    assert len(rec.units()) == 12
    assert_store_consistent(rec, opt)


# ---- F14 ---------------------------------------------------------------------------------
def test_f14_real_compiler_that_is_autopass_is_a_clear_error(rec, tmp_path):
    masquerade = tmp_path / "bin"
    masquerade.mkdir()
    (masquerade / "cc").symlink_to(AUTOPASS_CC)
    write(rec.root / "a.c", HELLO)
    env = dict(rec.env, AUTOPASS_CC=str(masquerade / "cc"))
    result = run([AUTOPASS_CC, "-c", "a.c"], rec.root, env, timeout=30)
    assert result.returncode == 2
    assert b"recursion" in result.stderr and b"AUTOPASS_CC" in result.stderr


def test_f14_wrapper_never_picks_itself_from_path(rec, clang, tmp_path):
    masquerade = tmp_path / "bin"
    masquerade.mkdir()
    for name in ("clang", "clang-19", "cc"):
        (masquerade / name).symlink_to(AUTOPASS_CC)
    write(rec.root / "a.c", HELLO)
    env = {k: v for k, v in rec.env.items() if k not in ("AUTOPASS_CC", "AUTOPASS_CXX")}
    env["PATH"] = f"{masquerade}:{os.environ['PATH']}"
    result = run([str(masquerade / "cc"), "-c", "a.c"], rec.root, env, timeout=60)
    assert result.returncode == 0, result.stderr
    assert len(rec.units()) == 1
    assert os.path.realpath(rec.units()[0].compiler) != os.path.realpath(AUTOPASS_CC)


def test_a_compiler_that_cannot_start_is_one_clear_line(rec, tmp_path):
    broken = tmp_path / "broken-clang"
    broken.write_text("#!/nonexistent/interpreter\n")
    broken.chmod(0o755)
    write(rec.root / "a.c", HELLO)
    result = run([AUTOPASS_CC, str(broken), "-c", "a.c"], rec.root, rec.env)
    assert result.returncode == 127
    assert result.stderr.decode().count("\n") == 1 and "cannot run" in result.stderr.decode()


def test_a_compiler_variable_naming_no_program_says_which(rec, tmp_path):
    """AUTOPASS_CC set to a path that is not there: the message named clang as missing
    and said to install it, or to set AUTOPASS_CC -- the variable that was the problem."""
    write(rec.root / "a.c", HELLO)
    env = dict(rec.env, AUTOPASS_CC=str(tmp_path / "no-such-clang"))
    result = run([AUTOPASS_CC, "-c", "a.c"], rec.root, env, timeout=30)
    said = result.stderr.decode()
    assert result.returncode == 2 and said.count("\n") == 1, said
    assert f"AUTOPASS_CC='{tmp_path / 'no-such-clang'}' names no program" in said
    assert "point it at clang-19, or unset it" in said and "apt-get" not in said


@pytest.fixture
def small_disk(tmp_path):
    """A 200 KB tmpfs (mounting needs root, which CI has)."""
    with tmpfs(tmp_path / "small", "200k") as folder:
        yield folder


def test_f66_a_full_disk_under_the_store_leaves_the_build_and_the_store_alone(
        tmp_path, small_disk):
    """The store's disk fills during `autopass record`: the build's exit status is
    record's, one line says what could not be kept (before: exit 1 and a traceback of
    "database or disk is full", then "cannot rollback"), `units` reads what the store
    has and says what waits, and once there is room the waiting records go in."""
    root = tmp_path / "p"
    names = _many_units(root, 12)
    write(root / "Makefile", "app: " + " ".join(n[:-2] + ".o" for n in names)
          + "\n\t$(CC) -shared -o app $^\n")
    store = small_disk / ".autopass"
    done = subprocess.run([AUTOPASS, "record", "--store", store, "--", "make", "-s", "-j2"],
                          cwd=root, capture_output=True, text=True)
    assert done.returncode == 0 and (root / "app").exists(), done.stderr
    assert disk_full(str(small_disk))          # the test's premise: the disk did fill
    assert "Traceback" not in done.stderr
    assert "could not keep everything" in done.stderr and "free space" in done.stderr
    units = subprocess.run([AUTOPASS, "units", "--store", store], cwd=root,
                           capture_output=True, text=True)
    assert units.returncode == 0 and "Traceback" not in units.stderr, units.stderr
    subprocess.run(["mount", "-o", "remount,size=20m", small_disk], check=True)
    units = subprocess.run([AUTOPASS, "units", "--store", store], cwd=root,
                           capture_output=True, text=True)
    assert units.returncode == 0 and "wait in the spool" not in units.stdout
    assert " units" in units.stdout, units.stdout
