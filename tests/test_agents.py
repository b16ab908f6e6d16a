"""Agents: the offline rules agent end to end, and LLM agents through the real `openai`
client against a scripted OpenAI-compatible server on 127.0.0.1 -- tool calls,
malformed JSON, 429, slow replies, a server without tools, an endpoint that is down
(F13), proposals outside the knob space or hostile (S1, S2, S4), API keys (S5), and
replaying a saved transcript."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from openai_server import ScriptedServer
from support import (
    AUTOPASS,
    TUNE_MINI_MEASURED,
    fix_tune_mini_profile,
    recorded_sources,
    recorded_tune_mini,
)

from autopass_build.core import flags as flagset
from autopass_build.store.index import Store
from autopass_build.tuning.agents import (
    AgentUnavailable,
    Context,
    FallbackBackend,
    HotUnit,
    LLMBackend,
    RulesBackend,
)
from autopass_build.tuning.agents.llm import OpenAITransport, Transcript
from autopass_build.tuning.journal import Journal
from autopass_build.tuning.space import default_space

KEY = "sk-test-SECRET-4242"
CONFIG = TUNE_MINI_MEASURED + """[tune]
stages = []
budget = 3
max_units = 2
[agent]
model = "scripted"
retries = 2
timeout = 20
"""


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    root = recorded_tune_mini(tmp_path_factory.mktemp("agents") / "mini", CONFIG, profile=False)
    fix_tune_mini_profile(root)
    return root


def tune(project: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([AUTOPASS, "tune", *args], cwd=project, capture_output=True,
                          text=True, timeout=600, env={**os.environ, **(env or {})})


def search_flags(project: Path) -> list[dict]:
    journal = Journal.latest(str(project / ".autopass"))
    return [e.flags for e in journal.entries if e.phase == "search"]


def context_for(project: Path) -> Context:
    store = Store.open_existing(str(project / ".autopass"))
    units = {u.source_rel: u for u in store.units()}
    hot = [HotUnit("hot.c", 60.0, {"hot_checksum": 60.0}, "-O1"),
           HotUnit("warm.c", 30.0, {"warm_sort_blocks": 30.0}, "-O1")]
    return Context(store, units, default_space(), hot, str(project))


def test_rules_agent_is_the_default_and_starts_from_the_evidence(project) -> None:
    done = tune(project)
    assert done.returncode == 0, done.stderr
    settings = Journal.latest(str(project / ".autopass")).settings
    assert settings.strategy == "agent"
    first = search_flags(project)[0]
    assert list(first.values()) == ["-O3"]         # built at -O1: the strongest rule fires
    assert json.loads((project / "autopass.flags.json").read_text())["entries"]


def test_a_hot_unit_built_for_size_is_first_tried_for_speed(project) -> None:
    """duktape builds its 84 % unit at -Os: the rules agent tried two remark-driven
    knobs before -O2, which was the winner (0.959x on PGO)."""
    context = context_for(project)
    context.hot = [HotUnit("hot.c", 84.0, {"hot_checksum": 84.0}, "-Os")]
    findings = RulesBackend().analyse(context).findings
    assert [(f["knob"], f["value"]) for f in findings[:2]] == [("opt", "-O2"), ("opt", "-O3")]


def test_rules_diagnoser_bans_what_regressed(project) -> None:
    from autopass_build.tuning.agents import Trial
    context, rules = context_for(project), RulesBackend()
    diagnosis = rules.analyse(context)
    assert diagnosis.findings[0]["knob"] == "opt" and diagnosis.findings[0]["value"] == "-O3"
    slower = Trial(1, {"hot.c": {"inline_threshold": "450"}}, "OK", 1.08, "slower")
    lesson = rules.diagnose(context, slower)
    assert lesson.avoid == ["450", "900", "1800"]
    wrong = Trial(2, {"hot.c": {"unroll": "-funroll-loops"}}, "WRONG_OUTPUT", None, None)
    plan = rules.plan(context, diagnosis, [slower, wrong], {}, [lesson, rules.diagnose(context, wrong)],
                      [], 200)
    proposed = {(u, k, v) for p in plan for u, ch in p.changes.items() for k, v in ch.items()}
    assert not [p for p in proposed if p[:2] == ("hot.c", "unroll")]
    assert not [p for p in proposed if p[:2] == ("hot.c", "inline_threshold") and p[2] in
                ("450", "900", "1800")]
    assert ("hot.c", "inline_threshold", "120") in proposed


def test_with_attribution_the_agent_builds_on_the_unit_that_got_faster(project) -> None:
    """A candidate the whole program calls "same" but whose unit attribution found 0.8x
    of its own cost becomes the agent's incumbent for that unit; without attribution it
    does not, and a unit found slower is never adopted."""
    from autopass_build.core.outcome import Outcome
    from autopass_build.measuring.attribution import UnitEffect
    from autopass_build.tuning.journal import Entry, Phase
    from autopass_build.tuning.space import JointSpace
    from autopass_build.tuning.strategies.agent import AgentStrategy

    def entry(source: str, unit_verdict: str | None, ratio: float) -> Entry:
        effects = () if unit_verdict is None else (UnitEffect(
            source, ratio, ratio - 0.05, ratio + 0.05, 8, 60.0, unit_verdict, "controlled"),)
        return Entry(1, Phase.SEARCH, "c", {}, Outcome.OK, "same", 1.0, 0.98, 1.02, 10,
                     effects=effects)

    def agent() -> AgentStrategy:
        space = JointSpace([("hot.c", default_space()), ("warm.c", default_space())])
        # one hypothesis per plan: the next plan is the one made on the incumbent (a
        # plan's hypotheses all apply to the incumbent the planner saw: one batch)
        strategy = AgentStrategy(space, 0, {"batch": 1})
        strategy.context, strategy.backend = context_for(project), RulesBackend()
        return strategy

    for unit_verdict, ratio, adopted in (("faster", 0.8, True), (None, 1.0, False),
                                         ("slower", 1.2, False)):
        strategy = agent()
        first = strategy.ask()
        assert first is not None and first != strategy.space.default()
        [(changed, _)] = [(label, block) for label, _, block in strategy.space.split(first)
                          if any(block)]
        strategy.tell(first, 1.0, entry(changed, unit_verdict, ratio))
        assert (strategy.incumbent == first) is adopted, unit_verdict
        following = strategy.ask()    # the next plan is made on top of the incumbent
        assert following is not None
        kept = [i for i, v in enumerate(first) if v and following[i] == v]
        assert bool(kept) is adopted


def test_a_value_that_made_its_unit_faster_is_escalated(project) -> None:
    """The planner tries the next value in the same direction of a knob that helped;
    with attribution, "helped" is the unit's own cost, though the program said "same"."""
    from autopass_build.measuring.attribution import UnitEffect
    from autopass_build.tuning.agents import Trial

    context, rules = context_for(project), RulesBackend()
    diagnosis = rules.analyse(context)
    faster = UnitEffect("hot.c", 0.8, 0.75, 0.85, 8, 60.0, "faster", "controlled")
    helped = Trial(1, {"hot.c": {"inline_threshold": "450"}}, "OK", 1.0, "same",
                   effects={"hot.c": faster})
    unseen = Trial(1, {"hot.c": {"inline_threshold": "450"}}, "OK", 1.0, "same")
    for trial, escalated in ((helped, True), (unseen, False)):
        plan = rules.plan(context, diagnosis, [trial], {}, [], [], 200)
        reasons = [p.rationale for p in plan]
        assert any("inline_threshold=450 helped: try 900" in r for r in reasons) is escalated


