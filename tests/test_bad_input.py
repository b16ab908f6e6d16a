"""Bad input, round two: what an adversarial user tried, each case reproduced.  Never a
traceback, never a changed build, never a silent partial apply (docs/RELIABILITY.md
C1-C6, F11, S1).  The flags database has one loader (core/flags_db.py); hypothesis feeds it, and the
commands that read it, arbitrary JSON."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import AUTOPASS, TUNE_MINI, recorded_tune_mini

from autopass_build.capture.apply import applier
from autopass_build.core import flags_db, toolchain
from autopass_build.core.apply_terms import ApplyPolicy
from autopass_build.core.files import hash_file

CONFIG = '[run]\ncommand = ["{exe}", "20"]\n[measure]\nmetric = "instructions"\nlayout_check = false\n' \
         'min_pairs = 2\nmax_pairs = 2\n[tune]\nstages = []\n'
OBJECTS = ("hot.o", "warm.o", "main.o")


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    """tune-mini recorded, with the objects of its plain build kept for comparison."""
    root = recorded_tune_mini(tmp_path_factory.mktemp("bad") / "mini", CONFIG, profile=False)
    return root


def plain_objects(root: Path) -> dict[str, bytes]:
    """The objects of a plain clang-19 build (apply mode's masquerade compiles with it)."""
    _make(root, ["make", "-s", f"CC={toolchain.find_tool('clang')}"])
    return {o: (root / o).read_bytes() for o in OBJECTS}


def _make(root: Path, argv: list[str]) -> subprocess.CompletedProcess:
    subprocess.run(["make", "-s", "clean"], cwd=root, check=True, capture_output=True)
    return subprocess.run(argv, cwd=root, capture_output=True, text=True)


def write_db(root: Path, data: object, raw: str | None = None) -> Path:
    path = root / "autopass.flags.json"
    path.write_text(raw if raw is not None else json.dumps(data))
    path.chmod(0o644)
    return path


def valid(root: Path, flags: list[str]) -> dict:
    return {"schema": 1, "toolchain": {}, "entries": {"hot.c": {
        "flags": flags, "source_hash": hash_file(str(root / "hot.c")), "why": "test",
        "gain": {"metric": "cpu", "ratio": 0.9, "low": 0.8, "high": 0.95, "pairs": 5}}}}


def apply_build(root: Path) -> subprocess.CompletedProcess:
    return _make(root, [AUTOPASS, "apply", "--", "make", "-s"])


def no_traceback(done: subprocess.CompletedProcess) -> None:
    assert "Traceback" not in done.stdout + done.stderr, done.stderr


# -- 1: a huge allowlisted entry, a huge rejected token -----------------------------------
def test_a_huge_entry_is_refused_by_its_limit_and_the_build_is_plain(project) -> None:
    plain = plain_objects(project)
    write_db(project, valid(project, ["-O3"] * 180_000))
    done = apply_build(project)
    no_traceback(done)
    assert done.returncode == 0
    assert f"more than the {flags_db.MAX_FLAGS} an entry may hold" in done.stderr
    assert {o: (project / o).read_bytes() for o in OBJECTS} == plain
    check = subprocess.run([AUTOPASS, "db", "check"], cwd=project, capture_output=True,
                           text=True)
    no_traceback(check)
    assert check.returncode == 1 and "0/1 entries apply" in check.stdout


def test_a_huge_rejected_token_is_not_echoed_whole(project) -> None:
    write_db(project, valid(project, ["-f" + "x" * 1_000_000]))
    done = apply_build(project)
    no_traceback(done)
    assert done.returncode == 0
    assert all(len(line) < 1000 for line in done.stderr.splitlines()), "a warning echoed it"
    assert f"longer than {flags_db.MAX_TOKEN} characters" in done.stderr


# -- 2: duplicate keys ------------------------------------------------------------------
@pytest.mark.parametrize("raw", [
    '{"schema": 1, "schema": 1, "entries": {}}',
    '{"schema": 1, "entries": {"hot.c": {"flags": ["-O2"], "source_hash": "x"}, '
    '"hot.c": {"flags": ["-O3"], "source_hash": "y"}}}',
])
def test_duplicate_keys_refuse_the_database(project, raw) -> None:
    plain = plain_objects(project)
    write_db(project, None, raw)
    done = apply_build(project)
    no_traceback(done)
    assert done.returncode == 0 and "appears twice" in done.stderr
    assert {o: (project / o).read_bytes() for o in OBJECTS} == plain
    shown = subprocess.run([AUTOPASS, "db", "show"], cwd=project, capture_output=True,
                           text=True)
    assert shown.returncode == 2 and "appears twice" in shown.stderr


# -- 3: databases that parse but are malformed -------------------------------------------
MALFORMED = {
    "deep nesting": "[" * 100_000 + "]" * 100_000,
    "toolchain a string": '{"schema": 1, "toolchain": "clang", "entries": {}}',
    "entries a list": '{"schema": 1, "entries": []}',
    "profile a number": '{"schema": 1, "profile": 3, "entries": {}}',
}
MALFORMED_ENTRY = {
    "flags a number": {"flags": 3, "source_hash": "x"},
    "flags null": {"flags": None, "source_hash": "x"},
    "an entry that is a number": 7,
    "gain null": {"flags": ["-O2"], "source_hash": "x", "gain": None},
    "gain a string": {"flags": ["-O2"], "source_hash": "x", "gain": "fast"},
    "a rejected flag": {"flags": ["-fplugin=evil.so"], "source_hash": "x"},
    "a huge number": {"flags": ["-O2"], "source_hash": "x",
                      "gain": {"ratio": 10 ** 400, "low": 1, "high": 1, "pairs": 1}},
}


@pytest.mark.parametrize("action", ["show", "check", "prune"])
@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_db_commands_refuse_a_malformed_database_in_one_line(project, case, action) -> None:
    path = write_db(project, None, MALFORMED[case])
    before = path.read_bytes()
    done = subprocess.run([AUTOPASS, "db", action], cwd=project, capture_output=True,
                          text=True)
    no_traceback(done)
    assert done.returncode == 2 and done.stderr.startswith("autopass: error: ")
    assert len(done.stderr.strip().splitlines()) == 1
    assert path.read_bytes() == before            # nothing the user had is lost


@pytest.mark.parametrize("case", sorted(MALFORMED_ENTRY))
def test_a_malformed_entry_is_listed_by_check_and_dropped_by_prune(project, case) -> None:
    data = valid(project, ["-O2"])
    data["entries"]["warm.c"] = MALFORMED_ENTRY[case]
    write_db(project, data)
    for action in ("show", "check"):
        done = subprocess.run([AUTOPASS, "db", action], cwd=project, capture_output=True,
                              text=True)
        no_traceback(done)
    assert "warm.c" in done.stdout and done.returncode == 1
    pruned = subprocess.run([AUTOPASS, "db", "prune"], cwd=project, capture_output=True,
                            text=True)
    no_traceback(pruned)
    assert pruned.returncode == 0 and "pruned 1 entries; 1 left" in pruned.stdout
    assert set(flags_db.load(str(project / "autopass.flags.json")).entries) == {"hot.c"}


def test_db_diff_of_malformed_databases_is_one_line(project, tmp_path) -> None:
    good = write_db(project, valid(project, ["-O2"]))
    bad = tmp_path / "bad.json"
    bad.write_text(MALFORMED["deep nesting"])
    done = subprocess.run([AUTOPASS, "db", "diff", str(good), str(bad)], cwd=project,
                          capture_output=True, text=True)
    no_traceback(done)
    assert done.returncode == 2 and "nested too deep" in done.stderr


# -- 4, 5: paths that cannot be used ------------------------------------------------------
def test_record_into_a_store_that_cannot_be_made_is_one_line(tmp_path) -> None:
    (tmp_path / "afile").write_text("x")
    for args in (["--store", "afile"], ["--store", "/proc/autopass-store"],
                 ["--root", "afile"]):
        done = subprocess.run([AUTOPASS, "record", *args, "--", "touch", "built"],
                              cwd=tmp_path, capture_output=True, text=True)
        no_traceback(done)
        assert done.returncode == 2 and done.stderr.startswith("autopass: error: ")
        assert not (tmp_path / "built").exists()   # said before anything ran


def test_a_damaged_store_index_says_so_and_how_to_start_over(tmp_path) -> None:
    """A store.db overwritten with other bytes: every command that reads it says the
    index is damaged and to record again (it said "is the disk full or the folder
    read-only?", which sent the user looking at the wrong thing); `record` keeps the
    damaged file under another name and records into a new index."""
    store = tmp_path / ".autopass"
    store.mkdir()
    (store / "store.db").write_bytes(bytes(range(256)) * 8)
    (tmp_path / "autopass.toml").write_text('[run]\ncommand = ["{exe}"]\n')
    for command in (["units"], ["targets"], ["try", "--flags", "a.c=-O2"]):
        done = subprocess.run([AUTOPASS, *command], cwd=tmp_path, capture_output=True,
                              text=True)
        no_traceback(done)
        assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
        assert "store.db is damaged (file is not a database): record the build again" \
            in done.stderr
    built = subprocess.run([AUTOPASS, "record", "--", "touch", "built"], cwd=tmp_path,
                           capture_output=True, text=True)
    no_traceback(built)
    assert built.returncode == 0 and (tmp_path / "built").exists(), built.stderr
    aside = [p.name for p in store.iterdir() if p.name.startswith("store.db.damaged-")]
    assert len(aside) == 1 and (store / aside[0]).read_bytes() == bytes(range(256)) * 8
    assert f"kept as {store / aside[0]}, and this build is recorded into a new index" \
        in built.stderr
    units = subprocess.run([AUTOPASS, "units"], cwd=tmp_path, capture_output=True, text=True)
    assert units.returncode == 0 and "no units recorded yet" in units.stdout + units.stderr


def test_report_html_into_a_missing_folder_is_one_line(tmp_path) -> None:
    root = recorded_tune_mini(tmp_path / "mini", CONFIG)
    tuned = subprocess.run([AUTOPASS, "tune", "--strategy", "random", "--budget", "1"],
                           cwd=root, capture_output=True, text=True)
    assert tuned.returncode == 0, tuned.stderr
    done = subprocess.run([AUTOPASS, "report", "--html", "nodir/x.html"], cwd=root,
                          capture_output=True, text=True)
    no_traceback(done)
    assert done.returncode == 2 and "cannot write nodir/x.html" in done.stderr


# -- the one loader, fed anything ---------------------------------------------------------
JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats()
                    | st.text(max_size=20),
                    lambda inner: st.lists(inner, max_size=4)
                    | st.dictionaries(st.text(max_size=10), inner, max_size=4), max_leaves=20)
