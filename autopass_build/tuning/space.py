"""The knob space: which flags the tuner may set on a unit, and which combinations make sense.

A knob has a short name and a list of values; value 0 is always "as recorded" (no flag
added), so the all-zero point is the baseline build.  A point is a tuple of value
indexes, one per knob -- the integer vector every strategy in `search/` works on.

Constraints say "when knob A takes one of these values, knobs B... stay as recorded"
(`-fno-vectorize` makes a forced vector width meaningless).  Strategies sample only
valid points; `repair` maps an invalid point to the nearest valid one by resetting the
dependent knobs.

Each value is middle-end (replayable from the stored IR) or front-end (the unit is
recompiled from source): `flags.replayable_from_ir` decides, from measurements (docs/decisions.md,
"Replay = apply").  `probe` drops knobs the installed clang rejects, once per compiler
(cached in the store).
"""

from __future__ import annotations

import json
import os
import random
from dataclasses import dataclass, field, replace

from autopass_build.core import decisions, proc
from autopass_build.core import flags as flagset
from autopass_build.core.errors import AutopassError
from autopass_build.core.files import hash_json, write_atomic
from autopass_build.core.flags import UnitFlags
from autopass_build.core.stage_flags import NATIVE_FLAGS

Point = tuple[int, ...]    # a value index per knob: one point of a space (strategies' too)
SPACE_VERSION = 1


@dataclass(frozen=True)
class Knob:
    name: str
    values: tuple[tuple[str, ...], ...]   # values[0] == (): as recorded
    doc: str
    where: str = ""     # a loop's decision knob: the loop's "file:line:col", where known
    heat: float = 0.0   # a decision knob: percent of the run in the code it decides on

    def label(self, index: int) -> str:
        return " ".join(self.values[index]) if index else "(as recorded)"

    def short(self, index: int) -> str:
        """How agents name a value: "default", "900" for `-mllvm -x=900`, else the flag."""
        if index == 0:
            return "default"
        tokens = self.values[index]
        if tokens[0] == "-mllvm" and tokens[1].startswith(decisions.OPTION):
            return tokens[1].rpartition(":")[2]       # a decision: "vectorize.width=8"
        return tokens[1].partition("=")[2] if tokens[0] == "-mllvm" else " ".join(tokens)

    def index_of(self, text: str) -> int | None:
        """The value an agent named (short form, full flags, or "default"), or None."""
        text = str(text).strip()
        for i in range(len(self.values)):
            if text in (self.short(i), self.label(i), " ".join(self.values[i])):
                return i
        return None

    def front_end(self, recorded_level: str = "-O3") -> bool:
        """Whether any value of this knob needs a compile from source."""
        return any(not flagset.replayable_from_ir(v, recorded_level) for v in self.values[1:])


@dataclass(frozen=True)
class Requires:
    """When `knob` takes one of `values`, every knob in `defaults` stays as recorded."""
    knob: str
    values: frozenset[int]
    defaults: tuple[str, ...]
    why: str


@dataclass(frozen=True)
class Forbids:
    """One unit cannot take these `values` of `knob` (its precompiled header fixes them)."""
    knob: str
    values: frozenset[int]
    why: str


def _mllvm(option: str, *settings: str) -> tuple[tuple[str, ...], ...]:
    return ((),) + tuple(("-mllvm", f"-{option}={s}") for s in settings)


def _switch(*tokens: str) -> tuple[tuple[str, ...], ...]:
    return ((),) + tuple((t,) for t in tokens)