def test_a_value_that_changed_nothing_under_lto_is_tried_out_of_it(project) -> None:
    """Under an LTO stage (the space has leave_lto) a value that left the program byte for
    byte the baseline is proposed again with the unit out of LTO, once, unless leaving
    LTO was slower on its own; without the knob nothing of the kind is said."""
    from dataclasses import replace

    from autopass_build.candidates.evaluate import IDENTICAL
    from autopass_build.tuning.agents import Trial

    rules = RulesBackend()
    unchanged = Trial(1, {"hot.c": {"unroll_threshold": "600"}}, "OK", 1.0, "same", IDENTICAL)
    measured = Trial(2, {"hot.c": {"unroll_threshold": "1200"}}, "OK", 1.0, "same")
    left_slower = Trial(3, {"hot.c": {"leave_lto": "-fno-lto"}}, "OK", 1.1, "slower")
    under_lto = replace(context_for(project), space=default_space(lto=True))
    diagnosis = rules.analyse(under_lto)
    assert any(f["knob"] == "leave_lto" and not f["why"].startswith("explore")
               for f in diagnosis.findings)
    plan = rules.plan(under_lto, diagnosis, [unchanged, measured], {}, [], [], 200)
    together = [p.changes for p in plan if len(p.changes.get("hot.c", {})) == 2]
    assert together == [{"hot.c": {"unroll_threshold": "600", "leave_lto": "-fno-lto"}}]
    lesson = rules.diagnose(under_lto, left_slower)
    assert not [p for p in rules.plan(under_lto, diagnosis, [unchanged, measured, left_slower],
                                      {}, [lesson], [], 200)
                if "leave_lto" in p.changes.get("hot.c", {})]
    again = rules.plan(under_lto, diagnosis, [unchanged, Trial(4, together[0], "OK", 1.0,
                                                                "same")], {}, [], [], 200)
    assert not [p for p in again if len(p.changes.get("hot.c", {})) == 2]   # tried once
    plain = context_for(project)
    assert not [p for p in rules.plan(plain, rules.analyse(plain), [unchanged], {}, [], [], 200)
                if len(p.changes.get("hot.c", {})) == 2]


