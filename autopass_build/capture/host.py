"""Where the wrapper's commands run: the wrapper decides, a host runs.

    LocalHost    this process: the Python wrapper, started for one compile
    RemoteHost   the native launcher (launcher.c) that sent its call to the server
                 (server.py): each command goes back to it, to run in the build's own
                 process tree, folder and terminal

Everything the wrapper does to processes and to the build's output goes through one, so
the same code decides in both (capture/ stays free of process-wide state: the server
runs many calls at once, one thread each).  Runs in every compile: core imports only.
"""

from __future__ import annotations

import _signal as signal
import contextlib
import os
import sys
from collections.abc import Iterator

from autopass_build.core import proc
from autopass_build.core.proc import FORWARDED_SIGNALS, Finished


class Interrupted(BaseException):
    """A signal (Ctrl-C, a CI timeout's SIGTERM) reached the wrapper outside a child's
    run: it unwinds the call, and main() exits as the signal would (128+n), without a
    traceback in the build's log (issue 45)."""


@contextlib.contextmanager
def interrupts() -> Iterator[list[int]]:
    """While the block runs, SIGINT, SIGTERM, SIGHUP and SIGQUIT raise Interrupted (the
    signal's number is put in the list); a child's run forwards them instead
    (proc.run_inherit), and its death by one ends the call the same way."""
    caught: list[int] = []

    def raise_interrupted(signum: int, _frame: object) -> None:
        caught.append(signum)
        raise Interrupted(signum)

    previous = {signum: signal.signal(signum, raise_interrupted)
                for signum in FORWARDED_SIGNALS}
    try:
        yield caught
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


class Host:
    """What a wrapper call can do besides deciding (LocalHost's docstrings say what)."""
    stderr_is_terminal = False

    def buffered(self, path: str, argv: list[str], env: dict[str, str],
                 fixed_layout: bool = False) -> tuple[Finished, bytes, bytes]:
        raise NotImplementedError

    def inherit(self, path: str, argv: list[str], env: dict[str, str]) -> Finished:
        raise NotImplementedError

    def quiet(self, path: str, argv: list[str], env: dict[str, str], timeout: float,
              stderr_path: str) -> Finished:
        raise NotImplementedError

    def write(self, out: bytes = b"", err: bytes = b"") -> None:
        raise NotImplementedError

    def exec(self, path: str, argv: list[str], env: dict[str, str]) -> int:
        raise NotImplementedError

    def exit_like(self, status: int) -> int:
        raise NotImplementedError

    def say(self, text: str) -> None:
        """A line of ours on the build's stderr."""
        self.write(err=text.encode("utf-8", "surrogateescape"))


class LocalHost(Host):
    def __init__(self) -> None:
        self.stderr_is_terminal = os.isatty(2)

    def buffered(self, path: str, argv: list[str], env: dict[str, str],
                 fixed_layout: bool = False) -> tuple[Finished, bytes, bytes]:
        """Run with stdout and stderr kept, for the caller to pass on or drop;
        `fixed_layout`: without address-space randomization (LTO objects)."""
        if fixed_layout:
            proc.fix_address_layout()
        return proc.run_buffered(path, argv, env)

    def inherit(self, path: str, argv: list[str], env: dict[str, str]) -> Finished:
        """Run with the build's stdin, stdout and stderr: its output is the build's."""
        return proc.run_inherit(path, argv, env)

    def quiet(self, path: str, argv: list[str], env: dict[str, str], timeout: float,
              stderr_path: str) -> Finished:
        """Run detached from the build's output, stderr into a file, killed at `timeout`."""
        return proc.run_quiet(path, argv, env, timeout, stderr_path)

    def write(self, out: bytes = b"", err: bytes = b"") -> None:
        proc.write_out(out, err)

    def exec(self, path: str, argv: list[str], env: dict[str, str]) -> int:
        """Become the command (never returns)."""
        sys.stdout.flush()
        sys.stderr.flush()
        return os.execve(path, argv, env)

    def exit_like(self, status: int) -> int:
        """The exit status for a command's `status`: a signal is raised again."""
        return proc.exit_like(status)