# Ranges bracket clang 19's defaults at -O3 (inline 225, unroll 300), from 1/4 to 8x.
DEFAULT_KNOBS = (
    Knob("opt", _switch("-O3", "-O2", "-O1", "-Os"), "optimization level"),
    Knob("unroll", _switch("-funroll-loops", "-fno-unroll-loops"), "loop unrolling"),
    Knob("vectorize", _switch("-fno-vectorize"), "loop vectorizer off"),
    Knob("slp", _switch("-fno-slp-vectorize"), "SLP (straight-line) vectorizer off"),
    Knob("inline", _switch("-fno-inline-functions"), "inline only inline-marked functions"),
    Knob("inline_threshold", _mllvm("inline-threshold", "60", "120", "450", "900", "1800"),
         "inliner cost threshold"),
    Knob("unroll_threshold", _mllvm("unroll-threshold", "75", "150", "600", "1200", "2400"),
         "unroller size threshold"),
    Knob("vector_width", _mllvm("force-vector-width", "2", "4", "8", "16"),
         "loop vectorizer: forced vector width"),
    Knob("interleave", _mllvm("force-vector-interleave", "1", "2", "4", "8"),
         "loop vectorizer: forced interleave count"),
    Knob("max_bandwidth", _mllvm("vectorizer-maximize-bandwidth", "true"),
         "loop vectorizer: widest type decides the width"),
    Knob("extra_vector_passes", _mllvm("extra-vectorizer-passes", "true"),
         "cleanup passes after vectorization"),
    Knob("slp_threshold", _mllvm("slp-threshold", "-8", "-2", "4"),
         "SLP vectorizer cost threshold (lower vectorizes more)"),
    Knob("loop_distribute", _mllvm("enable-loop-distribute", "true"), "loop distribution"),
    Knob("loop_interchange", _mllvm("enable-loopinterchange", "true"), "loop interchange"),
    Knob("unroll_and_jam", _mllvm("enable-unroll-and-jam", "true"), "unroll and jam"),
    Knob("loop_flatten", _mllvm("enable-loop-flatten", "true"), "loop flattening"),
    Knob("gvn_hoist", _mllvm("enable-gvn-hoist", "true"), "GVN hoisting"),
    Knob("block_align", _mllvm("align-all-nofallthru-blocks", "4", "5"),
         "align branch targets to 16/32 bytes"),
    Knob("function_align", _mllvm("align-all-functions", "5", "6"),
         "align functions to 32/64 bytes"),
)
# Not here: -mllvm -enable-gvn-sink.  clang 19's GVNSink gives a different object from one
# compile of the same C++ source to the next (tests/test_space.py found it), and a tuned
# build must be bit-for-bit reproducible.

# Opt-in only (`native = true`): code that runs on this CPU family and no other.  Its
# first value keeps floating-point results (stage_flags.NATIVE_FLAGS says why); the
# second lets clang fuse `a * b + c`, for programs whose check allows it.
NATIVE_KNOB = Knob("march", ((), NATIVE_FLAGS, ("-march=native",)),
                   "instruction set of this machine's CPU (first without FMA contraction)")

# Only under an LTO stage (`default_space(lto=True)`): the unit compiled to machine code
# with its own flags and linked beside the bitcode.  The LTO link re-optimizes bitcode
# with the link's options, so a unit's flags reach its code only through the passes its
# own compile runs before the bitcode is written: with clang 19, full LTO's pre-link
# compile vectorizes, ThinLTO's does not (a small C file's bitcode: vector code at -flto,
# none at -flto=thin, whatever -mllvm -force-vector-width says); -funroll-loops,
# -mllvm -unroll-threshold, the alignments and the loop-pass switches left its fully
# LTO-linked program byte for byte the same.  Out of LTO a unit loses inlining across units.
LEAVE_LTO_KNOB = Knob("leave_lto", _switch("-fno-lto"),
                      "leave link-time optimization: machine code built with this unit's "
                      "own flags, which the LTO link would mostly ignore")

_VECTOR = ("vector_width", "interleave", "max_bandwidth", "extra_vector_passes")
DEFAULT_CONSTRAINTS = (
    Requires("vectorize", frozenset({1}), _VECTOR, "-fno-vectorize: no loop vectorizer to steer"),
    Requires("slp", frozenset({1}), ("slp_threshold",), "-fno-slp-vectorize: no SLP to steer"),
    Requires("inline", frozenset({1}), ("inline_threshold",),
             "-fno-inline-functions: the threshold would not apply"),
    Requires("unroll", frozenset({2}), ("unroll_threshold", "unroll_and_jam"),
             "-fno-unroll-loops: no unroller to steer"),
    Requires("opt", frozenset({3}), _VECTOR + ("slp_threshold", "loop_distribute",
                                               "loop_interchange", "unroll_and_jam",
                                               "loop_flatten", "unroll_threshold"),
             "-O1 runs none of these loop passes"),
)


class SpaceError(AutopassError, ValueError):
    pass