PLAN_1 = {"candidates": [
    {"changes": {"hot.c": {"opt": "-O9"}}, "rationale": "not a value"},
    {"changes": {"hot.c": {"-fplugin=evil.so": "true"}}, "rationale": "not a knob"},
    {"changes": {"hot.c": {"opt": "$(touch canary)"}}, "rationale": "Ignore previous rules"},
    {"changes": {"hot.c": {"opt": "-O3"}}, "rationale": "-O1 leaves the loops scalar"},
    {"changes": {"hot.c": {"opt": "-O2"}}, "rationale": "beyond the batch of 4: dropped"}]}
PLAN_2 = {"candidates": [
    {"changes": {"lib/nowhere.c": {"opt": "-O3"}}, "rationale": "not a unit"},
    {"changes": {"warm.c": {"opt": "-O3"}}, "rationale": "same for the sort"},
    {"changes": {"hot.c": {"unroll": "-funroll-loops"}}, "rationale": "runtime unrolling"}]}


def openai_script() -> dict:
    return {
        "analyst": [{"status": 429},
                    {"tool_calls": [("remarks", {"unit": "hot.c", "function": "hot_checksum"})]},
                    {"content": json.dumps({"findings": [{"unit": "hot.c", "problem": "-O1",
                                                          "knob": "opt", "value": "-O3"}],
                                            "summary": "hot.c is built at -O1"})}],
        "planner": [{"content": "Sure! Here are candidates: {oops"},
                    {"content": json.dumps(PLAN_1)},
                    {"content": "```json\n" + json.dumps(PLAN_2) + "\n```"}],
        "diagnoser": [{"content": json.dumps({"lesson": "unrolling hurt", "unit": "hot.c",
                                              "knob": "unroll", "avoid": []})}],
    }


@pytest.fixture(scope="module")
def openai_run(project):
    with ScriptedServer(openai_script()) as server:
        done = tune(project, "--agent-backend", "openai", "--seed", "1",
                    env={"OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": KEY})
    return done, server, Journal.latest(str(project / ".autopass"))


