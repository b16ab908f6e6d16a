"""Every input boundary has one loader that returns a typed value or raises its one error
with a message naming the file: autopass.toml, the journal, the screening knowledge,
spool records, saved transcripts (the flags database: test_bad_input.py).  Hypothesis
feeds each arbitrary shapes; the commands that read them are run on a few too."""

from __future__ import annotations

import json
import math
import os
import subprocess

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import AUTOPASS

from autopass_build import config as cfg
from autopass_build.candidates import pgo
from autopass_build.core.names import METRICS
from autopass_build.evidence import hotspots
from autopass_build.store import spool_records
from autopass_build.store.index import Store
from autopass_build.tuning.agents.llm import AgentUnavailable, ReplayTransport
from autopass_build.tuning.journal import Journal, JournalError
from autopass_build.tuning.knowledge import Knowledge

FIXTURES = [HealthCheck.function_scoped_fixture]
SCALARS = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12)
JSON = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=4)
                    | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=16)
KEYS = st.sampled_from(["command", "clean", "root", "metric", "min_pairs", "max_pairs",
                        "strategy", "budget", "options", "env", "inputs", "mode", "timeout",
                        "backend", "transcript", "precision", "train", "screen", "bogus"])
SECTIONS = st.sampled_from(["build", "run", "check", "measure", "tune", "agent", "nope"])


