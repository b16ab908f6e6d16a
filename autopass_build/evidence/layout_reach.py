"""Before a layout step spends its pairs: can laying the code out pay here?

Layout (machine-function splitting, hot/cold grouping, BOLT) makes the code that runs
sit on fewer cache lines and pages.  Without hardware counters (a cloud VM has none)
nothing measures instruction-cache or iTLB misses directly, but the cpu-clock profile
says two things that bound the gain:

    footprint   the size, in the binary, of the hottest functions that together hold
                COVER of the recorded code's samples: code that fits the instruction
                cache several times over is not slowed by where it lies
    recorded    the share of the run spent in code the build compiles: layout cannot
                move the time spent in system libraries or the kernel

A step is skipped, with the line that says why, when the footprint is below
[tune].layout_min_kib (4 KiB: 64 cache lines, an eighth of a 32 KiB L1 instruction
cache; a judgement set low on purpose: a skipped stage is a gain never seen, a measured
one costs only its pairs); it is measured, and kept only when verified faster, otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass

from autopass_build.evidence.hotspots import Profile

COVER = 90.0                 # percent of the recorded code's samples


@dataclass(frozen=True)
class LayoutReach:
    footprint: int           # bytes
    functions: int           # how many functions that is
    recorded: float          # percent of the run in recorded code
    sized: bool              # whether the binaries' symbol tables gave the sizes
    least: int = 4096        # bytes: below, layout cannot pay

    @property
    def why_not(self) -> str:
        """Why layout cannot pay ("" when it may)."""
        if self.sized and self.functions and self.footprint < self.least:
            return (f"the hot code is {self.text()}: it fits the instruction cache "
                    f"whatever its order ([tune].layout_min_kib = {self.least // 1024}; 0 "
                    "tries it always)")
        return ""

    def text(self) -> str:
        return (f"{self.footprint / 1024:.1f} KiB in {self.functions} function"
                f"{'s' if self.functions != 1 else ''} ({COVER:.0f} % of the recorded "
                f"code's samples; {self.recorded:.0f} % of the run is in recorded code)")


def layout_reach(profile: Profile, binaries: list[str], least: int) -> LayoutReach:
    """The footprint of `profile`'s hottest recorded functions in `binaries` (the
    program and the project libraries it loads, as built); `least` bytes the footprint
    below which layout cannot pay."""
    sizes: dict[str, int] = {}
    for path in binaries:
        for name, size in _function_sizes(path).items():
            sizes[name] = max(size, sizes.get(name, 0))
    recorded = sorted((f for f in profile.functions if f.units), key=lambda f: -f.share)
    total = sum(f.share for f in recorded)
    covered, footprint, counted = 0.0, 0, 0
    for function in recorded:
        if covered >= total * COVER / 100:
            break
        covered += function.share
        footprint += sizes.get(function.symbol, 0)
        counted += 1
    return LayoutReach(footprint, counted, total, bool(sizes), least)


def _function_sizes(binary: str) -> dict[str, int]:
    """Each function `binary` defines, by its symbol's name (as the profile names it:
    not demangled), with its size in bytes."""
    from elftools.common.exceptions import ELFError
    from elftools.elf.elffile import ELFFile
    from elftools.elf.sections import SymbolTableSection

    sizes: dict[str, int] = {}
    try:
        with open(binary, "rb") as handle:
            for section in ELFFile(handle).iter_sections():
                if isinstance(section, SymbolTableSection):
                    for symbol in section.iter_symbols():
                        if symbol["st_info"]["type"] == "STT_FUNC" and symbol.name \
                                and symbol["st_shndx"] != "SHN_UNDEF":
                            sizes[symbol.name] = max(symbol["st_size"],
                                                     sizes.get(symbol.name, 0))
    except (OSError, ELFError):
        pass       # unreadable: no size, and no verdict drawn from it
    return sizes
