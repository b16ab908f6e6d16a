"""Where the time goes: hot functions of the benchmark, mapped to the units that define them.

The benchmark runs once under `perf record -e cpu-clock` (software sampling works
where hardware counters do not), or under callgrind where perf is missing or refused.
Each hot symbol is mapped to the units whose objects define it (pyelftools symbol
tables of the replayed baseline objects; a static function defined in several units
maps to the one its source names in the binary's symbol table, static_functions.py,
else to all of them).  The result is stored as `.autopass/profile.json` for the tuner.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import asdict, dataclass, field, replace

from autopass_build.candidates.evaluate import Evaluator
from autopass_build.core.errors import AutopassError
from autopass_build.core.files import write_atomic
from autopass_build.core.outcome import Outcome
from autopass_build.evidence import bundled_copies
from autopass_build.evidence.bundled_copies import BundledCopy
from autopass_build.evidence.inlined import Inlined
from autopass_build.evidence.inlined import shares as inlined_shares
from autopass_build.measuring.attribution import unit_mapper
from autopass_build.measuring.benchmark import run_once
from autopass_build.measuring.binaries import debugless_copy
from autopass_build.measuring.sampling import (
    JIT_CODE,
    KERNEL_CODE,
    NO_SYMBOLS,
    Report,
    Samples,
    SamplingError,
    callgrind_counts,
    perf_report,
    split_source,
)
from autopass_build.store.index import Store

PROFILE_FILE = "profile.json"
MIN_SHARE = 0.5  # percent
# Below this many samples (0.1 s of CPU at 1999 Hz) perf cannot say where the time goes:
# a 2 ms benchmark gave 3 samples, under load none of them in the program (a CI flake
# that, for a user, read "the profile puts no time in a recorded unit").  callgrind
# counts such a short run exactly, and cheaply.
MIN_PERF_SAMPLES = 200
MIN_INLINED_SHARE = 0.05   # percent: an inlined helper under it is not worth a line
# A shared library holding this much of the run is named, with the way to reach it
# (pbzip2 spends 87 % in the system's libbz2, grep's `-o -i` 91 % in glibc's regex).
LIBRARY_NOTE_SHARE = 25.0


class ProfileError(AutopassError):
    pass


@dataclass
class HotFunction:
    name: str
    share: float                      # percent of samples / instructions
    units: list[str] = field(default_factory=list)   # source_rel of defining units
    object: str = ""     # the file perf saw it run in: the program's, a library's ("": unknown)
    # of `share`, the percent of the run in code inlined into it, by the function that
    # code came from (inlined.py; None: no debug info, or not sampled by perf)
    inlined: dict[str, float] | None = None

    @property
    def symbol(self) -> str:
        """The function's name in its unit: "flow" for "flow (reverb.c)", a static
        function that files of several names define (static_functions.py)."""
        return split_source(self.name)[0]


@dataclass
class Profile:
    target: str
    method: str                       # "perf" or "callgrind"
    functions: list[HotFunction]
    workload: str                     # Benchmark.workload() of the run it sampled
    # how the benchmark ended when not with status 0 ("status 2 (pcre2grep: Error in
    # command-line regex ...)"): a mistyped command still runs, and would be tuned
    failing: str = ""

    def inlined(self) -> Inlined:
        """The code inlined into each hot symbol, where the debug info said (see
        HotFunction.inlined)."""
        return {f.symbol: f.inlined for f in self.functions if f.inlined is not None}

    def unit_shares(self) -> dict[str, float]:
        shares: dict[str, float] = {}
        for f in self.functions:
            for unit in f.units:
                shares[unit] = shares.get(unit, 0.0) + f.share / len(f.units)
        return dict(sorted(shares.items(), key=lambda kv: -kv[1]))


def _perf_samples(argv: list[str], cwd: str, env: dict, timeout: float,
                  stdin: str | None = None) -> Report:
    """One run sampled, with each sampled instruction (for inlined.py)."""
    try:
        read = perf_report(argv, cwd, env, timeout, frequency=1999, stdin=stdin, sites=True)
    except SamplingError as error:
        raise ProfileError(str(error)) from None
    taken = sum(read.samples.values())
    if taken < MIN_PERF_SAMPLES:
        raise ProfileError(f"perf took {taken} samples, too few to tell")
    return read


def _callgrind_samples(argv: list[str], cwd: str, env: dict, timeout: float,
                       stdin: str | None = None) -> list[tuple[str, float]]:
    """argv[0] must be a binary without debug info (see binaries.debugless_copy)."""
    try:
        return _shares(callgrind_counts(argv, cwd, env, timeout * 60, stdin))
    except SamplingError as error:
        raise ProfileError(f"neither perf nor callgrind can profile here ({error}): "
                           "apt-get install linux-perf valgrind") from None


def _shares(counts: Samples) -> list[tuple[str, float]]:
    """(function, percent of the run) for the functions of at least MIN_SHARE."""
    total = sum(counts.values()) or 1
    return [(name, 100.0 * c / total) for name, c in counts.items()
            if 100.0 * c / total >= MIN_SHARE]


def profile(evaluator: Evaluator) -> Profile:
    """Run the benchmark once on the baseline and map its hot functions to units."""
    base = evaluator.baseline()
    bench = evaluator.bench
    failing = _how_the_benchmark_ends(evaluator)
    argv, env = bench.argv(base.binary), bench.env(base.env)
    inlined: Inlined | None = None
    try:
        read = _perf_samples(argv, bench.cwd, env, bench.run.timeout * 3, bench.stdin)
        samples, objects, loaded = _shares(read.samples), read.objects, read.loaded
        inlined = inlined_shares(read.sites, sum(read.samples.values()),
                                 [os.path.realpath(p) for p in _own_files(base.binary)])
        method = "perf"
    except ProfileError:
        with tempfile.TemporaryDirectory(prefix="autopass-profile-") as scratch:
            argv = bench.argv(debugless_copy(base.binary, scratch))
            samples = _callgrind_samples(argv, bench.cwd, env, bench.run.timeout,
                                         bench.stdin)
        method, objects, loaded = "callgrind", {}, frozenset()
    if evaluator.target.kind == "shared":
        _check_the_library_under_test_ran(base.binary, loaded, evaluator)
    units_of = unit_mapper(evaluator.defined_functions())
    functions = [HotFunction(name, share, sorted(set(units_of(name, obj))), obj,
                             _inlined_into(name, inlined))
                 for name, share in sorted(samples, key=lambda s: -s[1])
                 for obj in [objects.get(name, "")]]
    result = Profile(evaluator.target.output_rel, method, functions, bench.workload(), failing)
    # all at once: a `tune` in the same store may be reading it (or a crash may come)
    write_atomic(os.path.join(evaluator.store.dir, PROFILE_FILE),
                 json.dumps(asdict(result), indent=1).encode())
    return result


def _own_files(binary: str) -> list[str]:
    """The program's file and the project's shared libraries rebuilt beside it (replay.py):
    their code is the program's own, assembly included (nettle's sha3-permute.asm, in
    libnettle.so)."""
    folder = os.path.dirname(binary)
    beside = [os.path.join(folder, name) for name in sorted(os.listdir(folder))
              if ".so" in name] if os.path.isdir(folder) else []
    return [binary] + beside


def _inlined_into(name: str, inlined: Inlined | None) -> dict[str, float] | None:
    """The shares of the code inlined into the profile's `name` (see HotFunction), None
    where the binary's debug info cannot say."""
    if inlined is None:
        return None
    symbol = split_source(name)[0]
    return {function: round(share, 3) for function, share in
            sorted(inlined[symbol].items(), key=lambda item: -item[1])
            if share >= MIN_INLINED_SHARE} if symbol in inlined else None