DB_SHAPED = st.fixed_dictionaries(
    {"schema": st.sampled_from([1, 1, 1, 2, "1", None]),
     "entries": st.dictionaries(st.sampled_from(["hot.c", "warm.c", "x/../y.c"]), JSON
                                | st.fixed_dictionaries({"flags": JSON, "source_hash": JSON,
                                                         "gain": JSON}), max_size=3)},
    optional={"toolchain": JSON, "cpu": JSON, "profile": JSON})


@settings(max_examples=300, deadline=None)
@given(st.one_of(JSON, DB_SHAPED))
def test_the_loader_returns_a_database_or_its_one_error(data) -> None:
    try:
        db = flags_db.from_json(data, "x.json")
    except flags_db.FlagsDbError as error:
        assert str(error).startswith("x.json")
        return
    for entry in db.entries.values():
        if not entry.problem:
            assert len(entry.flags) <= flags_db.MAX_FLAGS
            assert all(isinstance(t, str) for t in entry.flags)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.one_of(JSON, DB_SHAPED))
def test_apply_decisions_from_any_database_never_raise(tmp_path, data) -> None:
    path = tmp_path / "autopass.flags.json"
    path.write_text(json.dumps(data))
    path.chmod(0o644)
    db, why = applier.load(str(path))
    if db is None:
        assert why
        return
    source = str(TUNE_MINI / "hot.c")
    for policy in ApplyPolicy:
        decision = applier.decide(db, source, str(TUNE_MINI), "clang 19", policy)
        assert decision.flags == () or decision.warning == ""
        assert len(decision.warning) < 2000


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(DB_SHAPED)
def test_db_show_of_any_database_is_never_a_traceback(tmp_path, data) -> None:
    path = tmp_path / "db.json"
    path.write_text(json.dumps(data))
    path.chmod(0o644)
    done = subprocess.run([AUTOPASS, "db", "show", "--db", str(path)], capture_output=True,
                          text=True, cwd=tmp_path, env={**os.environ, "AUTOPASS_CC": "/bin/false"})
    no_traceback(done)
    assert done.returncode in (0, 2)