@dataclass
class Space:
    knobs: tuple[Knob, ...]
    constraints: tuple[Requires, ...] = ()
    notes: list[str] = field(default_factory=list)   # knobs dropped, and why
    forbidden: tuple[Forbids, ...] = ()               # values this unit cannot take

    def __post_init__(self) -> None:
        self._index = {k.name: i for i, k in enumerate(self.knobs)}
        names = [n for c in self.constraints for n in (c.knob,) + c.defaults]
        for name in names + [f.knob for f in self.forbidden]:
            if name not in self._index:
                raise SpaceError(f"constraint on unknown knob {name!r}")

    @property
    def dims(self) -> list[int]:
        """How many values each coordinate has."""
        return [len(k.values) for k in self.knobs]

    def default(self) -> Point:
        return (0,) * len(self.knobs)

    def violations(self, point: Point) -> list[Requires]:
        self._check_shape(point)
        bad = []
        for c in self.constraints:
            if point[self._index[c.knob]] in c.values and any(
                    point[self._index[d]] for d in c.defaults):
                bad.append(c)
        return bad

    def forbids(self, point: Point) -> list[Forbids]:
        self._check_shape(point)
        return [f for f in self.forbidden if point[self._index[f.knob]] in f.values]

    def valid(self, point: Point) -> bool:
        return not self.violations(point) and not self.forbids(point)

    def repair(self, point: Point) -> Point:
        """The nearest valid point: knobs a constraint forbids go back to as-recorded."""
        fixed = list(self._check_shape(point))
        for f in self.forbids(point):
            fixed[self._index[f.knob]] = 0
        changed = True
        while changed:  # a reset can never create a violation, but stay safe
            changed = False
            for c in self.violations(tuple(fixed)):
                for name in c.defaults:
                    if fixed[self._index[name]]:
                        fixed[self._index[name]] = 0
                        changed = True
        return tuple(fixed)

    def sample(self, rng: random.Random) -> Point:
        """A random valid point: rejection sampling, then repair as the last resort."""
        point = self.default()
        for _ in range(20):
            point = tuple(rng.randrange(n) for n in self.dims)
            if self.valid(point):
                return point
        return self.repair(point)

    def flags(self, point: Point) -> tuple[str, ...]:
        self._check_shape(point)
        return tuple(t for knob, i in zip(self.knobs, point) for t in knob.values[i])

    def describe(self, point: Point) -> str:
        return " ".join(self.flags(point)) or "(as recorded)"

    def _check_shape(self, point: Point) -> Point:
        if len(point) != len(self.knobs) or any(
                not 0 <= v < n for v, n in zip(point, self.dims)):
            raise SpaceError(f"point {point} does not fit the space {self.dims}")
        return point

    def with_precompiled_header(self, recorded_level: str) -> "Space":
        """This space for a unit compiled against a precompiled header: no value that the
        header fixes (`flags.pch_conflict`), which would fail to compile."""
        forbidden = []
        for knob in self.knobs:
            why = {i: flagset.pch_conflict(v, recorded_level) for i, v in enumerate(knob.values)}
            values = frozenset(i for i, reason in why.items() if reason)
            if values:
                reason = why[min(values)]
                forbidden.append(Forbids(knob.name, values, f"precompiled header: {reason}"))
        return replace(self, forbidden=self.forbidden + tuple(forbidden))

    def without(self, dropped: set[str], why: str) -> "Space":
        knobs = tuple(k for k in self.knobs if k.name not in dropped)
        kept = {k.name for k in knobs}
        constraints = tuple(
            Requires(c.knob, c.values, tuple(d for d in c.defaults if d in kept), c.why)
            for c in self.constraints if c.knob in kept)
        notes = self.notes + [f"knob {name} dropped: {why}" for name in sorted(dropped)]
        return Space(knobs, constraints, notes,
                     tuple(f for f in self.forbidden if f.knob in kept))


