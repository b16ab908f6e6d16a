"""Where one run's CPU time goes, by function: `perf record -e cpu-clock` (software
sampling, which works where hardware counters do not), read back per symbol; or, where
the metric is instructions or perf is missing, callgrind's exact instruction count per
function.  Used for the hot units (hotspots.py) and for each unit's own cost
(attribution.py).

perf record runs with --no-bpf-event: its BPF side-band thread polls with a 1 s timeout
before perf exits, so without it a 0.1 s run costs 1.1 s instead of 0.36 s (measured
here).
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from autopass_build.core import proc
from autopass_build.core.errors import AutopassError
from autopass_build.measuring import static_functions

Samples = dict[str, int]                 # symbol -> samples (or instructions) in one run


class SamplingError(AutopassError):
    """perf is missing, refused or failed; the message says which."""


# `--vgdb=no`: otherwise valgrind makes three FIFOs in $TMPDIR for its gdbserver, which a
# run killed at its timeout never removes (126 of them had piled up in our host's /tmp).
CALLGRIND = ("valgrind", "--tool=callgrind", "-q", "--vgdb=no")


@dataclass(frozen=True)
class Site:
    """One sampled instruction: the file it ran in, the symbol perf named and the offset
    into it, and its address at run time (which a position-independent file moves)."""
    path: str
    symbol: str
    offset: int
    address: int


@dataclass(frozen=True)
class Report:
    """One perf run read back: samples per symbol, and the file each symbol ran in."""
    samples: Samples
    objects: dict[str, str]   # symbol -> perf's object: the program's or a library's file
    loaded: frozenset[str] = frozenset()   # the objects' paths, where perf gave them
    # each sampled instruction of a file's code, where asked for (perf_report's `sites`)
    sites: dict[Site, int] = field(default_factory=dict)


# perf report's column separator: ASCII's unit separator, which no path holds (perf
# writes the separator as "." where a field holds it: "|" made /tmp/a|b/app unreadable)
SEPARATOR = "\x1f"


def perf_samples(argv: list[str], cwd: str, env: dict[str, str], timeout: float,
                 frequency: int, stdin: str | None = None) -> Samples:
    """Samples per symbol of one run of `argv` (reading `stdin`, a file), at `frequency`
    per second of CPU time."""
    return perf_report(argv, cwd, env, timeout, frequency, stdin).samples


def perf_report(argv: list[str], cwd: str, env: dict[str, str], timeout: float,
                frequency: int, stdin: str | None = None, sites: bool = False) -> Report:
    """`perf_samples`, with the object each symbol ran in; with `sites`, also each
    sampled instruction of a file's code (for where inlined code runs, inlined.py)."""
    perf = shutil.which("perf")
    if perf is None:
        raise SamplingError("perf not found (sudo apt-get install linux-perf)")
    with tempfile.TemporaryDirectory(prefix="autopass-perf-") as scratch:
        data = os.path.join(scratch, "perf.data")
        done = proc.run_captured([perf, "record", "-q", "--no-bpf-event", "-e", "cpu-clock",
                                  "-F", str(frequency), "-o", data, "--", *argv],
                                 cwd, env, timeout, stdin=stdin)
        failed = SamplingError("perf record failed: "
                               + done.stderr.decode("utf-8", "replace")[-200:])
        if done.timed_out or not os.path.exists(data):
            raise failed
        # --no-demangle: objects, remarks and the unit map know C++ functions by their
        # mangled names; perf's "LZ_encoder::get_match_pairs" matched none of them
        # dso too: a library without symbols reads as "libz.so.1 (no symbols)", not as
        # a dozen bare addresses (snappy's test tool spends 45 % in zlib)
        # -v (not -q): each entry's object by its path and an address in its function,
        # which tell apart static functions of one name (static_functions.py)
        report = proc.run_captured([perf, "report", "-i", data, "-n", "--sort", "dso,sym",
                                    "--stdio", "-v", "--no-children", "-t", SEPARATOR,
                                    "--no-demangle"], cwd, env, 300)
        script = (proc.run_captured([perf, "script", "-i", data, "-F", "ip,sym,symoff,dso",
                                     "--no-demangle"], cwd, env, 300, output_cap=SCRIPT_CAP)
                  if sites else None)
    read = read_report(report.stdout.decode("utf-8", "replace"))
    if script is not None and script.status == 0:
        read = replace(read, sites=read_sites(script.stdout.decode("utf-8", "replace")))
    # perf exits with the program's status: a benchmark that exits 1 by design (grep's
    # "no match") was sampled all the same; perf's own failure leaves no samples.
    if done.status != 0 and not read.samples:
        raise failed
    return read


