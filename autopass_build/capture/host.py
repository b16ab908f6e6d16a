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

import os
import sys

from autopass_build.core import proc
from autopass_build.core.proc import Finished


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
