"""A count with its noun, for messages: '1 unit', '3 units', '1 entry', '2 entries'; and
names listed in a sentence: 'a, b and c'.

In core/ so that every layer (the store's target list, the tuner's notes, the CLI) says
counts one way, rather than each message building its own plural."""

from __future__ import annotations


def counted(n: int, noun: str, plural: str = "") -> str:
    """'1 evaluation', '3 evaluations'; `plural` where adding "s" is wrong ('entries')."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"


def listed(names: list[str], conjunction: str = "and") -> str:
    """'a', 'a and b', 'a, b and c' (or another `conjunction`: 'a or b')."""
    if len(names) == 1:
        return names[0]
    return f"{', '.join(names[:-1])} {conjunction} {names[-1]}"
