"""Whether a file that decides what autopass runs may be believed: `autopass.toml` names
commands, the flags database names the flags of every compile.  One rule for both: a
file any user may write, or one that belongs to another user (root aside), is refused.
Runs in apply mode's compiles: no imports beyond the standard library."""

from __future__ import annotations

import os
import stat


def refusal(path: str, st: os.stat_result, holds: str) -> str:
    """Why the file at `path` (stat `st`) is refused, or "" when it is not.  `holds`:
    what it decides, for the message ("commands autopass runs")."""
    if not stat.S_ISREG(st.st_mode):
        return ""
    if st.st_mode & stat.S_IWOTH:
        return (f"{path} is writable by every user, and it names {holds}: refused "
                f"(chmod o-w {path})")
    if st.st_uid not in (os.getuid(), 0):
        return f"{path} belongs to another user (uid {st.st_uid}) and names {holds}: refused"
    return ""
