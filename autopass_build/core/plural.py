"""A count with its noun, for messages: '1 unit', '3 units', '1 entry', '2 entries'.

In core/ so that every layer (the store's target list, the tuner's notes, the CLI) says
counts one way, rather than each message building its own plural."""

from __future__ import annotations


def counted(n: int, noun: str, plural: str = "") -> str:
    """'1 evaluation', '3 evaluations'; `plural` where adding "s" is wrong ('entries')."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"