def _check_the_library_under_test_ran(library: str, loaded: frozenset[str],
                                      evaluator: Evaluator) -> None:
    """A program that loads a plugin from a path of its own (`dlopen("./libplug.so")`)
    runs the tree's copy whatever is built: every candidate would measure "same"."""
    name = os.path.basename(library)
    ran = sorted(path for path in loaded if os.path.basename(path) == name)
    if ran and not any(os.path.realpath(path) == os.path.realpath(library) for path in ran):
        raise ProfileError(
            f"the benchmark ran {ran[0]}, not the build of {evaluator.target.output_rel} "
            "under test, so no candidate would be measured: put \"{exe}\" where "
            "[run].command tells the program the library's path")


def _how_the_benchmark_ends(evaluator: Evaluator) -> str:
    """How the benchmark exits on the recorded build when not with status 0 (else an
    empty string); ProfileError when it crashes or hangs, which leaves no samples for
    either profiler: say that, not that profilers are missing."""
    base = evaluator.baseline()
    run = run_once(evaluator.bench, base.binary, base.env, evaluator.bench.run.timeout)
    tail = run.stderr.decode("utf-8", "replace").strip().splitlines()[-1:]
    said = f" ({tail[0][:200]})" if tail else ""
    if run.outcome != Outcome.OK:
        raise ProfileError(f"the benchmark does not run on the recorded build: {run.outcome}"
                           f" {run.detail}".rstrip() + said + "; fix [run].command in "
                           "autopass.toml")
    return f"status {run.status}{said}" if run.status else ""