SCRIPT_CAP = 256 << 20   # perf script's lines, about 60 bytes a sample: 36 min at 1999 Hz
# `perf script -F ip,sym,symoff,dso`: "    56236efd2376 main+0xf6 (/tmp/t2)"
_SCRIPT_LINE = re.compile(r"^\s*([0-9a-fA-F]+)\s+(\S+)\+0x([0-9a-fA-F]+)\s+\((/.*)\)\s*$")


def read_sites(text: str) -> dict[Site, int]:
    """Samples per instruction of a file's code, from `perf script -F ip,sym,symoff,dso`
    lines; the kernel's, perf's own pseudo-files' and unnamed addresses are left out."""
    found: dict[Site, int] = {}
    for line in text.splitlines():
        matched = _SCRIPT_LINE.match(line)
        if matched:
            address, symbol, offset, path = matched.groups()
            site = Site(path, symbol, int(offset, 16), int(address, 16))
            found[site] = found.get(site, 0) + 1
    return found


JIT_CODE = "code generated at run time (JIT)"   # zpaq compiles its models to x86
# Every kernel sample (perf's "[k]"), under one name: the total is what matters (cmark's
# 26 % was spread over dozens of functions, each under the profile's 0.5 % cut), and no
# compiler flag reaches any of it.
KERNEL_CODE = "the kernel"
NO_SYMBOLS = " (no symbols)"     # after an object's name: the samples of its bare addresses


def parse_report(text: str) -> Samples:
    """`perf report -n -t '|'` lines (' 12.34% | 123 |[.] name', or with the dso
    ' 12.34% | 123 |libz.so.1 |[.] 0x4a08') as samples by symbol; the addresses of an
    object without symbols add up under "OBJECT (no symbols)"."""
    return read_report(text).samples


# perf report -v puts the address of the entry's first sample before its symbol:
# "0x42edd            B [.] flow" (B: the object's own symbol table was read)
_VERBOSE_SYMBOL = re.compile(r"^(0x[0-9a-fA-F]+)\s+\S\s+(\[.\].*)$")


def read_report(text: str,
                source_of: Callable[[str, str, int], str | None] = static_functions.source_of
                ) -> Report:
    """`parse_report`, with the object of each symbol (not perf's own "[kernel.kallsyms]",
    "[vdso]" or "[JIT] tid N"); every kernel sample counts under KERNEL_CODE.  In `perf
    report -v` lines (the object's path, and an address before the symbol), a static
    function that several files of the object define is told apart by `source_of(object, name, address)`: "flow (reverb.c)"; a
    function of one name in several objects (a C++ inline function the program and a
    library it loads each keep a copy of) by the object: "mix (libthird.so)"."""
    rows: list[tuple[str, str, int, bool]] = []       # symbol, dso, samples, told apart
    loaded: set[str] = set()
    for line in text.splitlines():
        # a symbol holds no separator; perf writes one in a path as "." (read_report
        # also takes "|", as people write these lines)
        parts = line.split(SEPARATOR if SEPARATOR in line else "|")
        if len(parts) < 3 or not parts[1].strip().isdigit():
            continue
        dso, symbol = "|".join(parts[2:-1]).strip(), parts[-1].strip()
        verbose = _VERBOSE_SYMBOL.match(symbol)
        if verbose:
            symbol = verbose.group(2)
        in_kernel = symbol.startswith("[k]")
        if symbol[:1] == "[" and "]" in symbol:
            symbol = symbol.split("]", 1)[1].strip()
        if in_kernel:
            rows.append((KERNEL_CODE, "", int(parts[1]), False))
            continue
        source = None
        if verbose and dso.startswith("/"):
            loaded.add(dso)
            source = source_of(dso, symbol, int(verbose.group(1), 16))
            symbol = with_source(symbol, source) if source else symbol
        dso = dso if dso.startswith("[") else os.path.basename(dso)
        if dso.startswith("[JIT]"):          # "[JIT] tid 24229": another name each run
            symbol = JIT_CODE
        elif dso and _is_address(symbol):
            symbol = dso + NO_SYMBOLS
        rows.append((symbol, dso, int(parts[1]), bool(source)))
    return _keyed(rows, frozenset(loaded))