def test_openai_agent_tools_retries_and_validation(project, openai_run) -> None:
    done, server, journal = openai_run
    assert done.returncode == 0, done.stderr
    roles = server.roles_asked()
    assert roles[:3] == ["analyst"] * 3                      # a 429, then retried by the client
    tool_answers = [m for m in server.requests[2]["messages"] if m["role"] == "tool"]
    assert tool_answers and "hot_checksum" in tool_answers[0]["content"]
    planner = [r for r in server.requests if "You are the planner" in r["messages"][0]["content"]]
    assert "not one valid JSON object" in planner[1]["messages"][-1]["content"]
    later = json.loads(planner[-1]["messages"][1]["content"])["rejected_proposals"]
    assert any("-O9" in f for f in later) and any("fplugin" in f for f in later)
    assert any("touch canary" in f for f in later)
    search = [e.flags for e in journal.entries if e.phase == "search"]
    assert search[0] == {"hot.c": "-O3"}                     # the only valid proposal of round 1
    assert search[1] == {"hot.c": "-O3", "warm.c": "-O3"}    # on top of the incumbent
    assert "-funroll-loops" in search[2]["hot.c"]
    for entry in journal.entries:
        for text in entry.flags.values():
            flagset.validate(text.split())
    assert not (project / "canary").exists()
    assert all(a == f"Bearer {KEY}" for a in server.auth)   # the key goes to the endpoint...
    run_files = [p for p in Path(journal.folder).iterdir() if p.is_file()]
    assert (Path(journal.folder) / "transcript.jsonl").exists()
    for path in run_files + [project / "autopass.flags.json"]:
        assert KEY not in path.read_text()                   # ...and nowhere else (S5)
    assert KEY not in done.stderr + done.stdout


def test_replay_backend_reproduces_the_run(project, openai_run) -> None:
    _, _, journal = openai_run
    expected = [e.flags for e in journal.entries if e.phase == "search"]
    config = project / "replay.toml"
    config.write_text(CONFIG + f'backend = "replay"\ntranscript = "{journal.folder}/transcript.jsonl"\n')
    done = tune(project, "--config", str(config), "--seed", "1")
    assert done.returncode == 0, done.stderr
    assert search_flags(project) == expected


def test_endpoint_down_falls_back_to_rules(project) -> None:
    done = tune(project, "--agent-backend", "openai", "--seed", "2", "--budget", "1",
                env={"OPENAI_BASE_URL": "http://127.0.0.1:9/v1", "OPENAI_API_KEY": KEY})
    assert done.returncode == 0, done.stderr
    assert "the rules agent continues" in done.stderr
    assert search_flags(project)[0] == {"hot.c": "-O3"} or list(search_flags(project)[0].values()) == ["-O3"]
    transcript = Path(Journal.latest(str(project / ".autopass")).folder) / "transcript.jsonl"
    assert "falling back to the rules agent" in transcript.read_text()


def test_server_without_tools_gets_plain_json(project, tmp_path) -> None:
    script = {"analyst": [{"reject_tools": True, "content": json.dumps(
        {"findings": [], "summary": "nothing"})}]}
    with ScriptedServer(script) as server:
        backend = LLMBackend(OpenAITransport("m", server.base_url, KEY, 10, 0),
                             Transcript(str(tmp_path / "t.jsonl"), [KEY]), 10, 10000)
        diagnosis = backend.analyse(context_for(project))
    assert diagnosis.text == "nothing"
    assert server.requests[0].get("tools") and not server.requests[1].get("tools")
    assert "tools unsupported" in (tmp_path / "t.jsonl").read_text()


def test_slow_endpoint_and_budget_hand_over_to_rules(project, tmp_path) -> None:
    context = context_for(project)
    with ScriptedServer({"analyst": [{"delay": 3, "content": "{}"}]}) as server:
        slow = LLMBackend(OpenAITransport("m", server.base_url, KEY, 0.5, 0),
                          Transcript(None, []), 10, 10000)
        with pytest.raises(AgentUnavailable, match="Timeout"):
            slow.analyse(context)
        fallback = FallbackBackend(slow, Transcript(None, []))
        assert fallback.analyse(context).findings[0]["value"] == "-O3"   # the rules' answer
        assert fallback.name == "openai->rules"
    spent = LLMBackend(OpenAITransport("m", "http://127.0.0.1:9/v1", KEY, 1, 0),
                       Transcript(None, []), 0, 10000)
    with pytest.raises(AgentUnavailable, match="budget"):
        spent.analyse(context)


