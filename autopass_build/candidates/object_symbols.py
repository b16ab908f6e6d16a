"""The functions an object file defines, read off its symbol table: their sizes (what
the evidence shows a reader) and whether each definition is weak (which unit a sampled
function is charged to, when several units define it: attribution)."""

from __future__ import annotations

import io

from elftools.elf.elffile import ELFFile
from elftools.elf.sections import SymbolTableSection


def function_sizes(object_bytes: bytes) -> dict[str, int]:
    sizes: dict[str, int] = {}
    for name, size, _ in _functions(object_bytes):
        sizes[name] = sizes.get(name, 0) + size
    return sizes


def weak_functions(object_bytes: bytes) -> dict[str, bool]:
    """The functions an object defines, each with whether its definition is weak: a C++
    inline function or template instance (every unit that uses it out of line has a
    copy, and the linker keeps one) or C's `__attribute__((weak))`."""
    weak: dict[str, bool] = {}
    for name, _, binding in _functions(object_bytes):
        weak[name] = weak.get(name, True) and binding == "STB_WEAK"
    return weak


def _functions(object_bytes: bytes) -> list[tuple[str, int, str]]:
    """(name, size, binding) of each function symbol with a body."""
    elf = ELFFile(io.BytesIO(object_bytes))
    return [(symbol.name, symbol["st_size"], symbol["st_info"]["bind"])
            for section in elf.iter_sections() if isinstance(section, SymbolTableSection)
            for symbol in section.iter_symbols()
            if symbol["st_info"]["type"] == "STT_FUNC" and symbol["st_size"]]
