"""Where an autopass command keeps its temporary files: one folder per process, inside
one folder per user, swept of the folders of processes that are gone.

Every temporary folder a command makes (a benchmark run's output, a profile, apply's
compiler links) goes in its process's folder, removed when the command ends.  A command
killed with SIGKILL cannot remove anything, so the next command removes what dead
processes left behind: no autopass-* folders pile up in /tmp.  The per-user folder is
used only when it is a real folder that this user owns and nobody else can enter;
otherwise each process's folder goes in the system's temporary folder, as before.
"""

from __future__ import annotations

import atexit
import os
import shutil
import stat
import tempfile

_entered: list[str] = []


def enter() -> str:
    """Make this process's scratch folder the default of `tempfile`; its path.  Once per
    process (a test may call the command line's main() many times)."""
    if _entered:
        return _entered[0]
    base = _user_folder()
    if base:
        _sweep(base)
    folder = tempfile.mkdtemp(prefix=f"{os.getpid()}-" if base else "autopass-",
                              dir=base or None)
    atexit.register(shutil.rmtree, folder, True)
    tempfile.tempdir = folder
    _entered.append(folder)
    return folder


def _user_folder() -> str:
    base = os.path.join(tempfile.gettempdir(), f"autopass-{os.getuid()}")
    try:
        os.mkdir(base, 0o700)
    except FileExistsError:
        pass
    except OSError:
        return ""
    try:
        info = os.lstat(base)
    except OSError:
        return ""
    mine = (stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid()
            and not info.st_mode & 0o077)
    return base if mine else ""


def _sweep(base: str) -> None:
    """Remove the folders of processes that no longer run."""
    try:
        names = os.listdir(base)
    except OSError:
        return
    for name in names:
        pid = name.split("-", 1)[0]
        if pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(os.path.join(base, name), ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:       # it exists, under another user
        return True
    return True
