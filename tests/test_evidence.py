"""Evidence from the compiler, on purpose-written code compiled through the wrapper."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest
from support import AUTOPASS, AUTOPASS_CC, REPO, run

from autopass_build.evidence.unit import Evidence, parse_remarks


@pytest.fixture
def recorded(rec):
    for name, opt in (("vectorize.c", "-O3"), ("inline_costly.c", "-O2")):
        shutil.copy(REPO / "tests" / "data" / name, rec.root / name)
        assert run([AUTOPASS_CC, opt, "-g", "-c", name], rec.root, rec.env).returncode == 0
    store = rec.store()
    return store, {u.source_rel: u for u in store.units()}


def missed(evidence, function, pass_name):
    return evidence.remarks.get(function, {}).get(pass_name, {}).get("missed", [])


def passed(evidence, function, pass_name):
    return evidence.remarks.get(function, {}).get(pass_name, {}).get("passed", [])


def test_vectorized_loop_reports_its_width_and_misses_without_vectorizer(recorded):
    store, units = recorded
    evidence = Evidence(store)
    on = evidence.unit_evidence(units["vectorize.c"])
    [vectorized] = [r for r in passed(on, "saxpy", "loop-vectorize") if r["name"] == "Vectorized"]
    assert vectorized["numbers"]["VectorizationFactor"] >= 2
    assert vectorized["at"] == "vectorize.c:3"
    off = evidence.unit_evidence(units["vectorize.c"], ("-fno-vectorize",))
    assert not passed(off, "saxpy", "loop-vectorize")
    assert any("not vectorized" in r["message"] for r in missed(off, "saxpy", "loop-vectorize"))
    assert on.sizes["saxpy"] != off.sizes["saxpy"]


def test_costly_call_reports_cost_and_threshold_and_a_higher_threshold_inlines_it(recorded):
    store, units = recorded
    evidence = Evidence(store)
    found = evidence.unit_evidence(units["inline_costly.c"])
    costly = [r for r in missed(found, "use1", "inline") if r["name"] == "TooCostly"]
    assert costly, found.remarks.get("use1")
    cost, threshold = costly[0]["numbers"]["Cost"], costly[0]["numbers"]["Threshold"]
    assert cost >= threshold > 0
    raised = ("-mllvm", f"-inline-threshold={int(cost) + 100}")
    diff = evidence.diff(units["inline_costly.c"], (), raised)
    gained = diff["gained"]["use1"]["inline"]["passed"]
    assert any("heavy" in r["message"] and "inlined into" in r["message"] for r in gained)
    assert any(r["name"] == "TooCostly" for r in diff["lost"]["use1"]["inline"]["missed"])
    assert diff["size_changes"]["use1"]["b"] > diff["size_changes"]["use1"]["a"]


def test_function_ir_before_and_after_and_the_pipeline(recorded):
    store, units = recorded
    evidence = Evidence(store)
    ir = evidence.function_ir(units["vectorize.c"], "saxpy")
    assert ir["before"].startswith("define") and "<4 x float>" not in ir["before"]
    assert "x float>" in ir["after"]  # vector types after the vectorizer
    assert "loop-vectorize" in evidence.pipeline(units["vectorize.c"])


def test_cli_evidence_and_diff(recorded, rec):
    out = subprocess.run([AUTOPASS, "evidence", "inline_costly.c"], cwd=rec.root,
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "too costly to inline" in out.stdout and "Cost=" in out.stdout
    data = json.loads(subprocess.run([AUTOPASS, "diff", "vectorize.c", "--b=-fno-vectorize",
                                      "--json"], cwd=rec.root, capture_output=True,
                                     check=True).stdout)
    assert data["lost"]["saxpy"]["loop-vectorize"]["passed"]
    bad = subprocess.run([AUTOPASS, "evidence", "vectorize.c", "--flags=-fplugin=x.so"],
                         cwd=rec.root, capture_output=True, text=True)
    assert bad.returncode == 2 and "rejected" in bad.stderr


def test_remark_parser_reads_llvm_yaml():
    text = """--- !Missed
Pass:            inline
Name:            TooCostly
DebugLoc:        { File: a.c, Line: 14, Column: 26 }
Function:        use1
Args:
  - Callee:          heavy
  - String:          ' not inlined into '
  - Caller:          use1
  - String:          ' because too costly to inline (cost='
  - Cost:            '310'
  - String:          ', threshold='
  - Threshold:       '225'
  - String:          ')'
...
"""
    [remark] = parse_remarks(text)
    assert (remark.kind, remark.pass_name, remark.function, remark.location) == (
        "Missed", "inline", "use1", "a.c:14")
    assert remark.numbers == {"Cost": 310.0, "Threshold": 225.0}
    assert remark.message.startswith("heavy not inlined into use1")
