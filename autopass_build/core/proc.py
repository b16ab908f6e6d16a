"""Running tools: argument lists only (never a shell), process-group kill on timeout.

The compiler wrapper runs for every compile of a user's build, so this module uses
`os.posix_spawn` and a pidfd instead of importing `subprocess`, and the C modules
`_signal` instead of `signal` (which imports `enum`): each saves 10-30 ms per compile.
"""

from __future__ import annotations

import _signal as signal
import os
import select
import time

TYPE_CHECKING = False           # typing is not imported on the wrapper's path
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import TypeVar

    T = TypeVar("T")

FORWARDED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)
SECRET_ENV_MARKERS = ("API_KEY", "TOKEN", "SECRET", "PASSWORD")


class Finished:
    __slots__ = ("status", "timed_out")

    def __init__(self, status: int, timed_out: bool = False):
        self.status = status          # as os.waitstatus_to_exitcode: negative = signal
        self.timed_out = timed_out


def run_buffered(path: str, argv: list[str], env: dict[str, str]) -> tuple[Finished, bytes, bytes]:
    """Like run_inherit, but stdout and stderr are kept (in memory files) for the caller
    to pass on or drop: apply mode shows a rejected attempt's output only as one line."""
    out, err = os.memfd_create("stdout"), os.memfd_create("stderr")
    try:
        done = run_inherit(path, argv, env, file_actions=[(os.POSIX_SPAWN_DUP2, out, 1),
                                                          (os.POSIX_SPAWN_DUP2, err, 2)])
        return done, _read_all(out), _read_all(err)
    finally:
        os.close(out)
        os.close(err)


def write_out(stdout: bytes, stderr: bytes) -> None:
    """Pass on what a buffered run printed (run_buffered), as it would have printed it."""
    import sys

    for stream, data in ((sys.stdout, stdout), (sys.stderr, stderr)):
        if data:
            stream.flush()
            stream.buffer.write(data)
            stream.flush()


ADDR_NO_RANDOMIZE = 0x0040000   # <linux/personality.h>


def wants_fixed_layout(argv: list[str] | tuple[str, ...]) -> bool:
    """Whether a compiler call needs fix_address_layout: it makes LTO objects."""
    from autopass_build.core.stage_flags import lto_of

    return bool(lto_of(argv))


def fix_address_layout() -> bool:
    """Start every later child of this process without address-space randomization
    (personality(2), kept across exec).  clang 19 writes an -flto object's module-level
    `.symver` symbols in an order that follows heap addresses: the same compile gives
    two different objects about one time in three (xz's liblzma), and the tuned build
    would not be bit-for-bit reproducible.  A fixed layout makes it so.  False when the
    kernel refuses (the compile still runs, as before)."""
    try:
        import ctypes  # here: only LTO compiles pay for it

        libc = ctypes.CDLL(None, use_errno=True)
        current = libc.personality(0xFFFFFFFF)   # query
        return current != -1 and libc.personality(current | ADDR_NO_RANDOMIZE) != -1
    except (OSError, AttributeError):
        return False


def _read_all(fd: int) -> bytes:
    os.lseek(fd, 0, os.SEEK_SET)
    chunks = []
    while chunk := os.read(fd, 1 << 20):
        chunks.append(chunk)
    return b"".join(chunks)


def run_inherit(path: str, argv: list[str], env: dict[str, str],
                file_actions: list | None = None) -> Finished:
    """Run with our stdin/stdout/stderr (so output is byte-identical); forward signals."""
    pid = os.posix_spawn(path, argv, env, file_actions=file_actions or ())
    previous = {}

    def forward(signum: int, _frame: object) -> None:
        try:
            os.kill(pid, signum)
        except ProcessLookupError:
            pass

    for signum in FORWARDED_SIGNALS:
        previous[signum] = signal.signal(signum, forward)
    try:
        while True:
            try:
                _, status = os.waitpid(pid, 0)
                break
            except InterruptedError:  # pragma: no cover - PEP 475 retries for us
                continue
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    return Finished(os.waitstatus_to_exitcode(status))


def run_quiet(path: str, argv: list[str], env: dict[str, str], timeout: float,
              stderr_path: str | None = None) -> Finished:
    """Run detached from our output in its own session; kill the group on timeout."""
    actions = [(os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
               (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
               (os.POSIX_SPAWN_OPEN, 2, stderr_path or os.devnull,
                os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)]
    pid = os.posix_spawn(path, argv, env, file_actions=actions, setsid=True)
    try:
        exited = _wait_for_exit(pid, timeout)
    except BaseException:     # interrupted (the wrapper's signal handler): none left behind
        kill_group(pid)
        os.waitpid(pid, 0)
        raise
    if not exited:
        kill_group(pid)
    _, status = os.waitpid(pid, 0)
    return Finished(os.waitstatus_to_exitcode(status), timed_out=not exited)


def _wait_for_exit(pid: int, timeout: float) -> bool:
    """True when `pid` exited within `timeout` seconds (it is not reaped)."""
    try:
        fd = os.pidfd_open(pid)
    except (AttributeError, OSError):  # pragma: no cover - kernels before 5.3
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT):
                return True
            time.sleep(0.005)
        return False
    try:
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        return bool(poller.poll(max(0, int(timeout * 1000))))
    finally:
        os.close(fd)


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)   # the two that raise KeyboardInterrupt


