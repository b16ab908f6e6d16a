"""One measuring command at a time per store.

`tune`, `profile`, `pgo`, `try` and `verify` run the benchmark and time it.  Two of them
at once on one project share the machine's cores, so each measures the other's load, and
both write what the store keeps of the program (the stored profile, the PGO profile, the
flags database).  Run by mistake (`autopass profile` during a PCRE2 `tune`), the second
one silently rewrote the profile under the first.  The lock is an flock on a file in the
store: the kernel drops it when its holder dies, so a killed command leaves no stale lock.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Iterator

from autopass_build.core.errors import AutopassError

LOCK_NAME = "measuring.lock"


class StoreBusy(AutopassError):
    """Another command measures with this store now (the message names it)."""


@contextlib.contextmanager
def measuring(store_dir: str, command: str) -> Iterator[None]:
    """Hold the store's measuring lock while the block runs; StoreBusy when another
    process holds it.  A store that does not exist yet or cannot be written is not
    locked: the command then fails (or reads) as it would have without the lock."""
    try:
        handle = open(os.path.join(store_dir, LOCK_NAME), "a+")
    except OSError:
        handle = None
    if handle is None:
        yield
        return
    with handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.seek(0)
            holder = handle.read().strip() or "another autopass command"
            raise StoreBusy(f"{holder} is measuring with this store; two at once slow each "
                            "other down and both measurements are wrong: wait for it to end, "
                            "or stop it") from None
        _say_who(handle, command)
        yield


def _say_who(handle, command: str) -> None:
    """Write the holder's name for a second command's message (best effort: a full disk
    must not stop the first)."""
    try:
        handle.seek(0)
        handle.truncate()
        handle.write(f"`autopass {command}` (pid {os.getpid()}, "
                     f"since {time.strftime('%H:%M')})")
        handle.flush()
    except OSError:
        pass
