"""Where the time goes inside a hot function: how much of it runs in code the compiler
inlined there, and from which function.

A profile by symbol names only what the binary keeps out of line.  A static helper
inlined into its caller runs under the caller's name: bc's digit multiplication
`_bc_simp_mul` is 82 % of the run, all of it sampled as `_bc_rec_mul`, beside four other
helpers inlined there that run 1 % or less.  The decisions on a helper's loops
(decision_knobs.py) need to know which is which.  The binary's debug info does: each
sampled instruction's innermost inlined frame (llvm-symbolizer --inlining) is the
function whose code it is.  Without line tables (a build without -g) nothing is known,
and the knobs fall back to the caller's share.
"""

from __future__ import annotations

import json
import tempfile
from collections import Counter
from collections.abc import Iterable

from elftools.common.exceptions import ELFError
from elftools.elf.elffile import ELFFile
from elftools.elf.sections import SymbolTableSection

from autopass_build.core import proc, toolchain
from autopass_build.measuring.sampling import Site

# How long llvm-symbolizer may take over one file's sampled instructions (cppcheck's
# 30 MB of DWARF reads in a few seconds; a stuck tool leaves the profile as it was).
SYMBOLIZER_TIMEOUT = 300.0
OUTPUT_CAP = 256 << 20    # its JSON: about 300 bytes per address

Inlined = dict[str, dict[str, float]]   # symbol -> {function inlined into it: percent of the run}


def shares(sites: dict[Site, int], total: int, paths: Iterable[str]) -> Inlined:
    """For each symbol sampled in one of `paths` (the project's own files), the percent
    of the run (`total` samples) spent in code inlined into it, by the function that
    code came from.  A symbol whose samples all ran in its own code has an empty entry;
    a file without line tables, or that cannot be read, has none."""
    found: Inlined = {}
    wanted = set(paths)
    for path in sorted({site.path for site in sites} & wanted):
        mine = {site: n for site, n in sites.items() if site.path == path}
        innermost = _innermost_functions(path, mine)
        if innermost is None:
            continue
        for site, count in mine.items():
            entry = found.setdefault(site.symbol, {})
            function = innermost.get(site)
            if function and function != _base_name(site.symbol):
                entry[function] = entry.get(function, 0.0) + 100.0 * count / max(total, 1)
    return found


def _base_name(symbol: str) -> str:
    """"hash" for a clone "hash.cold" or "hash.llvm.123": the same source function."""
    return symbol.split(".", 1)[0]


def _innermost_functions(path: str, sites: dict[Site, int]) -> dict[Site, str] | None:
    """Each site's innermost inlined function (its linkage name), or None when `path`
    has no line tables or no symbolizer runs here."""
    symbolizer = toolchain.find_tool("llvm-symbolizer")
    base = _load_base(path, sites)
    if symbolizer is None or base is None:
        return None
    addresses = sorted({site.address - base for site in sites})
    with tempfile.NamedTemporaryFile("w", prefix="autopass-sites-", suffix=".txt") as listed:
        listed.write("\n".join(hex(a) for a in addresses) + "\n")
        listed.flush()
        done = proc.run_captured([symbolizer, f"--obj={path}", "--inlining", "--no-demangle",
                                  "--output-style=JSON"], "/", None, SYMBOLIZER_TIMEOUT,
                                 output_cap=OUTPUT_CAP, stdin=listed.name)
    if done.status != 0 or done.timed_out:
        return None
    by_address: dict[int, str] = {}
    with_lines = False
    for address, line in zip(addresses, done.stdout.decode("utf-8", "replace").splitlines()):
        frames = _frames(line)
        # an instruction of line 0 (code the optimizer merged) still names its function
        if frames and frames[0].get("FunctionName"):
            by_address[address] = str(frames[0]["FunctionName"])
            with_lines = with_lines or bool(frames[0].get("FileName"))
    if not with_lines:
        return None     # names from the symbol table alone: nothing known of inlining
    return {site: by_address[site.address - base] for site in sites
            if site.address - base in by_address}


def _frames(line: str) -> list[dict]:
    try:
        record = json.loads(line)
    except ValueError:
        return []
    # "Symbol": an address's frames, innermost first (llvm-symbolizer 19's JSON)
    frames = record.get("Symbol") if isinstance(record, dict) else None
    return [f for f in frames if isinstance(f, dict)] if isinstance(frames, list) else []


def _load_base(path: str, sites: dict[Site, int]) -> int | None:
    """Where the file was loaded: the run-time address less the file's own, the same
    for every symbol of the file (0 for a program not built position-independent).
    Read from the symbols the file defines once; a static name several units define
    has several addresses and does not vote.  None when the file cannot be read."""
    try:
        with open(path, "rb") as handle:
            elf = ELFFile(handle)
            table = elf.get_section_by_name(".symtab") or elf.get_section_by_name(".dynsym")
            if not isinstance(table, SymbolTableSection):
                return None
            values: dict[str, set[int]] = {}
            for symbol in table.iter_symbols():
                if symbol["st_info"]["type"] == "STT_FUNC" and symbol["st_value"]:
                    values.setdefault(symbol.name, set()).add(symbol["st_value"])
    except (OSError, ELFError, ValueError):
        return None
    votes: Counter[int] = Counter()
    for site, count in sites.items():
        own = values.get(site.symbol, set())
        if len(own) == 1:
            votes[site.address - site.offset - next(iter(own))] += count
    return votes.most_common(1)[0][0] if votes else None
