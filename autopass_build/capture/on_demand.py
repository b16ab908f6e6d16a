"""The wrapper's server on demand, for builds that no autopass process runs.

`autopass record`, `apply` and `verify` serve the wrapper for the length of the build
they run (server.py).  A CMake build configured with cmake/AutoPass.cmake runs alone:
each compile's launcher would exec the Python wrapper, a Python start per compile (1.12x
of Lua's build).  So there the launcher (launcher.c) looks for the server of its own
folder (socket_for: /tmp/autopass-UID/HASH.sock), and when none answers starts one,
detached, and sends that one call to the Python wrapper; the calls after it are served.
The server:

* is one per folder of launchers (AutoPass.cmake writes one into each build folder),
  kept single by a lock;
* goes when no call came for IDLE_SECONDS, or when autopass's code changed under it
  (an upgrade must not be served by the old code): that call and the rest go to the
  Python wrapper until the next server is up;
* says a warning of ours once per build, a build being calls without a pause of
  BUILD_GAP seconds;
* writes one line when it starts and one when it stops to HASH.log beside its socket.

Nothing here may break a build: a server that cannot start leaves every call to the
Python wrapper, as before.
"""

from __future__ import annotations

import fcntl
import os
import signal
import socket
import threading
import time

from autopass_build.capture import server as wrapper_server

IDLE_SECONDS = 300
ENV_IDLE = "AUTOPASS_SERVER_IDLE"         # another idle time, in seconds (tests)
BUILD_GAP = 10.0
STAMP_EVERY = 2.0                         # seconds between looks at autopass's code
SOCKETS = "/tmp/autopass-{uid}"           # the folder of the servers' sockets (launcher.c)
LOG_LIMIT = 64 * 1024


def socket_for(launcher_folder: str) -> str:
    """The socket of the server for the launchers in `launcher_folder`, as launcher.c
    names it: the folder's path (with a final slash) hashed by 64-bit FNV-1a."""
    value = 0xCBF29CE484222325
    for byte in os.fsencode(os.path.join(launcher_folder, "")):
        value = ((value ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return os.path.join(SOCKETS.format(uid=os.getuid()), f"{value:016x}.sock")


def log_for(socket_path: str) -> str:
    return socket_path.removesuffix(".sock") + ".log"


def serve_on_demand(path: str) -> int:
    """Serve the launchers' calls on the socket `path` until idle or outdated."""
    try:
        lock = open(path.removesuffix(".sock") + ".lock", "a")
    except OSError:
        return 0
    with lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return 0                     # another server has it
        _warm()
        try:
            listener = _listen(path)
        except OSError as error:
            _log(path, f"cannot serve on {path}: {error.strerror or error}")
            return 0
        bound = os.stat(path).st_ino
        idle = _idle_seconds()
        _log(path, f"pid {os.getpid()} serving (goes after {idle:g} s idle)")
        demand = OnDemand(listener, idle, _code_stamp)
        signal.signal(signal.SIGTERM, _stop)
        try:
            why = demand.run()
        except _Stopped:
            why = "SIGTERM"
        _unlink_if_ours(path, bound)
        listener.close()
        _log(path, f"pid {os.getpid()} stopped ({why}) after serving {demand.served} "
                   f"calls, {demand.handed_back} handed to the Python wrapper")
    return 0


class _Stopped(Exception):
    pass


def _stop(_signum: int, _frame: object) -> None:
    raise _Stopped


class OnDemand:
    """The accept loop: one thread per call; the loop ends when idle or outdated."""

    def __init__(self, listener: socket.socket, idle: float, stamp) -> None:
        self.listener, self.idle, self.stamp = listener, idle, stamp
        self.code = stamp()
        self.looked = time.monotonic()
        self.last = time.monotonic()       # the end of the last call, or the start
        self.active = 0
        self.served = 0
        self.handed_back = 0
        self.said: set[str] = set()
        self.guard = threading.Lock()

    def run(self) -> str:
        self.listener.settimeout(min(1.0, self.idle))
        while True:
            try:
                conn, _ = self.listener.accept()
            except TimeoutError:
                if self._idle():
                    return f"no call for {self.idle:g} s"
                continue
            except OSError as error:
                return f"the socket failed: {error}"
            conn.settimeout(None)
            if self._outdated():
                with conn:
                    wrapper_server.send(conn, b"python")
                self.handed_back += 1
                return "autopass's code changed"
            with self.guard:
                if time.monotonic() - self.last >= BUILD_GAP:
                    self.said = set()      # another build: its warnings are said again
                self.active += 1
            threading.Thread(target=self._serve, args=(conn, self.said)).start()

    def _serve(self, conn: socket.socket, said: set[str]) -> None:
        served = False
        try:
            served = wrapper_server.serve(conn, said)
        finally:
            with self.guard:
                self.active -= 1
                self.last = time.monotonic()
                if served:
                    self.served += 1
                else:
                    self.handed_back += 1

    def _idle(self) -> bool:
        with self.guard:
            return self.active == 0 and time.monotonic() - self.last >= self.idle

    def _outdated(self) -> bool:
        now = time.monotonic()
        if now - self.looked < STAMP_EVERY:
            return False
        self.looked = now
        return self.stamp() != self.code


def _listen(path: str) -> socket.socket:
    if os.path.lexists(path):
        os.unlink(path)                  # a server gone without cleaning up; we hold the lock
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o077)                # only this user may connect
    try:
        listener.bind(path)
    finally:
        os.umask(old)
    listener.listen(64)
    return listener


def _unlink_if_ours(path: str, bound: int) -> None:
    """Remove the socket unless it is another server's by now."""
    try:
        if os.stat(path).st_ino == bound:
            os.unlink(path)
    except OSError:
        pass


def _code_stamp() -> tuple[int, int]:
    """(newest modification, count) of autopass's Python files: what an upgrade changes."""
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    newest, count = 0, 0
    for folder, _, files in os.walk(package):
        for name in files:
            if name.endswith(".py"):
                try:
                    newest = max(newest, os.stat(os.path.join(folder, name)).st_mtime_ns)
                except OSError:
                    continue
                count += 1
    return newest, count


def _idle_seconds() -> float:
    try:
        return max(0.5, float(os.environ.get(ENV_IDLE, IDLE_SECONDS)))
    except ValueError:
        return float(IDLE_SECONDS)


def _warm() -> None:
    """Import what a call needs before the first is accepted: served calls are quick."""
    from autopass_build.capture.apply import apply_mode  # noqa: F401


def _log(socket_path: str, line: str) -> None:
    path = log_for(socket_path)
    try:
        mode = "w" if os.path.getsize(path) > LOG_LIMIT else "a"
    except OSError:
        mode = "a"
    try:
        with open(path, mode) as handle:
            handle.write(f"{time.strftime('%Y-%m-%d %H:%M:%S')} {line}\n")
    except OSError:
        pass