def failing_note(result: Profile) -> str:
    """A line when the benchmark exits with a status other than 0, else ""."""
    if not result.failing:
        return ""
    return (f"the benchmark exits with {result.failing} on the recorded build; every "
            "candidate must end the same way, so that is what would be tuned: if it should "
            "succeed, fix [run].command in autopass.toml")


@dataclass(frozen=True)
class Reach:
    """How much of a profile per-file flags can reach: the recorded units' share, the
    rest of the program's own code (assembly, objects autopass did not compile), code it
    generates at run time (a JIT), other programs the benchmark runs (flex pipes its
    output through m4), and libraries and the kernel."""
    units: float
    program: float
    generated: float
    others: float
    outside: float                    # libraries, and the kernel where not told apart
    in_program: frozenset[str]        # the functions the binary itself defines
    # the shared libraries the target does not link, with their share, the largest first
    libraries: tuple[tuple[str, float], ...] = ()
    # of those, the ones the build makes (name -> as a target names it): the program
    # loads them itself (dlopen), and the target that tunes them is the library
    made: tuple[tuple[str, str], ...] = ()
    # a copy in the project's tree of the hottest library's code (gnulib's regex)
    bundled: BundledCopy | None = None
    kernel: float = 0.0               # told apart by perf since 2026-12-04, else in outside

    @classmethod
    def of(cls, result: Profile, binary: str, made: dict[str, str] | None = None) -> Reach:
        own = _own_files(binary)
        in_program = frozenset().union(*(_symbols(path) for path in own))
        own_names = {os.path.basename(path) for path in own}
        unreached = [f for f in result.functions if not f.units]
        program = sum(f.share for f in unreached if f.name in in_program)
        generated = sum(f.share for f in unreached if f.name == JIT_CODE)
        others = sum(f.share for f in unreached if _another_program(f.name))
        kernel = sum(f.share for f in unreached if f.name == KERNEL_CODE)
        outside = sum(f.share for f in unreached) - program - generated - others - kernel
        libraries: dict[str, float] = {}
        for f in unreached:
            library = _object_of(f)
            if ".so" in library and library not in own_names and f.name not in in_program:
                libraries[library] = libraries.get(library, 0.0) + f.share
        return cls(sum(result.unit_shares().values()), program, generated, others, outside,
                   in_program, tuple(sorted(libraries.items(), key=lambda named: -named[1])),
                   tuple((name, rel) for name, rel in sorted((made or {}).items())
                         if name in libraries), kernel=kernel)

    def where(self, function: HotFunction) -> str:
        if function.units:
            return ", ".join(function.units)
        if function.name in self.in_program:    # the binary, or a library of the project's
            library = _object_of(function)
            owner = f"in {library}, the project's" if ".so" in library else "in the program"
            return f"({owner}, not from a recorded unit: assembly or a prebuilt object)"
        if function.name == JIT_CODE:
            return "(made by the program as it runs: no compiler flag reaches it)"
        if function.name == KERNEL_CODE:
            return ("(system calls, page faults: no compiler flag reaches it; --metric user "
                    "leaves it out)")
        if _another_program(function.name):
            return "(another program the benchmark runs)"
        library = _object_of(function)
        if library in dict(self.made):
            return f"(in {library}, which the build makes: target {dict(self.made)[library]})"
        if library in dict(self.libraries):
            return f"(in {library}, a library the build does not compile)"
        return "(not in the program: a library or the kernel)"

    def note(self) -> str:
        """A line when most of the run is out of the units' reach, else ""."""
        if self.units >= 50:
            return ""
        parts = [(self.program, "in the program's own assembly or objects autopass did not "
                                "compile"),
                 (self.generated, "in code it generates as it runs"),
                 (self.others, "in other programs it runs"),
                 (self.outside, "in libraries" if self.kernel else
                  "in libraries and the kernel"),
                 (self.kernel, "in the kernel")]
        why = ", ".join(f"{share:.1f}% {what}" for share, what in parts if share >= 0.05)
        lead = (f"only {self.units:.1f}% of the run is in recorded units, where per-file "
                f"flags act ({why})")
        if self.kernel > max(self.outside + self.others, self.program, self.generated):
            return (f"{lead}; the kernel's part (system calls, page faults) is the same in "
                    "every build, and [measure].metric = \"user\" leaves it out of the "
                    "measurement")
        if self.outside + self.others <= max(self.program, self.generated):
            return lead
        if self.libraries and self.libraries[0][1] >= LIBRARY_NOTE_SHARE:
            return lead + self._library_advice(*self.libraries[0])
        return f"{lead}; is [run].command a benchmark of this project's code?"

    def _library_advice(self, name: str, share: float) -> str:
        """How to reach the code of the library that holds the most of the run."""
        made = dict(self.made)
        if name in made:
            return (f"; {share:.1f}% is in {name}, a library this build makes and the "
                    "program loads as it runs (dlopen): to tune it, set [run].target = "
                    f'"{made[name]}", with "{{exe}}" in [run].command where the program is '
                    "told the library's path")
        where = f"; {share:.1f}% is in {name}, a library the build links but does not compile"
        if self.bundled:
            return (f"{where}, and the tree seems to have its own copy: "
                    f"{self.bundled.function} is defined in {self.bundled.source}, which this "
                    "build does not compile. To tune that code, record a build that compiles "
                    "the copy (configure options often choose it, e.g. --with-included-regex)")
        return (f"{where}: to tune that code, record a build that compiles it too (a copy "
                "the project bundles, or the library's own build)")


