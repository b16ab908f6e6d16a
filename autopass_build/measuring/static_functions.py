"""Which file a static function came from, when several files of one binary define a
function of that name (SoX: 31 effects each have a `static int flow(...)`).

perf names the function a sample fell in, not its file, and the profile then split
"flow", 33 % of SoX's run, evenly over 31 units, so the unit that held 26 % by itself
(reverb.c) was not among the hot ones.  The linked binary's symbol table tells them
apart: each translation unit's local symbols follow an STT_FILE symbol naming its
source.  (Under LTO that name is "ld-temp.o" for all of them, a stripped binary has no
table: nothing is told apart, and the function stays split as before.)
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass


@dataclass(frozen=True)
class _Local:
    start: int
    end: int
    source: str      # the base name of the STT_FILE before it: "reverb.c"


def source_of(binary: str, name: str, address: int) -> str | None:
    """The base name of the source defining the local function `name` that holds
    `address` (an address of the file, as perf reports it) in `binary`, when files of
    more than one name define a local function of that name; else None."""
    try:
        stat = os.stat(binary)
    except OSError:
        return None
    for local in _ambiguous(binary, stat.st_mtime_ns, stat.st_size).get(name, ()):
        if local.start <= address < max(local.end, local.start + 1):
            return local.source
    return None


@functools.lru_cache(maxsize=32)
def _ambiguous(binary: str, mtime_ns: int, size: int) -> dict[str, tuple[_Local, ...]]:
    """Local functions whose name files of more than one name define (keyed by the
    file's identity too: a candidate's binary may be rebuilt at the same path)."""
    from elftools.elf.elffile import ELFFile
    from elftools.elf.sections import SymbolTableSection

    by_name: dict[str, list[_Local]] = {}
    try:
        with open(binary, "rb") as handle:
            symtab = ELFFile(handle).get_section_by_name(".symtab")
            source = ""
            symbols = symtab.iter_symbols() if isinstance(symtab, SymbolTableSection) else ()
            for symbol in symbols:
                kind, bind = symbol["st_info"]["type"], symbol["st_info"]["bind"]
                if kind == "STT_FILE":
                    source = os.path.basename(symbol.name)
                elif kind == "STT_FUNC" and bind == "STB_LOCAL" and source:
                    start = symbol["st_value"]
                    by_name.setdefault(symbol.name, []).append(
                        _Local(start, start + symbol["st_size"], source))
    except Exception:  # noqa: BLE001
        # only a refinement: a file pyelftools cannot read (its construct errors, a
        # truncated table) leaves every function of one name split, as before
        return {}
    return {name: tuple(locals_) for name, locals_ in by_name.items()
            if len({local.source for local in locals_}) > 1}