# -- apply mode while the database changes under it ---------------------------------------
def test_concurrent_apply_builds_see_one_database_or_none(project, tmp_path) -> None:
    """Two apply builds of copies of one tree at once, sharing one database that another
    process rewrites (atomically, and in place a few bytes at a time) and whose folder it
    deletes: every build passes, and every object is the plain one or one database's."""
    import shutil
    import threading

    shared = tmp_path / "shared"
    shared.mkdir()
    db_file = shared / "autopass.flags.json"
    versions = [json.dumps(valid(project, flags)) for flags in (["-O3"], ["-O2"])]
    trees = []
    for name in ("a", "b"):
        tree = tmp_path / name
        shutil.copytree(project, tree, ignore=shutil.ignore_patterns(".autopass", "*.o"))
        trees.append(tree)
    expected = {"plain": plain_objects(trees[0])["hot.o"]}
    for label, text in zip(("-O3", "-O2"), versions):
        db_file.write_text(text)
        done = _make(trees[0], [AUTOPASS, "apply", "--db", str(db_file), "--root",
                                str(trees[0]), "--", "make", "-s"])
        assert done.returncode == 0, done.stderr
        expected[label] = (trees[0] / "hot.o").read_bytes()
    assert len(set(expected.values())) == 3

    stop = threading.Event()

    def rewrite() -> None:
        n = 0
        while not stop.is_set():
            text = versions[n % 2]
            n += 1
            try:
                if n % 5 == 0:                       # the folder disappears for a while
                    shutil.rmtree(shared, ignore_errors=True)
                    stop.wait(0.05)
                    shared.mkdir(exist_ok=True)
                elif n % 2:                          # atomically
                    tmp = shared / "db.tmp"
                    tmp.write_text(text)
                    os.replace(tmp, db_file)
                else:                                # in place, a few bytes at a time
                    with open(db_file, "w") as handle:
                        for i in range(0, len(text), 64):
                            handle.write(text[i:i + 64])
                            handle.flush()
                            stop.wait(0.001)
            except OSError:
                pass

    writer = threading.Thread(target=rewrite)
    writer.start()
    try:
        for _ in range(4):
            builds = [subprocess.Popen(
                ["sh", "-c", f"make -s clean && {AUTOPASS} apply --db {db_file} --root "
                             f"{tree} -- make -s"], cwd=tree, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, text=True) for tree in trees]
            for build, tree in zip(builds, trees):
                out, err = build.communicate(timeout=300)
                assert build.returncode == 0, err
                assert "Traceback" not in err
                assert (tree / "hot.o").read_bytes() in expected.values()
    finally:
        stop.set()
        writer.join()