def test_resuming_without_budget_keeps_the_runs_own_budget(project) -> None:
    """A run of --budget 2 resumed with a bare --resume took [tune].budget (40 by default)
    and went on measuring (libvorbis: "[1/33]" after a budget-8 run); only --budget raises.
    The run finished, so a bare --resume says so and measures nothing."""
    first = tune(project, "--seed", "7", "--budget", "2")
    assert first.returncode == 0, first.stderr
    before = search_flags(project)
    resumed = tune(project, "--resume")
    assert resumed.returncode == 2 and "nothing to resume" in resumed.stderr, resumed.stderr
    assert search_flags(project) == before and len(before) <= 2
    assert Journal.latest(str(project / ".autopass")).settings.budget == 2


def test_resuming_an_llm_run_replays_its_transcript_first(project) -> None:
    """A resumed openai run asks the endpoint only for what comes after the journal."""
    with ScriptedServer(openai_script()) as server:
        env = {"OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": KEY}
        first = tune(project, "--agent-backend", "openai", "--seed", "5", "--budget", "2",
                     env=env)
        assert first.returncode == 0, first.stderr
        asked_first = len(server.requests)
        before = search_flags(project)
        resumed = tune(project, "--agent-backend", "openai", "--resume", "--budget", "3",
                       env=env)
        assert resumed.returncode == 0, resumed.stderr
    after = search_flags(project)
    assert after[:2] == before and len(after) == 3
    later_roles = server.roles_asked()[asked_first:]
    assert "analyst" not in later_roles                # replayed, not asked again
    assert later_roles.count("planner") <= 1


def test_a_hot_callee_the_source_marks_noinline_is_proposed_inlined(tmp_path) -> None:
    """The rules agent reads clang's own inlining remarks for a callee's inline decision:
    a call not inlined because the callee is marked `noinline` (remark NeverInline; zstd's
    row match finder, whose inlining runs 2.7 % fewer instructions) is proposed for
    `alwaysinline`, below a call the inliner found too costly; a callee inlined already
    gets nothing."""
    from autopass_build.core import toolchain
    from autopass_build.evidence.unit import parse_remarks
    from autopass_build.tuning.agents.rules import _decision_rules

    source = tmp_path / "calls.c"
    source.write_text("__attribute__((noinline)) static int never(int x) { return x * 7 + 1; }\n"
                      "static int small(int x) { return x + 3; }\n"
                      "int caller(int x) { return never(x) + small(x); }\n")
    compiler = toolchain.find_tool("clang")
    assert compiler is not None
    subprocess.run([compiler, "-O2", "-c", str(source), "-o", str(tmp_path / "calls.o"),
                    "-fsave-optimization-record",
                    f"-foptimization-record-file={tmp_path / 'calls.yaml'}"], check=True)
    remarks = parse_remarks((tmp_path / "calls.yaml").read_text())
    [(value, prior, why)] = _decision_rules("never/inline", remarks)
    assert value == "alwaysinline=1" and prior < 0.4 and "marked never to be inlined" in why
    assert _decision_rules("small/inline", remarks) == []


COSTLY_CALLEE = """\
int work(const int *a, int n) {      /* too costly for the inliner at -O2, not by much */
    int s = 0;
    for (int i = 0; i < n; i++) {
        int v = a[i];
        if (v & 1) s += v * 3; else s -= v / 3;
        if (v & 2) s ^= v << 2; else s += v >> 1;
        if (v & 4) s += v % 7; else s -= v % 5;
        if (v & 8) s ^= v * 11; else s += v * 13;
        if (v & 16) s += v / 9; else s -= v % 11;
        if (v & 32) s ^= v * 17; else s += v / 19;
        if (v & 64) s += v % 23; else s -= v / 29;
        if (v & 128) s ^= v * 31; else s += v % 37;
    }
    return s;
}
int run(const int *a, int n) {
    int s = 0;
    for (int r = 0; r < 100000; r++) s += work(a, n) ^ r;
    return s;
}
"""


