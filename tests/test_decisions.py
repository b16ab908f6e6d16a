"""Decisions carried in the IR (issue 61; F85, S1): a decision in the database changes the machine
code of the function it names in the final program, under full LTO, ThinLTO and in a
shared library, where a unit's own flags do not reach; without it the code is the plain
stage build's.  Apply builds it bit for bit; a decision whose loop changed is said in
one line and left out, never applied elsewhere; `db show` and `db status` name them."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from support import AUTOPASS, recorded_copy, recorded_sources

from autopass_build import config as cfg
from autopass_build.candidates.evaluate import Evaluator
from autopass_build.core import decisions, flags, flags_db
from autopass_build.core.files import hash_file
from autopass_build.evidence.inventory import of_unit
from autopass_build.evidence.unit import Evidence
from autopass_build.store.index import Store
from autopass_build.tuning.agents.rules import _decision_rules
from autopass_build.tuning.decision_knobs import hot_shares, knobs_for

MINI = Path(__file__).parent / "data" / "decisions-mini"
CONFIG = '[run]\ncommand = ["{exe}", "20"]\ntarget = "TARGET"\n'
# target, its link output, the stage, where `scale` ends up
CASES = {"lto": ("app", "lto", "app"), "thinlto": ("app", "thinlto", "app"),
         "shared": ("appshared", "thinlto", "libk.so")}


def recorded(tmp_path: Path, case: str) -> Path:
    target = CASES[case][0]
    return recorded_copy(MINI, tmp_path / case, CONFIG.replace("TARGET", target),
                         ("make", "-s", target))


def no_vectors(root: Path) -> decisions.Decision:
    """`scale`'s loop not vectorized: width 1, keyed by the recorded unit's inventory."""
    store = Store.open_existing(str(root / ".autopass"))
    evaluator = Evaluator(store, cfg.load(str(root / "autopass.toml")))
    unit = next(u for u in store.units() if u.source_rel == "kernels.c")
    found = of_unit(evaluator.replayer, unit)
    [loop] = found.loops_of("scale")
    return decisions.Decision("loop", "scale", loop.path, loop.hash, "vectorize.width", 1)


def ship(root: Path, case: str, carried: tuple[decisions.Decision, ...]) -> None:
    target, stage, _ = CASES[case]
    db = flags_db.empty()
    db.target = flags_db.TargetStages(target, (stage,), "-O2", ("main.c", "kernels.c"))
    if carried:
        tokens = tuple(t for d in carried for t in d.flags())
        db.entries["kernels.c"] = flags_db.FlagsEntry(tokens, hash_file(str(root / "kernels.c")))
    flags_db.save(str(root / "autopass.flags.json"), db)


def build(root: Path, case: str) -> subprocess.CompletedProcess:
    subprocess.run(["make", "-s", "clean"], cwd=root, check=True)
    done = subprocess.run([AUTOPASS, "apply", "--", "make", "-s", CASES[case][0]], cwd=root,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done


def scale_code(root: Path, case: str) -> str:
    """The machine code of `scale` in the final program (or its library)."""
    binary = root / CASES[case][2]
    said = subprocess.run(["objdump", "-d", "--no-show-raw-insn", "--disassemble=scale",
                           str(binary)], capture_output=True, text=True, check=True).stdout
    body = said.split("<scale>:", 1)[1]
    return "\n".join(line.split(":", 1)[1].strip() for line in body.splitlines()
                     if ":" in line)


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_decision_reaches_the_named_function_through_the_link(tmp_path, case) -> None:
    root = recorded(tmp_path, case)
    decision = no_vectors(root)
    ship(root, case, ())
    build(root, case)
    plain = scale_code(root, case)
    assert "mulps" in plain                   # the stage build vectorizes scale's loop
    ship(root, case, (decision,))
    first = build(root, case)
    assert "autopass: warning" not in first.stderr, first.stderr
    decided = scale_code(root, case)
    assert decided != plain
    program = (root / CASES[case][2]).read_bytes()
    build(root, case)
    assert (root / CASES[case][2]).read_bytes() == program     # bit for bit, again
    ship(root, case, ())
    build(root, case)
    assert scale_code(root, case) == plain                     # without it: the plain code
    ran = subprocess.run([f"./{CASES[case][0]}", "20"], cwd=root, capture_output=True,
                         text=True, check=True)
    assert ran.stdout.strip()


def test_a_decision_whose_loop_changed_is_said_and_left_out(tmp_path) -> None:
    case = "lto"
    root = recorded(tmp_path, case)
    decision = no_vectors(root)
    ship(root, case, (decision,))
    source = root / "kernels.c"
    original = source.read_text()
    # elsewhere in the file: the entry's flags are stale, the loop's decision still holds
    source.write_text(original + "int added(int x) { return x + 1; }\n")
    ship(root, case, ())
    build(root, case)
    plain = scale_code(root, case)
    ship(root, case, (decision,))
    elsewhere = build(root, case)
    assert "tuned decision" not in elsewhere.stderr
    elsewhere_code = scale_code(root, case)
    assert elsewhere_code != plain
    shown = subprocess.run([AUTOPASS, "db", "show"], cwd=root, capture_output=True, text=True)
    assert f"loop {decision.where} of scale: vectorize.width 1" in shown.stdout
    # the loop itself: not applied, one line, the plain code
    source.write_text(original.replace("a * x[i] + y[i]", "a * x[i] - y[i]"))
    changed = build(root, case)
    lines = [line for line in changed.stderr.splitlines() if "tuned decision" in line]
    assert len(lines) == 1 and "the loop changed since it was tuned" in lines[0], \
        changed.stderr
    left_out = scale_code(root, case)
    assert left_out != elsewhere_code
    ship(root, case, ())
    build(root, case)
    assert scale_code(root, case) == left_out           # what the plain build makes of it
    ship(root, case, (decision,))
    status = subprocess.run([AUTOPASS, "db", "status"], cwd=root, capture_output=True,
                            text=True)
    assert "decisions carried in the IR: 0/1 still match today's source" in status.stdout
    assert "the loop changed" in status.stdout


def test_the_knobs_of_a_hot_unit_name_its_loops_and_callees(tmp_path) -> None:
    root = recorded(tmp_path, "lto")
    store = Store.open_existing(str(root / ".autopass"))
    evaluator = Evaluator(store, cfg.load(str(root / "autopass.toml")))
    unit = next(u for u in store.units() if u.source_rel == "kernels.c")
    found = of_unit(evaluator.replayer, unit)
    knobs = {k.name: k for k in knobs_for(found, {"scale": 80.0, "total": 5.0})}
    [loop] = found.loops_of("scale")
    assert {f"scale@{loop.path}/vectorize", f"scale@{loop.path}/interleave",
            f"scale@{loop.path}/unroll"} <= set(knobs)
    vectorize = knobs[f"scale@{loop.path}/vectorize"]
    assert vectorize.short(1) == "vectorize.width=1"
    assert vectorize.index_of("vectorize.width=8") is not None
    for knob in knobs.values():               # every value passes the allowlist
        for value in knob.values[1:]:
            flags.validate(value)


@pytest.mark.parametrize("token", [
    "loop:scale:1:0011aabb:vectorize.width=3",     # not a width it writes
    "loop:scale:1:0011aabb:unroll.count=100",
    "loop:sc ale:1:0011aabb:unroll.count=4",        # whitespace
    "loop:scale:1:0011AABB:unroll.count=4",         # not its hash's spelling
    "loop:scale:x:0011aabb:unroll.count=4",
    "fn:scale:1:0011aabb:noinline=1",               # a function has no place
    "fn:scale:-:0011aabb:optnone=1",
    "call:scale:memcpy:0011aabb:noinline=1",        # a call site needs its number
    "loop:scale:1:0011aabb:vectorize.width=8:more",
    "loop:-fplugin=x.so:1:0011aabb:unroll.count=4",
])
def test_the_allowlist_takes_decisions_only_in_their_grammar(token) -> None:
    with pytest.raises(flags.FlagError):
        flags.validate(["-mllvm", decisions.OPTION + token])


HELPER = """\
static int dot(const int *a, const int *b, int n) {   /* inlined: the profile never sees it */
    int s = 0;
    for (int i = 0; i < n; i++)
        s += a[i] * b[i];
    return s;
}
int cold(const int *a, int n) {
    int s = 0;
    for (int i = 0; i < n; i++)
        s ^= a[i];
    return s;
}
static int scan(const int *a, const int *b, int n) {   /* two exits: not vectorized */
    int s = 0;
    while (n > 0 && *a != 7) {
        s += *a++ * *b--;
        n--;
    }
    return s;
}
int hot(const int *a, const int *b, int n) {
    int s = 0;
    for (int r = 0; r < 8; r++)
        s += dot(a, b, n) + scan(a, b + n - 1, n) + r;
    return s + cold(a, n);
}
"""


def test_the_loops_of_a_helper_inlined_into_a_hot_function_are_knobs(tmp_path) -> None:
    """A static helper inlined into the hot function that calls it never shows in the
    profile, yet its loop is where the time goes (bc: `_bc_simp_mul` inside
    `_bc_rec_mul`, 82 % of the run).  Its loops are knobs at the caller's share.  A
    function the hot one calls but the recorded object keeps out of line is the
    profile's to name: not among the profile's, it is not hot (bc's `bc_sub`, under the
    profile's cut, took the caller's 80 % and six loop slots with its callees)."""

    root = recorded_sources(tmp_path / "helper", {
        "k.c": HELPER,
        "main.c": "int hot(const int *a, const int *b, int n);\n"
                  "int main(void) { int a[32] = {1}; return hot(a, a, 32) & 1; }\n",
        "Makefile": "app: main.c k.c\n\t$(CC) -O2 -g -o app main.c k.c\n"},
        '[run]\ncommand = ["{exe}"]\n')
    store = Store.open_existing(str(root / ".autopass"))
    evaluator = Evaluator(store, cfg.load(str(root / "autopass.toml")))
    unit = next(u for u in store.units() if u.source_rel == "k.c")
    found = of_unit(evaluator.replayer, unit)
    kept = evaluator.out_of_line(unit)
    assert {"hot", "cold"} <= kept and "dot" not in kept
    assert hot_shares(found, {"hot": 90.0}, kept) == {"hot": 90.0, "dot": 90.0,
                                                       "scan": 90.0}
    knobs = {k.name for k in knobs_for(found, {"hot": 90.0}, kept)}
    [loop] = found.loops_of("dot")
    assert f"dot@{loop.path}/unroll" in knobs
    assert not [k for k in knobs if k.startswith("cold@")]
    assert hot_shares(found, {"hot": 90.0, "dot": 4.0}, kept)["dot"] == 4.0   # its own
    assert hot_shares(found, {"hot": 90.0}) == {"hot": 90.0}     # none kept is known
    # the vectorizer's remark on dot's loop is made in `hot`, where it was inlined: the
    # rules agent finds it by the loop's line
    remarks, _ = Evidence(store).collect(unit)
    assert loop.location.startswith("k.c:")
    [(value, _, why)] = _decision_rules(f"dot@{loop.path}/vectorize", remarks, loop.location)
    assert value.startswith("vectorize.width=") and "vectorized at width" in why
    assert _decision_rules(f"dot@{loop.path}/vectorize", remarks) == []
    # a loop neither vectorized nor unrolled (two exits): unrolled by 2 is proposed
    [scanning] = found.loops_of("scan")
    [(value, _, why)] = _decision_rules(f"scan@{scanning.path}/unroll", remarks,
                                        scanning.location)
    assert value == "unroll.count=2" and "neither vectorized nor unrolled" in why


TWO_HELPERS = """\
static long alpha(const long *a, int n) {   /* inlined, light (5 %): its name sorts first */
    long s = 0;
    for (int r = 0; r < 30; r++)
        for (int i = 0; i < n; i++)
            s ^= (a[i] >> 1) + r;
    return s;
}
static long zeta(const long *a, int n) {    /* inlined, where the time goes */
    long s = 0;
    for (int r = 0; r < 300; r++)
        for (int i = 0; i < n; i++)
            s += (a[i] * r) ^ (s >> 3);
    return s;
}
long hot(const long *a, int n, int rounds) {
    long s = 0;
    for (int k = 0; k < rounds; k++)
        s += alpha(a, n) + zeta(a, n) + k;
    return s;
}
"""
TWO_HELPERS_MAIN = """\
long hot(const long *a, int n, int rounds);
int main(void) {
    static long a[1000];
    for (int i = 0; i < 1000; i++) a[i] = i * 7;
    return (int)(hot(a, 1000, 1200) & 1);
}
"""


@pytest.mark.skipif(shutil.which("perf") is None, reason="needs perf")
def test_the_debug_info_says_which_inlined_helper_the_time_is_in(tmp_path) -> None:
    """Two static helpers inlined into the one hot function: the profile names only the
    caller, and by inheritance both helpers' loops had its share and tied, broken by
    name (bc: `_bc_rm_leading_zeros` was measured before `_bc_simp_mul`, 82 % of the
    run, and the search stopped between them).  The binary's debug info says which
    helper each sampled instruction is: the light helper's loop goes last, the heavy
    one's first, among the knobs and in the rules agent's plan (RELIABILITY F106)."""
    from autopass_build.evidence.hotspots import load as load_profile
    from autopass_build.evidence.inlined import shares
    from autopass_build.measuring.sampling import perf_report
    from autopass_build.tuning.agents import Context, HotUnit, RulesBackend
    from autopass_build.tuning.space import default_space

    makefile = "app: main.c k.c\n\t$(CC) -O2 -g -o app main.c k.c\n"
    root = recorded_sources(tmp_path / "two", {"k.c": TWO_HELPERS, "main.c": TWO_HELPERS_MAIN,
                                               "Makefile": makefile},
                            '[run]\ncommand = ["{exe}"]\n')
    done = subprocess.run([AUTOPASS, "profile"], cwd=root, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    store = Store.open_existing(str(root / ".autopass"))
    profile = load_profile(store.dir)
    assert profile is not None and profile.method == "perf"
    [hot] = [f for f in profile.functions if f.symbol == "hot"]
    assert hot.inlined is not None and hot.inlined["zeta"] > 0.8 * hot.share, hot
    assert hot.inlined.get("alpha", 0.0) < 0.1 * hot.share, hot
    assert re.search(r"of which inlined: zeta \d+\.\d%, alpha \d\.\d%", done.stdout), done.stdout

    evaluator = Evaluator(store, cfg.load(str(root / "autopass.toml")))
    unit = next(u for u in store.units() if u.source_rel == "k.c")
    found = of_unit(evaluator.replayer, unit)
    inlined = profile.inlined()
    measured = hot_shares(found, {"hot": hot.share}, evaluator.out_of_line(unit), inlined)
    assert measured["zeta"] > 0.8 * hot.share > measured.get("alpha", 0.0) * 8
    knobs = knobs_for(found, {"hot": hot.share}, evaluator.out_of_line(unit), inlined)
    loops = [k for k in knobs if "@" in k.name]
    assert loops[0].name.startswith("zeta@") and loops[0].heat == measured["zeta"]
    assert [k.heat for k in loops] == sorted((k.heat for k in loops), reverse=True)

    context = Context(store, {unit.source_rel: unit}, default_space(lto=True),
                      [HotUnit("k.c", hot.share, {"hot": hot.share}, "-O2")], str(root),
                      unit_knobs={"k.c": knobs})
    findings = RulesBackend().analyse(context).findings
    on_loops = [f for f in findings if "@" in f["knob"]]
    assert on_loops[0]["knob"].startswith("zeta@"), on_loops[:6]
    # each knob's first try: all of zeta's loop's before alpha's (the evidence may put a
    # second value of alpha's ahead of zeta's exploration)
    firsts = list(dict.fromkeys(f["knob"].partition("/")[0] for f in on_loops))
    [alpha_loop] = [k for k in firsts if k.startswith("alpha@")]
    assert firsts[0].startswith("zeta@") and firsts.index(alpha_loop) > 0, firsts

    # tune's knobs: with the line tables, nothing to say; without them (a profile of a
    # build without -g), the helpers take their caller's share, said once
    from dataclasses import replace

    from autopass_build.tuning.knob_spaces import KnobSpaces
    said: list[str] = []
    spaces = KnobSpaces(store.dir, True, said.append)
    spaces.joint(evaluator, ["k.c"], default_space(lto=True), profile)
    assert said == []
    bare_profile = replace(profile, functions=[replace(f, inlined=None)
                                               for f in profile.functions])
    for _ in range(2):
        spaces.joint(evaluator, ["k.c"], default_space(lto=True), bare_profile)
    assert said == ["decisions: alpha and zeta inlined into hot code take its caller's share "
                    "of the run: the program has no line tables to tell where in it the time "
                    "goes (built with -g, `autopass profile` tells them apart)"]

    # without line tables nothing is known of inlining: the knobs fall back to the
    # caller's share (hot_shares' other test)
    bare = tmp_path / "bare"
    subprocess.run(["clang-19", "-O2", "-o", str(bare), str(root / "main.c"),
                    str(root / "k.c")], check=True)
    read = perf_report([str(bare)], str(tmp_path), dict(os.environ), 60, 1999, sites=True)
    assert read.sites and shares(read.sites, sum(read.samples.values()), [str(bare)]) == {}


def test_every_hot_loop_has_every_value_of_its_knobs_every_time(tmp_path) -> None:
    """The loops' knob values were generators, used up by the first loop of the process:
    every later loop, in this unit or the next, had vectorize and interleave knobs with
    nothing to try."""
    root = recorded(tmp_path, "lto")
    store = Store.open_existing(str(root / ".autopass"))
    evaluator = Evaluator(store, cfg.load(str(root / "autopass.toml")))
    unit = next(u for u in store.units() if u.source_rel == "kernels.c")
    found = of_unit(evaluator.replayer, unit)
    hot = {"scale": 80.0, "total": 15.0}
    first, again = knobs_for(found, hot), knobs_for(found, hot)
    assert first == again
    loops = {k.name.partition("/")[0] for k in first if "@" in k.name}
    assert len(loops) == 2                                   # scale's loop and total's
    for knob in first:
        assert len(knob.values) > 2, knob.name               # "as recorded" and values
