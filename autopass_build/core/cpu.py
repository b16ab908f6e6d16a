"""The CPU a -march=native build was tuned on, and whether this one can run its code.

A database tuned with `--native` holds code for the tuning machine's instruction set: on
a CPU without one of its extensions (a build farm's older hosts), the program dies of
SIGILL.  The database keeps the tuning CPU's model and instruction-set extensions (the
kernel's /proc/cpuinfo flags that name one); apply mode leaves -march=native out where
this CPU lacks any of them.  Imported by the wrapper in apply mode: stdlib only.
"""

from __future__ import annotations

from autopass_build.core.records import Record

CPUINFO = "/proc/cpuinfo"
# The /proc/cpuinfo flags that name instruction-set extensions -march=native may use (the
# rest are the kernel's and the hypervisor's: power management, mitigations, which differ
# between machines that run the same code).
ISA_PREFIXES = ("abm", "adx", "aes", "amx", "avx", "bmi", "clflushopt", "clwb", "cx16",
                "f16c", "fma", "gfni", "lzcnt", "movbe", "movdir", "pclmul", "popcnt",
                "prfchw", "rdrand", "rdseed", "sha", "sse", "ssse", "tbm", "vaes",
                "vpclmul", "xop", "xsave",
                # aarch64's "Features" line
                "asimd", "atomics", "crc32", "dcpop", "fphp", "sve", "i8mm", "bf16")


class Cpu(Record):
    """The tuning CPU: its model name and instruction-set extensions (sorted; empty in a
    database written before they were kept: then nothing is checked)."""
    __slots__ = ("model", "isa")
    model: str
    isa: tuple[str, ...]


_read: dict[str, Cpu] = {}      # a compile asks once per entry: read the file once


def this_cpu(cpuinfo: str = CPUINFO) -> Cpu:
    """This machine's Cpu, read from the first processor of `cpuinfo`."""
    if cpuinfo not in _read:
        _read[cpuinfo] = _parse(cpuinfo)
    return _read[cpuinfo]


def _parse(cpuinfo: str) -> Cpu:
    model, flags = "", []
    try:
        with open(cpuinfo, errors="replace") as handle:
            for line in handle:
                key, _, value = line.partition(":")
                key = key.strip()
                if key == "model name" and not model:
                    model = value.strip()
                elif key in ("flags", "Features"):
                    flags = value.split()
                    break
    except OSError:
        pass
    import platform

    isa = sorted({f for f in flags if f.startswith(ISA_PREFIXES)})
    return Cpu(model or platform.machine(), tuple(isa))


def lacking(tuned: Cpu | None, here: Cpu) -> list[str]:
    """The extensions of the `tuned` CPU that `here` lacks ([] when it can run the code,
    or when the database does not say)."""
    if tuned is None or not tuned.isa or not here.isa:
        return []
    return sorted(set(tuned.isa) - set(here.isa))


def lacking_text(tuned: Cpu, missing: list[str]) -> str:
    shown = ", ".join(missing[:4]) + (f" and {len(missing) - 4} more" if len(missing) > 4 else "")
    return f"tuned with -march=native on {tuned.model}, whose {shown} this CPU lacks"