def start_held(start: Callable[[], T]) -> tuple[T, list[int]]:
    """`start()` (which starts a child and returns its handle) with SIGINT and SIGTERM
    held; the handle and the signals that came meanwhile, which the caller replays
    (`replay`) inside the block that stops its child.  Raised between the child's fork
    and Popen's return, KeyboardInterrupt would leave a child no one kills: a callgrind
    run outlived tune's SIGTERM on a loaded CI machine.  Off the main thread signals
    never arrive, so nothing is held there."""
    held: list[int] = []

    def hold(signum: int, _frame: object) -> None:
        held.append(signum)

    try:
        previous = {signum: signal.signal(signum, hold) for signum in STOP_SIGNALS}
    except ValueError:                      # not the main thread
        return start(), held
    try:
        started = start()
    except BaseException:
        _restore(previous)
        replay(held)
        raise
    _restore(previous)
    return started, held


def _restore(previous: dict[int, object]) -> None:
    for signum, handler in previous.items():
        signal.signal(signum, handler)


def replay(held: list[int]) -> None:
    """Deliver the signals `start_held` held, now: their handlers run before this returns."""
    for signum in held:
        signal.raise_signal(signum)


def alive(pid: int) -> bool:
    """Whether a process `pid` exists (another user's counts: it is not ours to clean
    up after)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def kill_group(pid: int) -> None:
    """SIGKILL the process group led by `pid` (started with setsid)."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def exit_like(status: int) -> int:
    """Exit the way the child did: re-raise its fatal signal, else return its code."""
    if status < 0:
        signum = -status
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
        return 128 + signum  # not reached for fatal signals
    return status


def clean_env(env: dict[str, str]) -> dict[str, str]:
    """The environment for tools we start ourselves: no API keys or tokens."""
    return {k: v for k, v in env.items()
            if not any(marker in k.upper() for marker in SECRET_ENV_MARKERS)}


class Captured:
    __slots__ = ("status", "stdout", "stderr", "timed_out")

    def __init__(self, status: int, stdout: bytes, stderr: bytes, timed_out: bool):
        self.status, self.stdout, self.stderr, self.timed_out = status, stdout, stderr, timed_out


def run_captured(argv: list[str], cwd: str, env: dict[str, str] | None = None,
                 timeout: float = 300.0, output_cap: int = 1 << 20,
                 fixed_layout: bool = False, stdin: str | None = None) -> Captured:
    """Run a tool in its own session, capturing (capped) output; kill the group on timeout.
    `fixed_layout`: without address-space randomization (LTO compiles, see
    fix_address_layout); `stdin`: a file to read as standard input (else none).

    For the tuner's compiles and links (not the wrapper's path, hence the late import).
    """
    import subprocess

    with open(stdin or os.devnull, "rb") as source:
        process, held = start_held(lambda: subprocess.Popen(
            argv, cwd=cwd, env=env, stdin=source, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, start_new_session=True,
            preexec_fn=fix_address_layout if fixed_layout else None))
    try:
        replay(held)
        stdout, stderr = process.communicate(timeout=timeout)
        timed_out = False
        kill_group(process.pid)  # whatever it left running in its session goes too
    except subprocess.TimeoutExpired:
        kill_group(process.pid)
        stdout, stderr = process.communicate()
        timed_out = True
    except BaseException:
        kill_group(process.pid)
        process.wait()
        raise
    return Captured(process.returncode, stdout[:output_cap], stderr[:output_cap], timed_out)


def descendants(pid: int) -> list[int]:
    """Every process below `pid` (children first), read from /proc."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as handle:
                stat = handle.read()
        except OSError:
            continue
        fields = stat[stat.rindex(b")") + 2:].split()   # after "(command name)"
        children.setdefault(int(fields[1]), []).append(int(entry))
    found: list[int] = []
    queue = [pid]
    while queue:
        for child in children.get(queue.pop(0), []):
            found.append(child)
            queue.append(child)
    return found


def runnable_threads(pid: int) -> int:
    """How many threads of `pid` and the processes below it are runnable now (state R:
    running, or waiting for a CPU).  A program that wants several CPUs has several
    runnable threads however loaded the machine is; its CPU time over wall time says so
    only when the CPUs are free."""
    count = 0
    for member in [pid] + descendants(pid):
        try:
            tasks = os.listdir(f"/proc/{member}/task")
        except OSError:
            continue
        for task in tasks:
            try:
                with open(f"/proc/{member}/task/{task}/stat", "rb") as handle:
                    stat = handle.read()
            except OSError:
                continue
            count += stat[stat.rindex(b")") + 2:stat.rindex(b")") + 3] == b"R"
    return count


def run_build(argv: list[str], env: dict[str, str], cwd: str | None = None) -> int:
    """A user's build (record, apply, verify): its exit status, or 128+n when a signal
    stopped it.  SIGTERM or SIGHUP sent to this process alone (a CI timeout, systemd)
    reaches the whole build, every process below it included, and this waits for it to
    end: killed, autopass left make and the compilers running as orphans (issue 45).
    Ctrl-C reaches the terminal's whole process group by itself; it is waited out the
    same way.  FileNotFoundError / PermissionError when the command cannot start."""
    import subprocess

    child, held = start_held(lambda: subprocess.Popen(argv, env=env, cwd=cwd))
    received: list[int] = []

    def stop_the_build(signum: int, _frame: object) -> None:
        received.append(signum)
        for pid in descendants(child.pid)[::-1] + [child.pid]:   # deepest first
            try:
                os.kill(pid, signum)
            except (ProcessLookupError, PermissionError):
                pass

    previous = {signum: signal.signal(signum, stop_the_build)
                for signum in (signal.SIGTERM, signal.SIGHUP)}
    previous[signal.SIGINT] = signal.signal(signal.SIGINT, stop_the_build)
    try:
        replay(held)                  # a signal that came while it started: stopped too
        status = child.wait()
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    if received:
        return 128 + received[0]
    return status if status >= 0 else 128 - status