def _keyed(rows: list[tuple[str, str, int, bool]], loaded: frozenset[str]) -> Report:
    """The report of `rows`, a symbol that objects of several names hold keyed by each."""
    objects_of: dict[str, set[str]] = {}
    for symbol, dso, _, told_apart in rows:
        if dso and not dso.startswith("[") and not told_apart:
            objects_of.setdefault(symbol, set()).add(dso)
    samples: Samples = {}
    objects: dict[str, str] = {}
    for symbol, dso, count, _ in rows:
        key = with_source(symbol, dso) if len(objects_of.get(symbol, ())) > 1 else symbol
        if dso and not dso.startswith("["):
            objects.setdefault(key, dso)
        samples[key] = samples.get(key, 0) + count
    return Report(samples, objects, loaded)


def with_source(symbol: str, source: str) -> str:
    """The sample key of a static function that files of several names define."""
    return f"{symbol} ({source})"


def split_source(key: str) -> tuple[str, str]:
    """(symbol, source) of a sample key; source "" when the symbol alone names it."""
    if key.endswith(")") and " (" in key:
        symbol, _, source = key[:-1].rpartition(" (")
        return symbol, source
    return key, ""


def _is_address(symbol: str) -> bool:
    return symbol.startswith("0x") and all(c in "0123456789abcdefABCDEF" for c in symbol[2:])


def callgrind_counts(argv: list[str], cwd: str, env: dict[str, str], timeout: float,
                     stdin: str | None = None) -> Samples:
    """Instructions per function of one run of `argv` under callgrind (deterministic),
    summed over every process it starts (a benchmark run through `sh -c` or a script).
    The binary under test must be one without debug info (see binaries.debugless_copy)."""
    if shutil.which("valgrind") is None or shutil.which("callgrind_annotate") is None:
        raise SamplingError("valgrind not found (sudo apt-get install valgrind)")
    with tempfile.TemporaryDirectory(prefix="autopass-callgrind-") as scratch:
        pattern = os.path.join(scratch, "callgrind.out.%p")
        run = proc.run_captured([*CALLGRIND, "--demangle=no", "--trace-children=yes",
                                 f"--callgrind-out-file={pattern}", "--", *argv],
                                cwd, env, timeout, stdin=stdin)
        outs = sorted(os.path.join(scratch, f) for f in os.listdir(scratch))
        if run.timed_out or not outs:
            raise SamplingError("callgrind failed: "
                                + run.stderr.decode("utf-8", "replace")[-200:])
        counts: Samples = {}
        for out in outs:
            for name, count in _annotated(out, cwd, env).items():
                counts[name] = counts.get(name, 0) + count
    if not counts:
        raise SamplingError("callgrind_annotate listed no functions (is its output format "
                            "one autopass knows? valgrind --version)")
    return counts


def _annotated(out: str, cwd: str, env: dict[str, str]) -> Samples:
    done = proc.run_captured(["callgrind_annotate", "--inclusive=no", out], cwd, env, 300)
    if done.timed_out or done.status != 0:
        raise SamplingError("callgrind_annotate failed: "
                            + done.stderr.decode("utf-8", "replace")[-200:].strip())
    return parse_annotate(done.stdout.decode("utf-8", "replace"))


def parse_annotate(text: str) -> Samples:
    """`callgrind_annotate` lines ('1,234 (12.3%)  file.c:function [binary]') as
    instructions by function; 'merge_rec'2' (recursion depth 2) counts as merge_rec."""
    counts: Samples = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) < 2 or not parts[0].replace(",", "").isdigit() or "PROGRAM TOTALS" in line:
            continue
        located = [p for p in parts[1:] if ":" in p]
        if located:
            name = located[0].split(":", 1)[1].split("'")[0]
            counts[name] = counts.get(name, 0) + int(parts[0].replace(",", ""))
    return counts