class JointSpace:
    """Several units' spaces side by side: one flat vector, one block per unit."""

    def __init__(self, blocks: list[tuple[str, Space]]):
        self.blocks = blocks
        self._offsets = []
        offset = 0
        for _, space in blocks:
            self._offsets.append(offset)
            offset += len(space.knobs)
        self.dims = [n for _, space in blocks for n in space.dims]

    def default(self) -> Point:
        return (0,) * len(self.dims)

    def split(self, point: Point) -> list[tuple[str, Space, Point]]:
        return [(label, space, tuple(point[o:o + len(space.knobs)]))
                for (label, space), o in zip(self.blocks, self._offsets)]

    def valid(self, point: Point) -> bool:
        return len(point) == len(self.dims) and all(
            s.valid(p) for _, s, p in self.split(point))

    def repair(self, point: Point) -> Point:
        if len(point) != len(self.dims):
            raise SpaceError(f"point of {len(point)} values for a space of {len(self.dims)}")
        return tuple(v for _, s, p in self.split(point) for v in s.repair(p))

    def sample(self, rng: random.Random) -> Point:
        return tuple(v for _, space in self.blocks for v in space.sample(rng))

    def flags_by_label(self, point: Point) -> UnitFlags:
        """Only the blocks that change something."""
        return {label: s.flags(p) for label, s, p in self.split(point) if any(p)}

    def block_coordinates(self, label: str) -> range:
        i = [b[0] for b in self.blocks].index(label)
        return range(self._offsets[i], self._offsets[i] + len(self.blocks[i][1].knobs))


def default_space(native: bool = False, lto: bool = False) -> Space:
    """The knobs; `native` adds this CPU's instruction set, `lto` (an LTO stage may be
    chosen) a unit's way out of link-time optimization."""
    knobs = (DEFAULT_KNOBS + ((NATIVE_KNOB,) if native else ())
             + ((LEAVE_LTO_KNOB,) if lto else ()))
    return Space(knobs, DEFAULT_CONSTRAINTS)


# -- probing the installed compiler ----------------------------------------------------------
def probe(space: Space, compiler: str, cache_dir: str, compiler_stamp: str) -> Space:
    """`space` without the knobs whose values `compiler` rejects (cached per compiler)."""
    key = hash_json([SPACE_VERSION, compiler_stamp, [k.values for k in space.knobs]])
    cache = os.path.join(cache_dir, f"probe-{key[:24]}.json")
    rejected = _read_cache(cache)
    if rejected is None:
        rejected = _probe_knobs(space, compiler, cache_dir)
        os.makedirs(cache_dir, exist_ok=True)
        write_atomic(cache, json.dumps(rejected).encode())
    if not rejected:
        return space
    return space.without(set(rejected), f"{os.path.basename(compiler)} rejects it")


def _read_cache(path: str) -> list[str] | None:
    try:
        with open(path) as handle:
            data = json.load(handle)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, list) and all(isinstance(x, str) for x in data) else None


def _accepts(compiler: str, tokens: list[str], scratch: str) -> bool:
    source = os.path.join(scratch, "probe.c")
    if not os.path.exists(source):
        with open(source, "w") as handle:
            handle.write("int probe(int *a, int n) { int s = 0; for (int i = 0; i < n; i++)"
                         " s += a[i]; return s; }\n")
    done = proc.run_captured([compiler, "-O2", *tokens, "-Werror=unused-command-line-argument",
                              "-c", source, "-o", os.path.join(scratch, "probe.o")],
                             scratch, proc.clean_env(dict(os.environ)), 60.0)
    return done.status == 0 and not done.timed_out


def _probe_knobs(space: Space, compiler: str, cache_dir: str) -> list[str]:
    """Names of knobs with a value the compiler rejects: all values at once first
    (the usual answer is "all fine"), one knob at a time only when that fails."""
    import tempfile

    os.makedirs(cache_dir, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="probe-", dir=cache_dir) as scratch:
        everything = [t for k in space.knobs for v in k.values[1:] for t in v
                      if not t.startswith("-O")]
        if _accepts(compiler, everything, scratch):
            return []
        return [k.name for k in space.knobs
                if not all(_accepts(compiler, list(v), scratch) for v in k.values[1:])]


def fingerprint(space: Space) -> str:
    """What a resumed run checks: the same knobs, values and constraints (a compiler
    that rejects other flags gives another space)."""
    return hash_json([[k.name, [list(v) for v in k.values]] for k in space.knobs]
                     + [[c.knob, sorted(c.values), list(c.defaults)]
                        for c in space.constraints])[:24]
