"""The one base of the errors autopass reports to its user.

Every error a command can end with derives from `AutopassError`, and its message is one
line that names what is wrong and what to do: the command line catches this one type
(cli/main.py), prints "autopass: error: <message>" and exits 2, never a traceback.  An
error that is only a signal between two parts of autopass (a training round that did
not train, a server told to stop) is not one of these.
"""

from __future__ import annotations


class AutopassError(Exception):
    """A user-facing error: its message says what is wrong and the fix, in one line."""