def reach_of(result: Profile, evaluator: Evaluator) -> Reach:
    """`Reach.of` with what the store knows: the shared libraries the build makes, and,
    when the run is mostly in a library it does not, a copy of that code in the tree."""
    store = evaluator.store
    found = Reach.of(result, evaluator.baseline().binary, libraries_made(store))
    if not found.libraries or found.libraries[0][1] < LIBRARY_NOTE_SHARE or \
            found.libraries[0][0] in dict(found.made):
        return found
    library = found.libraries[0][0]
    hottest = [f.symbol for f in result.functions if not f.units and _object_of(f) == library]
    copy = bundled_copies.find(os.path.dirname(store.dir), hottest[:5],
                               {u.source_rel for u in store.units()})
    return replace(found, bundled=copy)


def libraries_made(store: Store) -> dict[str, str]:
    """The shared libraries the recorded build links: file name -> path from the project
    root, as [run].target names them."""
    root = os.path.dirname(store.dir)
    return {os.path.basename(link.output): os.path.relpath(link.output, root)
            for link in store.links() if link.kind == "shared"}


def _object_of(function: HotFunction) -> str:
    """The file `function` ran in, where known; a profile stored before objects were
    (2026-12) still names an object without symbols in the function's own name."""
    if function.object or not function.name.endswith(NO_SYMBOLS):
        return function.object
    return function.name[:-len(NO_SYMBOLS)]


def _another_program(name: str) -> bool:
    """Whether a profile entry is an executable other than the benchmarked one: perf
    names the samples of a stripped object "OBJECT (no symbols)" (sampling), and an
    object that is neither a shared library nor perf's own [kernel.kallsyms], [vdso]...
    is a program the benchmark started (Debian's m4, stripped, under flex)."""
    if not name.endswith(NO_SYMBOLS):
        return False
    dso = name[:-len(NO_SYMBOLS)]
    return not dso.startswith("[") and ".so" not in dso


def _symbols(binary: str) -> set[str]:
    """The names of the functions (and untyped code labels: nasm's) `binary` defines."""
    from elftools.common.exceptions import ELFError
    from elftools.elf.elffile import ELFFile
    from elftools.elf.sections import SymbolTableSection

    names: set[str] = set()
    try:
        with open(binary, "rb") as handle:
            for section in ELFFile(handle).iter_sections():
                if isinstance(section, SymbolTableSection):
                    names.update(s.name for s in section.iter_symbols()
                                 if s["st_shndx"] != "SHN_UNDEF" and s.name
                                 and s["st_info"]["type"] in ("STT_FUNC", "STT_NOTYPE"))
    except (OSError, ELFError):
        pass  # a profile still reads without it
    return names


def _valid_inlined(inlined: object) -> bool:
    return inlined is None or isinstance(inlined, dict) and all(
        isinstance(k, str) and isinstance(v, (int, float)) for k, v in inlined.items())


def load(store_dir: str) -> Profile | None:
    """The stored profile, or None when there is none or it is not one (damaged files
    are measured again, never trusted)."""
    try:
        with open(os.path.join(store_dir, PROFILE_FILE)) as handle:
            data = json.load(handle)
        found = Profile(data["target"], data["method"],
                        [HotFunction(**f) for f in data["functions"]], data["workload"],
                        data.get("failing", ""))
    except (OSError, ValueError, KeyError, TypeError, RecursionError):
        return None
    valid = isinstance(found.target, str) and isinstance(found.workload, str) \
        and isinstance(found.failing, str) and all(
        isinstance(f.name, str) and isinstance(f.share, (int, float))
        and isinstance(f.units, list) and all(isinstance(u, str) for u in f.units)
        and isinstance(f.object, str) and _valid_inlined(f.inlined) for f in found.functions)
    return found if valid else None

