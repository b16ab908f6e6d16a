"""One evaluation: per-unit flags -> replayed binary -> measured against the baseline.

Shared by `autopass try` and the tuner.  The baseline is the recorded binary replayed
with every unit's original flags (byte-identical to what the build made, see
`fidelity.py`), so baseline and candidate differ only in the flags under test.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from autopass_build.candidates import layout_spread
from autopass_build.candidates.candidate import Candidate, ReplayStats, same_program
from autopass_build.candidates.replay import Replayer
from autopass_build.capture.record.skip_fixes import fixes
from autopass_build.config import Config, MeasureConfig
from autopass_build.core import flags as flagset
from autopass_build.core.errors import AutopassError
from autopass_build.core.flags import UnitFlags
from autopass_build.core.outcome import EvaluationError, Outcome
from autopass_build.core.plural import counted
from autopass_build.measuring import stats
from autopass_build.measuring.attribution import (
    AttributionError,
    Attributor,
    ProfiledSide,
    UnitEffect,
)
from autopass_build.measuring.benchmark import DETERMINISTIC_METRICS, Benchmark
from autopass_build.measuring.binaries import build_id
from autopass_build.measuring.measure import Comparison, Progress, compare
from autopass_build.measuring.sampling import with_source
from autopass_build.store.build_records import CommandMates, UnitRecord, command_mates
from autopass_build.store.index import Store
from autopass_build.store.targets import Target, executables_text, resolve


class EvaluateError(AutopassError):
    pass


@dataclass
class Evaluation:
    outcome: Outcome
    comparison: Comparison | None = None
    replay: ReplayStats = field(default_factory=ReplayStats)
    detail: str = ""
    effects: list[UnitEffect] = field(default_factory=list)   # per changed unit (attribution)


IDENTICAL = "identical to the baseline, byte for byte: nothing to measure"


def identical(replay: ReplayStats) -> Evaluation:
    """The evaluation of a candidate that is the baseline's program: SAME, exactly 1.0,
    no pairs (Entry.identical reads it back)."""
    comparison = Comparison(Outcome.OK, stats.SAME, stats.Estimate(1.0, 1.0, 1.0, 0, 1.0),
                            detail=IDENTICAL)
    return Evaluation(Outcome.OK, comparison, replay, IDENTICAL)


def choose_target(store: Store, wanted: str) -> Target:
    root = os.path.dirname(store.dir)
    targets = resolve(store, root)
    executables = [t for t in targets if t.kind == "executable"]
    if wanted:
        matches = [t for t in targets if wanted in (t.output_rel, t.output,
                                                    os.path.basename(t.output))]
        if not matches:  # "_fastkern" for "_fastkern.cpython-311-x86_64-linux-gnu.so"
            matches = [t for t in targets
                       if os.path.basename(t.output).startswith(wanted + ".")]
        if not matches:  # "src/xz/xz", libtool's wrapper script, for the program it runs
            matches = [t for t in targets if t.output_rel in _libtool_programs(wanted)]
        if not matches:  # "build/draco_encoder", CMake's link to draco_encoder-1.5.5
            real = os.path.realpath(os.path.join(root, wanted))
            matches = [t for t in targets if os.path.realpath(t.output) == real]
        if not matches:  # "busybox", made by `strip busybox_unstripped -o busybox`
            matches = _copies_of(os.path.join(root, wanted), targets)
        if len(matches) == 1:
            return matches[0]
        names = executables_text(executables) or "(none)"
        raise EvaluateError(f"target {wanted!r} {'is ambiguous' if matches else 'not found'}; "
                            f"recorded executables: {names}")
    if len(executables) == 1:
        return executables[0]
    if not executables:
        raise EvaluateError("no executable was recorded: run `autopass record -- <build>`"
                            + _why_nothing(store))
    raise EvaluateError("several executables were recorded; choose one with --target or "
                        "[run].target: " + executables_text(executables))


def _copies_of(path: str, targets: list[Target]) -> list[Target]:
    """The recorded links `path` is a stripped copy of: the same build ID, which strip
    and objcopy keep (busybox's Makefile links busybox_unstripped, then strips it)."""
    wanted = build_id(path) if os.path.isfile(path) else None
    if wanted is None:
        return []
    return [t for t in targets if os.path.isfile(t.output) and build_id(t.output) == wanted]


def _libtool_programs(wrapper: str) -> tuple[str, ...]:
    """Where libtool puts the real program behind the wrapper script `wrapper` (a path
    relative to the project root): `.libs/NAME`, or `.libs/lt-NAME` once the wrapper ran."""
    folder, name = os.path.split(os.path.normpath(wrapper))
    return tuple(os.path.join(folder, ".libs", n) for n in (name, "lt-" + name))


def _check_runs_as_a_program(store: Store, target: Target, bench: Benchmark) -> None:
    """A shared library is a target only for a benchmark that loads it (`python -c
    'import ext'`, with "{exe}" among its arguments); run as the program itself, it
    crashes, and that once read as "neither perf nor callgrind can profile here"."""
    if target.kind != "shared" or bench.run.command[0] != "{exe}":
        return
    root = os.path.dirname(store.dir)
    loaders = [t.output_rel for t in resolve(store, root) if t.kind == "executable"
               and target.output in t.loaded_libraries]
    raise EvaluateError(f"[run].target {target.output_rel} is a shared library, and "
                        "[run].command runs it as a program (\"{exe}\" first); set "
                        "[run].target to the program the benchmark runs"
                        + (f"; these load it: {', '.join(loaders)}" if loaders else ""))


def _why_nothing(store: Store) -> str:
    """What kept the build's compiles out of the store, when that is the user's to fix."""
    return "".join(f"; commands were skipped ({reason}): {fix}"
                   for reason, fix in fixes([(s.reason, s.detail) for s in store.skipped()]))


def match_units(spec: str, units: list[UnitRecord]) -> list[UnitRecord]:
    """Units named by `spec`: a source as `autopass units` shows it (any spelling of
    it: `./x.c` is `x.c`), its absolute path, or a unit id.  libtool's PIC and non-PIC
    compiles of one source both match."""
    normal = os.path.normpath(spec)
    return [u for u in units if spec == u.id or normal in (u.source_rel, u.source)]


SOURCES_SHOWN = 12    # of a binary's units, in an error about one --flags does not name


def parse_unit_flags(specs: list[str], units: list[UnitRecord],
                     show: Callable[[str], None] = lambda line: None,
                     ) -> UnitFlags:
    """['lib/lz.c=-O3 -fno-unroll-loops', ...] -> {unit id: flags} (flags validated).
    A source compiled in one command with others gives them its flags too, as apply mode
    would (one set per command, F23), and `show` says so; different flags for two
    sources of one command are refused: no build could ship them."""
    by_source: UnitFlags = {}
    for spec in specs:
        where, sep, text = spec.partition("=")
        if not sep:
            raise EvaluateError(f"--flags {spec!r}: write it as SOURCE=FLAGS, e.g. "
                                "'lib/lz.c=-O3 -fno-unroll-loops'")
        matches = match_units(where, units)
        if not matches:
            sources = sorted({u.source_rel for u in units})     # glslang: 55, in one line
            raise EvaluateError(f"--flags: no unit {where!r} in this binary; units: "
                                + ", ".join(sources[:SOURCES_SHOWN])
                                + (f" and {len(sources) - SOURCES_SHOWN} more (`autopass "
                                   "units` lists them)" if len(sources) > SOURCES_SHOWN
                                   else ""))
        try:
            tokens = flagset.parse(text)
        except flagset.FlagError as error:
            raise EvaluateError(f"--flags {where}: {error}")
        for unit in matches:
            by_source[unit.source_rel] = tokens
    _give_command_mates(by_source, command_mates(list(by_source), units), show)
    # libtool's PIC and non-PIC twins of a source both get its flags
    return {u.id: by_source[u.source_rel] for u in units if u.source_rel in by_source}


def _give_command_mates(by_source: UnitFlags,
                        mates_of: CommandMates,
                        show: Callable[[str], None]) -> None:
    for source, mates in mates_of.items():
        differing = [m for m in mates if by_source.get(m, by_source[source]) != by_source[source]]
        if differing:
            raise EvaluateError(
                f"--flags: {source} and {differing[0]} are compiled in one command, which "
                "a build gives one set of flags: give them the same flags, or name one")
        added = [m for m in mates if m not in by_source]
        for mate in added:
            by_source[mate] = by_source[source]
        if added:
            show(f"{source} is compiled in one command with {', '.join(added)[:200]}: "
                 "they take its flags, as in a tuned build")


def _by_binary(kept_in: dict[str, list[tuple[str, str]]]) -> dict[str, list[str]]:
    """'mix (libthird.so)' -> the unit whose copy that binary keeps, for each function
    that several binaries keep a copy of: perf names the object each sample ran in
    (sampling.read_report, attribution.unit_mapper)."""
    return {with_source(name, binary): [source] for name, copies in kept_in.items()
            if len(copies) > 1 for binary, source in copies}


class Evaluator:
    def __init__(self, store: Store, config: Config, target: str = ""):
        self.store = store
        self.config = config
        self.twin_of: Evaluator | None = None     # made by `on`: the evaluator it twins
        self.bench = Benchmark.from_config(config)
        self.target = choose_target(store, target or config.run.target)
        _check_runs_as_a_program(store, self.target, self.bench)
        self.replayer = Replayer(store)
        all_units = {u.id: u for u in store.units()}
        self.units = [all_units[uid] for uid in self.target.runtime_units() if uid in all_units]
        self._baseline: Candidate | None = None
        # What the baseline and every candidate are built with: the chosen whole-program
        # stages (the PGO profile, LTO) as per-unit flags and link flags.
        self.base_flags: UnitFlags = {}
        self.base_link_flags: tuple[str, ...] = ()
        self._baseline_memo: list[float] = []   # its instruction counts (deterministic)
        self._baseline_defined: dict[str, list[str]] | None = None   # its functions' units
        self.layout: layout_spread.LayoutSpread | None = None   # measured once, at need

    def rebase(self, unit_flags: UnitFlags, link_flags: tuple[str, ...]
               ) -> None:
        """Build the baseline, and every candidate after, with these stages' flags."""
        self.base_flags, self.base_link_flags = dict(unit_flags), tuple(link_flags)
        self._baseline, self._baseline_memo, self._baseline_defined = None, [], None

    def on(self, unit_flags: UnitFlags, link_flags: tuple[str, ...]) -> Evaluator:
        """A twin of this evaluator (its store, benchmark and target) whose baseline is
        built with these stages' flags: one composition measured against another."""
        twin = Evaluator(self.store, self.config, self.target.output_rel)
        twin.rebase(unit_flags, link_flags)
        twin.twin_of = self
        return twin

    def baseline(self) -> Candidate:
        if self._baseline is None:
            try:
                self._baseline = self.replayer.build(self.target.output, self.base_flags,
                                                     self.base_link_flags)
            except EvaluationError as error:
                raise EvaluateError(f"cannot replay the baseline of {self.target.output_rel}: "
                                    f"{error}") from None
        return self._baseline

    def evaluate(self, flags_by_unit: UnitFlags,
                 progress: Progress | None = None,
                 measure: MeasureConfig | None = None,
                 link_flags: tuple[str, ...] = (),
                 post_link: Callable[[Candidate], Candidate] | None = None,
                 attribute: Attributor | None = None,
                 measure_identical: bool = False, until: float | None = None) -> Evaluation:
        """`measure` replaces the configured repeats and precision (the tuner's final,
        tighter re-measurement); `link_flags` go to the candidate's relink (a stage);
        `post_link` rewrites the linked candidate before it is measured (BOLT), raising
        EvaluationError when it cannot; `attribute` measures each changed unit's own
        cost after a successful A/B (measuring/attribution.py).  A candidate that is
        byte for byte the baseline (flags that change no code: measured common under
        LTO) is SAME at exactly 1.0 without a run, unless `measure_identical` (an A/A).
        `until`: when --time is up (measure.compare)."""
        base = self.baseline()
        before = ReplayStats(**vars(self.replayer.stats))
        if self.base_flags:
            flags_by_unit = {uid: self.base_flags.get(uid, ()) + tuple(flags_by_unit.get(uid, ()))
                             for uid in set(self.base_flags) | set(flags_by_unit)}
        try:
            candidate = self.replayer.build(self.target.output, flags_by_unit,
                                            self.base_link_flags + tuple(link_flags))
            if post_link is not None:
                candidate = post_link(candidate)
        except EvaluationError as error:
            return Evaluation(error.outcome, replay=self._delta(before), detail=str(error))
        replay = self._delta(before)
        if progress:
            progress(f"candidate built: {_compiled_words(replay, len(self.units))}")
        try:
            if not measure_identical and same_program(base, candidate):
                return identical(replay)
            bench = replace(self.bench, measure=measure) if measure else self.bench
            comparison = compare(bench, base.binary, base.env, candidate.binary,
                                 candidate.env, progress, baseline_memo=self._baseline_memo,
                                 floor=self.count_floor(progress), until=until)
            effects = (self._attributed(attribute, base, candidate, flags_by_unit, progress)
                       if attribute and comparison.estimate else [])
        finally:
            if candidate.folder != base.folder:  # objects stay cached; binaries are cheap
                shutil.rmtree(candidate.folder, ignore_errors=True)
        return Evaluation(comparison.outcome, comparison, replay, comparison.detail, effects)

    def count_floor(self, progress: Progress | None = None) -> float:
        """The least log ratio an instruction count is trusted to: more than the default
        where the program's count moves with its layout alone ([measure].layout_check,
        candidates/layout_spread.py).  Measured once, on the first baseline, and shared
        by the twins (a program's layout sensitivity is its own, not its stages')."""
        if self.twin_of is not None:
            return self.twin_of.count_floor(progress)
        measure = self.config.measure
        if measure.metric not in DETERMINISTIC_METRICS or not measure.layout_check:
            return stats.DETERMINISTIC_FLOOR
        if self.layout is None:
            self.layout = layout_spread.measure(
                self.replayer, self.target.output, self.base_flags, self.base_link_flags,
                self.bench, self.baseline(), progress)
            if progress:
                progress(self.layout.text())
            if not self._baseline_memo:     # the baseline's counts: the first pairs'
                self._baseline_memo += list(self.layout.baseline)
        return self.layout.floor

    def defined_functions(self, flags_by_unit: UnitFlags | None = None
                          ) -> dict[str, list[str]]:
        """Function name -> the units (source_rel) whose copy of it the program runs: the
        objects built with `flags_by_unit` (a candidate's: other flags keep other
        functions out of line), else the recorded ones.  A weak function (a C++ inline
        function or template instance: every unit that calls it out of line has a copy)
        counts for the one unit whose copy each binary keeps: the first in link order, or
        the one with a strong definition (harfbuzz's Coverage::get_coverage, 9 % of
        hb-shape, is in five units; the linker keeps hb-aat-layout.cc's).  Static
        functions of one name stay with every unit (`sampling.with_source` tells them
        apart).  A unit whose object is LLVM bitcode (a build that is LTO already) counts by
        the same compile out of LTO (Replayer.code_object_for)."""
        by_id = {unit.id: unit for unit in self.units}
        defined: dict[str, list[str]] = {}
        kept_in: dict[str, list[tuple[str, str]]] = {}   # weak function -> (binary, unit)
        for binary, group in self.target.unit_groups():
            kept: dict[str, str] = {}        # weak function -> the unit whose copy is kept
            for unit in (by_id[uid] for uid in group if uid in by_id):
                for name, weak in self._functions_of(unit, flags_by_unit).items():
                    if not weak:
                        kept[name] = unit.source_rel   # a strong definition wins
                        defined.setdefault(name, []).append(unit.source_rel)
                    else:
                        kept.setdefault(name, unit.source_rel)
            for name, source in kept.items():
                if source not in defined.setdefault(name, []):
                    defined[name].append(source)
                kept_in.setdefault(name, []).append((os.path.basename(binary), source))
        defined.update(_by_binary(kept_in))
        return defined

    def out_of_line(self, unit: UnitRecord) -> set[str]:
        """The functions `unit`'s recorded object keeps as functions of their own: what
        the recorded build did not inline everywhere (its profile can name only these)."""
        return set(self._functions_of(unit, None))

    def _functions_of(self, unit: UnitRecord, flags_by_unit: UnitFlags | None
                      ) -> dict[str, bool]:
        """The functions `unit`'s object defines, name -> weak (object_symbols)."""
        from autopass_build.candidates.object_symbols import weak_functions

        flags = (flags_by_unit or {}).get(unit.id, ())
        with open(self.replayer.code_object_for(unit, flags), "rb") as handle:
            return weak_functions(handle.read())

    def changed_sources(self, flags_by_unit: UnitFlags) -> list[str]:
        """The sources whose units a candidate builds differently from the baseline."""
        return sorted({u.source_rel for u in self.units
                       if tuple(flags_by_unit.get(u.id, ())) != self.base_flags.get(u.id, ())})

    def _attributed(self, attribute: Attributor, base: Candidate, candidate: Candidate,
                    flags_by_unit: UnitFlags,
                    progress: Progress | None) -> list[UnitEffect]:
        changed = self.changed_sources(flags_by_unit)
        if not changed:
            return []
        if self._baseline_defined is None:
            self._baseline_defined = self.defined_functions(self.base_flags)
        try:
            found = attribute(ProfiledSide(base.binary, base.env, self._baseline_defined),
                              ProfiledSide(candidate.binary, candidate.env,
                                   self.defined_functions(flags_by_unit)), changed,
                              self.count_floor())
        except AttributionError as error:
            if progress:
                progress(f"no attribution: {error}")
            return []
        if progress:
            for effect in found:
                progress(f"attributed {effect.text()}")
        return found

    def _delta(self, before: ReplayStats) -> ReplayStats:
        now = self.replayer.stats
        return ReplayStats(now.compiled - before.compiled, now.from_source - before.from_source,
                           now.cached - before.cached, now.links - before.links)


def _compiled_words(replay: ReplayStats, units: int) -> str:
    """How many of the target's `units` a build compiled: the cache's lookups are no
    count of units (a build asks for an object more than once: "30 units compiled, 30
    from cache" read as sixty)."""
    built = replay.compiled + replay.from_source
    if built >= units:
        return f"all {counted(units, 'unit')} compiled"
    if built == 0:
        return f"all {counted(units, 'unit')} from the cache"
    return f"{built} of {counted(units, 'unit')} compiled, the rest from the cache"
