"""The offline agent: expert rules over the same evidence the LLM agents read.

Analyst: each rule turns a fact about a hot function into a hypothesis "unit U, knob K
= V" with a prior (how often the fix pays off) weighted by the unit's share of the
profile.  A hot call left out at inline cost C -> an inline threshold just above C; a
hot loop the cost model refused to vectorize -> forced width or bandwidth; vectorized
loops with no interleaving -> interleave; unrolled loops -> a larger unroll budget; a
large hot function with many branches (an interpreter loop) -> branch-target alignment;
-O2 units -> -O3; under link-time optimization -> the unit out of it.  The same facts
point at decisions carried in the IR (a unit's own knobs: tuning/decision_knobs.py),
which reach the code under LTO too: a loop the vectorizer refused -> that loop's own
width; vectorized loops -> a wider one, or interleaving; unrolled loops -> an unroll
count; a loop neither vectorized nor unrolled -> unrolled by 2; a hot callee left out at
its inline cost -> always inline it.  Under LTO these go ahead of the unit flags that ask
the same (DECISIONS_UNDER_LTO).  Every other knob value follows at a low prior, so the
agent never runs dry before the budget does.

Planner: the untried hypotheses in order of prior, each as a change on top of the
incumbent; a value that helped is followed by the next stronger one of the same knob; a
value that changed nothing under link-time optimization (the program byte for byte the
baseline: the LTO link re-optimizes the unit and drops most of its flags) is tried again
with the unit out of LTO.
Diagnoser: a regression bans that value and the stronger ones of that knob for that
unit; a wrong output or a crash bans the knob for the unit.  Deterministic throughout.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from autopass_build.candidates.evaluate import IDENTICAL
from autopass_build.measuring.stats import FASTER
from autopass_build.tuning.agents.context import Context, Trial
from autopass_build.tuning.agents.roles import Diagnosis, Lesson, Proposal
from autopass_build.tuning.space import Knob

ORDERED = {"inline_threshold", "unroll_threshold", "vector_width", "interleave",
           "slp_threshold", "block_align", "function_align"}
# (decision knobs' families are ordered too: _ordered)
BIG_FUNCTION = 2000       # bytes of code: large enough for layout to matter
EXPLORE_PRIOR = 0.04
OUT_OF_LTO_PRIOR = 1.25 * EXPLORE_PRIOR   # a value again, out of LTO: see _out_of_lto
LEAVE_LTO = ("leave_lto", "-fno-lto")     # the knob and value taking a unit out of LTO
# A decision's prior under LTO (`leave_lto` in the space), times this: always inlining a
# hot callee the inliner found too costly (0.4) goes ahead of the unit's inline threshold
# (0.7), a loop's own width or unroll count ahead of the unit-wide vectorizer and unroll
# flags.  On the programs measured (bench/decision_ceiling.py on PGO + LTO) the layer's
# largest gains were a callee always inlined: Opus 5.4 %, zstd 2.7 %, bc 1.1 % fewer
# instructions; and 13 of the example's 17 per-file candidates under LTO built the
# baseline's binary.
DECISIONS_UNDER_LTO = 2.0


@dataclass(frozen=True)
class Hypothesis:
    unit: str
    knob: str
    value: str
    prior: float
    why: str
    also: tuple[tuple[str, str], ...] = ()    # more knob values for the same unit

    @property
    def key(self) -> tuple:
        return (self.unit, self.knob, self.value, self.also)

    def changes(self) -> dict[str, str]:
        return {self.knob: self.value, **dict(self.also)}

    def as_finding(self) -> dict:
        return {"unit": self.unit, "knob": self.knob, "value": self.value,
                "prior": round(self.prior, 4), "why": self.why,
                "also": [list(pair) for pair in self.also]}

    @classmethod
    def of_finding(cls, finding: dict) -> "Hypothesis":
        return cls(**{**finding, "also": tuple(tuple(p) for p in finding.get("also", ()))})


class RulesBackend:
    name = "rules"

    # -- analyst ---------------------------------------------------------------------------
    def analyse(self, context: Context) -> Diagnosis:
        found: dict[tuple[str, str, str], Hypothesis] = {}
        for hot in context.hot:
            weight = context.weight(hot.source)
            for h in self._unit_rules(context, hot.source, hot.recorded_level, weight):
                if h.key not in found or found[h.key].prior < h.prior:
                    found[h.key] = h
            for h in self._exploration(context, hot.source, weight):
                found.setdefault(h.key, h)
        ordered = sorted(found.values(), key=lambda h: (-h.prior, h.unit, h.knob, h.value))
        evidence_based = [h for h in ordered if not h.why.startswith("explore")]
        text = "; ".join(f"{h.unit}: {h.why}" for h in evidence_based[:8])
        return Diagnosis([h.as_finding() for h in ordered], text)

    def _unit_rules(self, context: Context, unit: str, level: str, weight: float):
        knobs = context.knobs_of(unit)
        remarks = context.hot_remarks(unit)
        sizes = context.sizes(unit)
        hot = next(h for h in context.hot if h.source == unit)
        hottest = _hottest(knobs.values())

        def hyp(knob: str, value: str, prior: float, why: str):
            if knob in knobs and knobs[knob].index_of(value) is not None:
                yield Hypothesis(unit, knob, value,
                                 prior * _weight(knobs[knob], weight, hottest), why)

        if level in ("-O0", "-O1"):
            yield from hyp("opt", "-O3", 0.9, f"built at {level}: most optimizations are off")
        elif level in ("-Os", "-Oz"):   # the build chose bytes over speed for hot code
            yield from hyp("opt", "-O2", 0.8, f"built at {level}: optimized for size")
            yield from hyp("opt", "-O3", 0.6, f"built at {level}: optimized for size")
        elif level == "-O2":
            yield from hyp("opt", "-O3", 0.5, "built at -O2: -O3 adds aggressive passes")
        elif level == "-O3":
            yield from hyp("opt", "-O2", 0.12, "built at -O3: -O2 can be smaller and faster")
        costly = [r for r in remarks if r.pass_name == "inline" and r.name == "TooCostly"
                  and "Cost" in r.numbers and not _recursive(r)]
        if costly and "inline_threshold" in knobs:
            knob = knobs["inline_threshold"]
            for rank, r in enumerate(sorted(costly, key=lambda r: r.numbers["Cost"])[:3]):
                above = [knob.short(i) for i in range(1, len(knob.values))
                         if float(knob.short(i)) > r.numbers["Cost"]]
                if above:
                    yield from hyp("inline_threshold", above[0], 0.7 - 0.05 * rank,
                                   f"hot call in {r.function} not inlined at cost "
                                   f"{r.numbers['Cost']:.0f} (threshold "
                                   f"{r.numbers.get('Threshold', 0):.0f})")
        missed_loops = [r for r in remarks if r.pass_name == "loop-vectorize" and r.kind == "Missed"]
        if missed_loops:
            yield from hyp("vector_width", "4", 0.3, f"loop in {missed_loops[0].function} "
                           "not vectorized by the cost model")
            yield from hyp("max_bandwidth", "true", 0.2, "vectorization refused: widen by the "
                           "smallest type")
        vectorized = [r for r in remarks if r.pass_name == "loop-vectorize" and r.kind == "Passed"]
        if vectorized:
            ic = min(r.numbers.get("InterleaveCount", 1) for r in vectorized)
            yield from hyp("interleave", "4" if ic >= 2 else "2", 0.25,
                           f"vectorized loops in {vectorized[0].function} interleaved {ic:.0f}x")
            yield from hyp("vectorize", "-fno-vectorize", 0.12,
                           "vectorized loops may run few iterations")
        slp = [r for r in remarks if r.pass_name == "slp-vectorizer" and r.kind == "Missed"]
        if slp:
            yield from hyp("slp_threshold", "-2", 0.2, f"SLP refused in {slp[0].function}")
        unrolled = [r for r in remarks if r.pass_name == "loop-unroll"]
        if unrolled:
            yield from hyp("unroll_threshold", "600", 0.25,
                           f"loops in {unrolled[0].function} unrolled under a size budget")
            yield from hyp("unroll", "-funroll-loops", 0.15, "runtime unrolling of hot loops")
        big = [f for f in hot.functions if sizes.get(f, 0) >= BIG_FUNCTION]
        if big:
            yield from hyp("block_align", "4", 0.3, f"{big[0]} is {sizes[big[0]]} bytes of "
                           "hot branchy code: branch targets alignment")
            yield from hyp("block_align", "5", 0.15, "stronger branch-target alignment")
            yield from hyp("function_align", "5", 0.08, "hot function alignment")
        yield from hyp(*LEAVE_LTO, 0.1, "the LTO link re-optimizes this unit and drops most "
                       "of its own flags; out of LTO they reach its code")
        # Under link-time optimization a decision carried in the IR goes ahead of the unit
        # flag that asks the same: the link's own pipeline optimizes the unit again and
        # keeps the decision, not the flag.
        lifted = DECISIONS_UNDER_LTO if LEAVE_LTO[0] in knobs else 1.0
        for knob in knobs.values():
            for value, prior, why in _decision_rules(knob.name, remarks, knob.where):
                yield from hyp(knob.name, value, prior * lifted,
                               why + (" (kept through the LTO link)" if lifted > 1 else ""))

    def _exploration(self, context: Context, unit: str, weight: float):
        position = 0
        hottest = _hottest(context.knobs_of(unit).values())
        for knob in context.knobs_of(unit).values():
            for i in range(1, len(knob.values)):
                position += 1
                yield Hypothesis(unit, knob.name, knob.short(i),
                                 EXPLORE_PRIOR * _weight(knob, weight, hottest)
                                 / (1 + 0.05 * position),
                                 f"explore {knob.name}={knob.short(i)}")

    # -- planner ----------------------------------------------------------------------------
    def plan(self, context: Context, diagnosis: Diagnosis, history: list[Trial],
             incumbent: dict[str, dict[str, str]], lessons: list[Lesson],
             feedback: list[str], want: int) -> list[Proposal]:
        tried = {(u, k, v) for t in history for u, ch in t.changes.items() for k, v in ch.items()}
        tried_together = {(u, tuple(sorted(ch.items())))
                          for t in history for u, ch in t.changes.items()}
        queue = ([Hypothesis.of_finding(f) for f in diagnosis.findings]
                 + self._escalations(context, history) + _out_of_lto(context, history))
        queue.sort(key=lambda h: (-h.prior, h.unit, h.knob, h.value))
        proposals, chosen = [], set()
        for h in queue:
            done = ((h.unit, tuple(sorted(h.changes().items()))) in tried_together if h.also
                    else (h.unit, h.knob, h.value) in tried)
            if done or h.key in chosen or _banned(h, lessons):
                continue
            if all(incumbent.get(h.unit, {}).get(k) == v for k, v in h.changes().items()):
                continue
            chosen.add(h.key)
            proposals.append(Proposal({h.unit: h.changes()}, h.why))
            if len(proposals) >= want:
                break
        return proposals

    def _escalations(self, context: Context, history: list[Trial]) -> list[Hypothesis]:
        """A value that helped: try the next one in the same direction, first.  With
        attribution, "helped" is the unit's own cost, not the whole program's verdict."""
        more = []
        for t in history:
            for unit, changes in t.changes.items():
                effect = t.effects.get(unit)
                if (effect.verdict if effect else t.verdict) != FASTER:
                    continue
                knobs = context.knobs_of(unit)
                for name, value in changes.items():
                    knob = knobs.get(name)
                    index = knob.index_of(value) if knob else None
                    if knob and _ordered(name) and index and index + 1 < len(knob.values):
                        more.append(Hypothesis(unit, name, knob.short(index + 1),
                                               0.9 * context.weight(unit),
                                               f"{name}={value} helped: try {knob.short(index + 1)}"))
        return more

    # -- diagnoser ---------------------------------------------------------------------------
    def diagnose(self, context: Context, trial: Trial) -> Lesson:
        slower = trial.slower_units()      # the unit attribution blames goes first
        changed = sorted(trial.changes.items(), key=lambda item: item[0] not in slower)
        [(unit, changes)] = changed[:1] or [("", {})]
        knobs = context.knobs_of(unit)
        if len(changes) != 1:
            return Lesson(f"trial {trial.n} regressed ({trial.outcome}); several knobs changed",
                          unit)
        [(name, value)] = changes.items()
        knob = knobs.get(name)
        if trial.ratio is None or knob is None or not _ordered(name):
            return Lesson(f"{unit}: {name}={value} gave {trial.outcome} "
                          f"{trial.detail[:80]}; do not use {name} on this unit", unit, name, [])
        index = knob.index_of(value) or 0
        default_side = range(index, len(knob.values))   # this value and stronger ones
        how = (f"its own cost {trial.effects[unit].text()}" if unit in trial.effects
               else f"{trial.ratio:.3f}x")
        return Lesson(f"{unit}: {name}={value} was slower ({how}); avoid it and "
                      "stronger values", unit, name, [knob.short(i) for i in default_side])


# A decision knob's family (tuning/decision_knobs.py): its values are in order.
ORDERED_DECISIONS = ("/vectorize", "/interleave", "/unroll")


def _weight(knob: Knob, unit_weight: float, hottest: float) -> float:
    """How much a hypothesis on `knob` can move the program by: its unit's share, and a
    decision's by how hot its own code is beside the unit's hottest (`hottest`, the
    largest Knob.heat of the unit's knobs): the loop of bc's `_bc_simp_mul`, 82 % of the
    run, ahead of its unit's other loops at 1 %.  Unit flags and decisions stay on one
    scale."""
    return unit_weight * knob.heat / hottest if knob.heat > 0 and hottest > 0 else unit_weight


def _hottest(knobs: Iterable[Knob]) -> float:
    return max((knob.heat for knob in knobs), default=0.0)


def _ordered(knob: str) -> bool:
    """Whether a knob's values go one way (a stronger value after a weaker one)."""
    return knob in ORDERED or knob.endswith(ORDERED_DECISIONS)


def _decision_rules(knob: str, remarks, where: str = "") -> list[tuple[str, float, str]]:
    """(value, prior, why) for a decision knob (tuning/decision_knobs.py) from the
    remarks of its unit's hot functions: the loop's function's vectorizer and unroller
    remarks, a callee's inlining remarks.  A loop whose place is known (`where`) also
    reads the remarks made at its line: a helper inlined into a hot function has its
    loop's remarks under the caller's name (bc's digit multiplication, inside
    `_bc_rec_mul`).  The search reads a hot loop's decisions even without them, at
    exploration's prior."""
    function, _, family = knob.rpartition("/")
    function = function.partition("@")[0]
    line = where.rsplit(":", 1)[0] if where.count(":") >= 2 else ""
    mine = [r for r in remarks if r.function == function or (line and r.location == line)]
    found: list[tuple[str, float, str]] = []
    if family == "vectorize":
        if any(r.pass_name == "loop-vectorize" and r.kind == "Missed" for r in mine):
            found += [("vectorize.width=4", 0.35, f"a loop in {function} not vectorized by "
                       "the cost model: its own width"),
                      ("vectorize.width=8", 0.28, f"a loop in {function} not vectorized")]
        widths = [r.numbers.get("VectorizationFactor", 0) for r in mine
                  if r.pass_name == "loop-vectorize" and r.kind == "Passed"]
        if widths and max(widths) in (2, 4, 8):
            wider = int(2 * max(widths))
            found.append((f"vectorize.width={wider}", 0.3, f"loops in {function} vectorized "
                          f"at width {max(widths):.0f}: this one at {wider}"))
    elif family == "interleave" and any(r.pass_name == "loop-vectorize" and r.kind == "Passed"
                                        for r in mine):
        found.append(("interleave.count=4", 0.28, f"vectorized loops in {function}: this one "
                      "interleaved 4x"))
    elif family == "unroll":
        if any(r.pass_name == "loop-unroll" for r in mine):
            found.append(("unroll.count=4", 0.22, f"loops in {function} unrolled under a "
                          "size budget: this one by 4"))
        elif any(r.pass_name == "loop-vectorize" and r.kind == "Missed" for r in mine):
            # neither vectorized nor unrolled: a loop of two exits, which the unroller
            # leaves whole at run time (bc's digit multiplication by 2: 12 % fewer
            # instructions; Opus's pulse search 1.9 %; brotli's match search 1.7 %, yet
            # slower in time: pairs decide)
            found.append(("unroll.count=2", 0.3, f"a loop in {function} neither vectorized "
                          "nor unrolled: unroll it by 2"))
    elif family == "inline":
        declined = {r.name: r for r in remarks if r.pass_name == "inline"
                    and r.name in ("TooCostly", "NeverInline") and _callee(r) == function
                    and not _recursive(r)}
        if "TooCostly" in declined:
            found.append(("alwaysinline=1", 0.4, f"calls to {function} not inlined at cost "
                          f"{declined['TooCostly'].numbers.get('Cost', 0):.0f}: inline it "
                          "wherever it is called, across units under LTO too"))
        elif "NeverInline" in declined:
            # the source says noinline, often for size across many copies; the profile
            # says the callee is hot (zstd's row match finder: 2.7 % fewer instructions
            # inlined, bench/decision_ceiling.py)
            found.append(("alwaysinline=1", 0.3, f"{function} is hot and marked never to "
                          "be inlined: inline it wherever it is called"))
    return found


def _callee(remark) -> str:
    """The callee an inliner remark is about: "work not inlined into run because ..."."""
    return remark.message.partition(" not inlined into ")[0].strip()


def _recursive(remark) -> bool:
    """An inliner remark on a function's call to itself (bc's `_bc_rec_mul`, "too
    costly" at its threshold): neither a higher threshold nor `alwaysinline` inlines
    it (the latter built the baseline's binary byte for byte)."""
    return _callee(remark) == remark.function


def _out_of_lto(context: Context, history: list[Trial]) -> list[Hypothesis]:
    """One knob value that left the program byte for byte as it was, on a unit under
    link-time optimization (the LTO link drops -funroll-loops, -mllvm -unroll-threshold,
    the alignments and more of a unit's compile flags): the same value with the unit out
    of LTO.  After every evidence-based hypothesis, ahead of exploration: on the suite
    and LAME under pgo+lto (budget 20), none of 41 candidates out of LTO (alone or with
    a value) was faster; at a higher prior they took a third of the budget."""
    knob, value = LEAVE_LTO
    if knob not in {k.name for k in context.space.knobs}:
        return []
    again = []
    for t in history:
        if t.detail != IDENTICAL or len(t.changes) != 1:
            continue
        [(unit, changes)] = t.changes.items()
        if len(changes) == 1 and knob not in changes:
            [(name, tried)] = changes.items()
            again.append(Hypothesis(unit, name, tried, OUT_OF_LTO_PRIOR * context.weight(unit),
                                    f"{name}={tried} changed nothing under LTO: try it with "
                                    "the unit out of LTO", ((knob, value),)))
    return again


def _banned(h: Hypothesis, lessons: list[Lesson]) -> bool:
    """A lesson on any knob the hypothesis sets: a value tried again out of LTO is not
    when leaving LTO was slower on its own (the value would have to win that back)."""
    changes = h.changes()
    return any(lesson.unit == h.unit and lesson.knob in changes
               and (not lesson.avoid or changes[lesson.knob] in lesson.avoid)
               for lesson in lessons)