def toml_value(value: object) -> str:
    """A TOML rendering of a JSON-ish value (strings and keys quoted as JSON)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return '""'
    if isinstance(value, float):
        return repr(value) if value == value and abs(value) != float("inf") else "nan"
    if isinstance(value, (int, str)):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    assert isinstance(value, dict)
    return "{" + ", ".join(f"{json.dumps(k)} = {toml_value(v)}" for k, v in value.items()) + "}"


TOML = st.dictionaries(SECTIONS, st.dictionaries(KEYS, JSON, max_size=5), max_size=4).map(
    lambda doc: "\n".join(f"[{s}]\n" + "\n".join(f"{k} = {toml_value(v)}" for k, v in t.items())
                          for s, t in doc.items()))


@settings(max_examples=400, deadline=None)
@given(TOML | st.text(max_size=200))
def test_config_parses_or_names_the_problem(text) -> None:
    try:
        config = cfg.parse(text, "autopass.toml", "/tmp")
    except cfg.ConfigError as error:
        assert str(error)
        return
    assert isinstance(config.build.command, tuple) and isinstance(config.run.command, tuple)
    assert config.measure.metric in METRICS


@settings(max_examples=150, deadline=None, suppress_health_check=FIXTURES)
@given(JSON, st.lists(JSON, max_size=4), st.booleans())
def test_a_journal_opens_or_says_it_is_damaged(tmp_path, header, lines, torn) -> None:
    folder = tmp_path / "run"
    folder.mkdir(exist_ok=True)
    (folder / "run.json").write_text(json.dumps(header))
    text = "".join(json.dumps(line) + "\n" for line in lines) + ('{"n": 1, "pha' if torn else "")
    (folder / "journal.jsonl").write_text(text)
    try:
        journal = Journal.open(str(folder))
    except JournalError as error:
        assert str(folder) in str(error)
        return
    assert all(isinstance(e.n, int) for e in journal.entries)


@pytest.mark.parametrize("latest", [b"\xff\xfe", b"", b"../../etc", b"gone-run", None,
                                    b"older"])
def test_the_latest_run_is_found_whatever_the_latest_file_holds(tmp_path, latest) -> None:
    """`runs/latest` names the run `report` and `tune --resume` take.  Not text (a
    UnicodeDecodeError traceback before), missing, or naming no run of this store: the
    newest run, by the start time its name begins with; no run at all: one line."""
    runs = tmp_path / "runs"
    runs.mkdir()
    with pytest.raises(JournalError, match="no tuning run in this store yet"):
        Journal.latest(str(tmp_path))
    for name in ("20261201-100000-ga-seed1", "20261202-090000-agent-seed0"):
        (runs / name).mkdir()
        (runs / name / "run.json").write_text(json.dumps(
            {"journal_version": 2, "strategy": "ga", "seed": 1, "budget": 2, "options": {},
             "sources": [], "space": ""}))
        (runs / name / "journal.jsonl").write_text("")
    (runs / "older").symlink_to(runs / "20261201-100000-ga-seed1")
    if latest is not None:
        (runs / "latest").write_bytes(latest)
    expected = "older" if latest == b"older" else "20261202-090000-agent-seed0"
    assert os.path.basename(Journal.latest(str(tmp_path)).folder) == expected


@settings(max_examples=150, deadline=None, suppress_health_check=FIXTURES)
@given(JSON)
def test_screening_knowledge_loads_or_is_set_aside(tmp_path, data) -> None:
    path = tmp_path / "knowledge.json"
    path.write_text(json.dumps(data))
    knowledge = Knowledge.load(str(path))
    assert all(isinstance(s.features, dict) and math.isfinite(s.target)
               for s in knowledge.samples)
    assert knowledge.note == "" or "set aside" in knowledge.note


RECORD = st.fixed_dictionaries({"type": st.sampled_from(["unit", "skip", "link", "x"])},
                               optional={k: JSON for k in ("id", "source", "cwd", "argv",
                                                           "output", "inputs", "archives")})


@settings(max_examples=300, deadline=None)
@given(JSON | RECORD)
def test_a_spool_record_becomes_statements_or_its_one_error(record) -> None:
    try:
        statements = spool_records.statements(record)
    except spool_records.RecordError:
        return
    assert statements and all(isinstance(sql, str) for sql, _ in statements)


@settings(max_examples=40, deadline=None, suppress_health_check=FIXTURES)
@given(st.lists(JSON | RECORD, min_size=1, max_size=3))
def test_a_store_with_bad_spool_records_still_reads(tmp_path, records) -> None:
    store = Store.create(str(tmp_path / ".autopass"))
    for n, record in enumerate(records):
        (tmp_path / ".autopass" / "spool" / f"{n:04d}-planted.json").write_text(
            json.dumps(record))
    store = Store.open_existing(str(tmp_path / ".autopass"))
    assert isinstance(store.units(), list) and isinstance(store.links(), list)


@settings(max_examples=150, deadline=None, suppress_health_check=FIXTURES)
@given(st.lists(JSON, max_size=4))
def test_a_saved_transcript_replays_or_hands_over(tmp_path, lines) -> None:
    path = tmp_path / "transcript.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    try:
        transport = ReplayTransport(str(path))
        while True:
            reply = transport.complete([], None)
            assert isinstance(reply.content, str) and isinstance(reply.tool_calls, list)
    except AgentUnavailable as error:
        assert str(error)


@settings(max_examples=150, deadline=None, suppress_health_check=FIXTURES)
@given(JSON | st.fixed_dictionaries({"target": JSON, "method": JSON, "functions": JSON}))
def test_stored_profiles_load_or_are_not_trusted(tmp_path, data) -> None:
    """The hot-spot profile and the PGO profile's record in the store: damaged, None."""
    (tmp_path / "profile.json").write_text(json.dumps(data))
    (tmp_path / "pgo.json").write_text(json.dumps(data))
    found = hotspots.load(str(tmp_path))
    assert found is None or isinstance(found.unit_shares(), dict)
    assert pgo.load(str(tmp_path)) is None or isinstance(data, dict)


@pytest.mark.parametrize("content", ["[run]\ncommand = [1, 2]\n", "[tune]\nbudget = -1\n",
                                     "[[run]]\n", "\x00\x01", "[measure]\nmetric = 3\n"])
def test_commands_that_read_the_config_say_what_is_wrong(tmp_path, content) -> None:
    (tmp_path / "autopass.toml").write_bytes(content.encode())
    (tmp_path / "autopass.toml").chmod(0o644)
    for command in (["record"], ["tune", "--list-strategies"], ["verify"]):
        done = subprocess.run([AUTOPASS, *command], cwd=tmp_path, capture_output=True,
                              text=True)
        assert "Traceback" not in done.stderr
        if command[0] != "tune":
            assert done.returncode == 2 and done.stderr.startswith("autopass: error: ")