# -- every path option of every command, given a path it cannot use -----------------------
BAD_PATHS = {"a file where a folder belongs": "afile", "missing": "nodir/x",
             "inside a file": "afile/x", "a folder where a file belongs": "adir",
             "not writable": "/proc/autopass-x"}
STORE_COMMANDS = [["units"], ["targets"], ["replay", "--check"], ["try", "--flags", "hot.c=-O2"],
                  ["profile"], ["evidence", "hot.c"], ["diff", "hot.c"], ["pgo"],
                  ["tune", "--budget", "1"], ["report"], ["verify"]]
CONFIG_COMMANDS = [["try", "--flags", "hot.c=-O2"], ["profile"], ["pgo"],
                   ["tune", "--budget", "1"], ["verify"], ["record"]]


def _path_cases() -> list[tuple[list[str], str]]:
    cases = []
    for command in STORE_COMMANDS:
        cases += [(command + ["--store", p], k) for k, p in BAD_PATHS.items()
                  if k != "a folder where a file belongs"]
    for command in CONFIG_COMMANDS:
        cases += [(command + ["--config", p], k) for k, p in BAD_PATHS.items()
                  if k != "not writable"]
    cases += [(["tune", "--budget", "1", "--flags-db", p], k) for k, p in BAD_PATHS.items()]
    cases += [(["report", "--html", p], k) for k, p in BAD_PATHS.items()
              if k != "a file where a folder belongs"]        # a file is what --html writes
    cases += [(["db", action, "--db", p], k) for action in ("show", "check", "prune")
              for k, p in BAD_PATHS.items()]
    cases += [(["db", "diff", "adir", p], k) for k, p in BAD_PATHS.items()]
    cases += [(["record", "--store", p, "--", "true"], k) for k, p in BAD_PATHS.items()
              if k not in ("a folder where a file belongs", "missing")]   # record makes it
    cases += [([command, "--root", p, "--", "true"], k) for command in ("record", "apply")
              for k, p in BAD_PATHS.items() if k != "a folder where a file belongs"]
    cases += [(["apply", "--db", p, "--", "true"], k) for k, p in BAD_PATHS.items()]
    return cases