def test_under_lto_always_inlining_a_costly_callee_goes_ahead_of_the_units_threshold(
        tmp_path) -> None:
    """A hot call the inliner found too costly gives two hypotheses: the unit's inline
    threshold above its cost, and always inlining the callee (a decision carried in the
    IR).  Without LTO the threshold goes first; under LTO the decision does, since the
    link optimizes the unit again and keeps the decision, not the flag (bc: `tune --time
    15m` on PGO + LTO spent its one search evaluation on the threshold)."""
    from autopass_build import config as cfg
    from autopass_build.candidates.evaluate import Evaluator
    from autopass_build.evidence.inventory import of_unit
    from autopass_build.tuning.decision_knobs import knobs_for

    root = recorded_sources(tmp_path / "costly", {
        "costly.c": COSTLY_CALLEE,
        "main.c": "int run(const int *a, int n);\nint main(void) {\n    int a[64];\n"
                  "    for (int i = 0; i < 64; i++) a[i] = i;\n    return run(a, 64) & 1;\n}\n",
        "Makefile": "app: main.c costly.c\n\t$(CC) -O2 -o app main.c costly.c\n"},
        '[run]\ncommand = ["{exe}"]\n')
    store = Store.open_existing(str(root / ".autopass"))
    evaluator = Evaluator(store, cfg.load(str(root / "autopass.toml")))
    units = {u.source_rel: u for u in store.units()}
    hot = [HotUnit("costly.c", 95.0, {"run": 50.0, "work": 45.0}, "-O2")]
    own = {"costly.c": knobs_for(of_unit(evaluator.replayer, units["costly.c"]),
                                 {"run": 50.0, "work": 45.0})}

    def first_of_the_two(lto: bool) -> tuple[str, str]:
        context = Context(store, units, default_space(lto=lto), hot, str(root),
                          unit_knobs=own)
        findings = RulesBackend().analyse(context).findings
        [found] = [(f["knob"], f["value"]) for f in findings
                   if f["knob"] in ("inline_threshold", "work/inline")
                   and not f["why"].startswith("explore")][:1]
        return found

    assert first_of_the_two(lto=False)[0] == "inline_threshold"
    assert first_of_the_two(lto=True) == ("work/inline", "alwaysinline=1")


def test_a_function_too_costly_to_inline_into_itself_is_no_reason_to_inline_it() -> None:
    """bc's `_bc_rec_mul` calls itself, and clang says that call is "too costly" at its
    threshold: the agent proposed always inlining it (the baseline's binary, byte for
    byte) ahead of every loop decision.  A call of a function to itself is no evidence
    for inlining it; a call to it from another function is."""
    from autopass_build.evidence.unit import Remark
    from autopass_build.tuning.agents.rules import _decision_rules

    def too_costly(callee: str, caller: str) -> Remark:
        # as evidence/unit.py reads clang 19's remark
        return Remark("Missed", "inline", "TooCostly", caller, "lib/number.c:1053",
                      f"{callee} not inlined into {caller} because too costly to inline "
                      "(cost=625, threshold=625)", {"Cost": 625.0, "Threshold": 625.0})

    itself = too_costly("_bc_rec_mul", "_bc_rec_mul")
    assert _decision_rules("_bc_rec_mul/inline", [itself]) == []
    [(value, _, why)] = _decision_rules("_bc_rec_mul/inline",
                                        [itself, too_costly("_bc_rec_mul", "bc_multiply")])
    assert value == "alwaysinline=1" and "cost 625" in why
    # a callee whose name another's holds is not that one ("bc_sub" in "_bc_do_sub")
    assert _decision_rules("bc_sub/inline", [too_costly("_bc_do_sub", "bc_add")]) == []
