"""Typed records for the code that runs inside every compile.

Plain classes with __slots__, not dataclasses: the compiler wrapper imports these, and
importing `dataclasses` (which imports `inspect`) costs ~45 ms per compile on a 2-core
VM.  A subclass lists its fields in `__slots__` (and defaults in `_defaults`); records
compare and hash by value.
"""

from __future__ import annotations


class Record:
    __slots__: tuple[str, ...] = ()

    def __init__(self, *values: object, **named: object) -> None:
        defaults = getattr(type(self), "_defaults", {})
        unknown = set(named) - set(self.__slots__)
        if unknown or len(values) > len(self.__slots__):
            # a misspelled field (`Skip('query', detial=...)`) would be dropped in silence
            raise TypeError(f"{type(self).__name__} has no field "
                            f"{', '.join(sorted(unknown)) or f'#{len(values)}'}; its fields: "
                            f"{', '.join(self.__slots__)}")
        given = set(self.__slots__[:len(values)]) & set(named)
        if given:
            raise TypeError(f"{type(self).__name__} got {', '.join(sorted(given))} twice")
        for index, name in enumerate(self.__slots__):
            if index < len(values):
                value = values[index]
            elif name in named:
                value = named[name]
            elif name in defaults:
                value = defaults[name]
            else:
                raise TypeError(f"{type(self).__name__} needs its field {name}")
            object.__setattr__(self, name, value)

    def replace(self, **changes: object):
        """A copy with `changes` (field name -> value); an unknown name is a TypeError."""
        unknown = set(changes) - set(self.__slots__)
        if unknown:
            raise TypeError(f"{type(self).__name__} has no field {', '.join(sorted(unknown))}")
        return type(self)(*(changes.get(n, getattr(self, n)) for n in self.__slots__))

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and all(
            getattr(self, n) == getattr(other, n) for n in self.__slots__)

    def __hash__(self) -> int:
        return hash(tuple(getattr(self, n) for n in self.__slots__))

    def __repr__(self) -> str:
        fields = ", ".join(f"{n}={getattr(self, n)!r}" for n in self.__slots__)
        return f"{type(self).__name__}({fields})"