@pytest.fixture(scope="module")
def tuned(tmp_path_factory) -> Path:
    """tune-mini recorded, profiled and tuned once (so report and db have something)."""
    root = recorded_tune_mini(tmp_path_factory.mktemp("paths") / "mini", CONFIG)
    done = subprocess.run([AUTOPASS, "tune", "--strategy", "random", "--budget", "1"],
                          cwd=root, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    (root / "afile").write_text("x = 1\n")
    (root / "adir").mkdir()
    return root


@pytest.mark.parametrize("args, kind", _path_cases(),
                         ids=lambda v: " ".join(v) if isinstance(v, list) else v)
def test_a_path_option_that_cannot_be_used_is_one_line(tuned, args, kind) -> None:
    done = subprocess.run([AUTOPASS, *args], cwd=tuned, capture_output=True, text=True,
                          timeout=120)
    no_traceback(done)
    said = [line for line in done.stderr.splitlines() if line.startswith("autopass: ")]
    if done.returncode == 0:       # apply mode: one warning, then the plain build
        assert args[0] == "apply" and len(said) == 1 and "warning" in said[0], done.stderr
    else:
        errors = [line for line in said if line.startswith("autopass: error: ")]
        assert len(errors) == 1 or done.stderr.startswith("usage:"), done.stderr


@pytest.mark.parametrize("option", ["--budget", "--max-units"])
def test_a_budget_or_unit_count_below_one_is_one_line(project, option) -> None:
    """A tune of no evaluations (or no units) ran and wrote nothing without a word."""
    done = subprocess.run([AUTOPASS, "tune", option, "-3"], cwd=project, capture_output=True,
                          text=True)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    key = option[2:].replace("-", "_")
    assert done.stderr.strip() == (f"autopass: error: {option}: [tune].{key} = -3 must be "
                                   "at least 1")


def test_replay_check_of_a_store_with_no_units_says_so(tmp_path) -> None:
    """It printed "0/0 units reproduce their recorded object from IR (100.0%)"."""
    subprocess.run([AUTOPASS, "record", "--", "true"], cwd=tmp_path, capture_output=True)
    done = subprocess.run([AUTOPASS, "replay", "--check"], cwd=tmp_path, capture_output=True,
                          text=True)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip() == ("autopass: error: no units recorded yet: run `autopass "
                                   "record -- <build command>`")


@pytest.mark.parametrize("args", [["profile", "--limit", "-1"], ["evidence", "x.c", "--limit", "0"],
                                  ["profile", "--limit", "many"]])
def test_a_row_limit_below_one_is_refused(project, args) -> None:
    """`profile --limit -1` printed every row but the last (a Python slice)."""
    done = subprocess.run([AUTOPASS, *args], cwd=project, capture_output=True, text=True)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "argument --limit: " in done.stderr.splitlines()[-1], done.stderr


def test_a_benchmark_whose_output_varies_is_one_line_not_all_wrong_output(project, tmp_path):
    """C9: the benchmark prints something that changes every run (here the clock): every
    candidate's output would differ and tune would reject all of them as WRONG_OUTPUT
    without saying why.  The baseline, run again, shows it: one line naming the fix."""
    line = _last_line_of_try_with(project, tmp_path, "{exe} 20; date +%N")
    assert line.startswith("autopass: error: the benchmark's output changes from run to run")
    assert '[check] mode = "exit-code"' in line


def test_a_timing_line_is_named_and_then_ignored(project, tmp_path):
    """C9: glpsol prints "Time used:   1.2 secs" after its answer.  The error suggests
    the [check].ignore pattern for that line; with it, only that line is left out."""
    shell = "{exe} 20; echo \"Time used: $(date +%N) secs\"; echo done"
    line = _last_line_of_try_with(project, tmp_path, shell)
    assert 'set [check] ignore = ["^Time used:"] to skip that line' in line, line
    config = tmp_path / "ignored.toml"
    config.write_text(f'[run]\ncommand = ["sh", "-c", {json.dumps(shell)}]\n'
                      '[check]\nignore = ["^Time used:"]\n'
                      '[measure]\nmetric = "cpu"\nmin_pairs = 2\nmax_pairs = 2\n')
    done = subprocess.run([AUTOPASS, "try", "--config", str(config), "--flags", "hot.c=-O2"],
                          cwd=project, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "WRONG_OUTPUT" not in done.stdout + done.stderr
    # The rest of stdout is still compared: a result line that changes is caught.
    wrong = shell.replace("echo done", "date +%N")
    line = _last_line_of_try_with(project, tmp_path, wrong, "[check]\nignore = [\"^Time\"]\n")
    assert "output changes from run to run" in line and "stdout line 3" in line, line


def _last_line_of_try_with(project: Path, tmp_path: Path, shell_command: str,
                           more: str = "") -> str:
    """`autopass try` with `sh -c shell_command` as the benchmark (and the config lines
    `more`): it must stop (status 2, no traceback); its last line of stderr."""
    config = tmp_path / "varies.toml"
    config.write_text(f'[run]\ncommand = ["sh", "-c", {json.dumps(shell_command)}]\n'
                      '[measure]\nmetric = "cpu"\nmin_pairs = 2\nmax_pairs = 2\n' + more)
    done = subprocess.run([AUTOPASS, "try", "--config", str(config), "--flags", "hot.c=-O2"],
                          cwd=project, capture_output=True, text=True)
    no_traceback(done)
    assert done.returncode == 2, done.stdout + done.stderr
    return done.stderr.strip().splitlines()[-1]


def test_a_binary_output_that_varies_is_told_by_byte_not_by_line(project, tmp_path):
    """C9 with an encoder's stream (libvorbis's encoder_example seeds its Ogg serial number
    with the clock): the message quoted 'lines' of binary, cut mid-escape; it now names
    the first differing byte in hex."""
    line = _last_line_of_try_with(project, tmp_path, "{exe} 20; printf 'OggS\\0\\2'; date +%N")
    assert line.startswith("autopass: error: the benchmark's output changes from run to run")
    assert "(stdout (binary) differs first at byte " in line and "expected 3" in line, line


def test_a_quoted_line_cut_short_in_an_error_says_it_was_cut() -> None:
    """tinyxml2's timing line was cut inside its quote and read as the whole line."""
    from autopass_build.measuring.measure import _clipped

    said = "stdout line 603: expected 'Parsing dream.xml (Release): 726.900 milli-seconds'"
    assert _clipped(said) == said
    long = said + ", got '" + "Parsing dream.xml (Release): 928.903 milli-seconds" * 3 + "'"
    assert _clipped(long).endswith("...") and len(_clipped(long)) <= 163
