"""`autopass tune` on a tiny real program, measured in callgrind instructions (stable):
the journal, resume after kill -9 (F8), Ctrl-C/SIGTERM (F9), an unwritable store (F12),
and the flags database it writes."""

from __future__ import annotations

import json
import os
import random
import re
import resource
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, replace
from pathlib import Path

import psutil
import pytest
from support import AUTOPASS, TUNE_MINI, TUNE_MINI_MEASURED, recorded_tune_mini

from autopass_build.candidates.replay import Replayer
from autopass_build.core import decisions, flags_db, toolchain
from autopass_build.core import flags as flagset
from autopass_build.core.outcome import Outcome
from autopass_build.store.index import Store
from autopass_build.tuning.journal import Entry, Journal, JournalError, Phase, Timing
from autopass_build.tuning.settings import RunSettings

CONFIG = TUNE_MINI_MEASURED + """[tune]
stages = []          # per-file tuning alone (test_stages.py tunes the stages)
strategy = "ga"
budget = 8
seed = 4
max_units = 2
options = { population = 4 }
"""


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    return recorded_tune_mini(tmp_path_factory.mktemp("tune") / "mini", CONFIG)


def scratch_env(project: Path) -> dict[str, str]:
    """The environment of a tune in `project`, its temporary folders beside it: a run
    killed with SIGKILL cleans nothing up, and the kill -9 test must leave nothing in
    /tmp.  The straight run and the resumed one get the same environment, so callgrind
    counts the same instructions (they depend on the length of the binary's path)."""
    scratch = project.parent / "tmp"
    scratch.mkdir(exist_ok=True)
    # pytest names the running test in the environment, which the benchmark inherits:
    # its length moves the program's stack, and callgrind's count with it.
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"}
    return {**env, "TMPDIR": str(scratch)}


def tune(project: Path, *args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([AUTOPASS, "tune", *args], cwd=project, capture_output=True,
                          text=True, timeout=600, env=scratch_env(project), **kw)


def stable(journal: Journal) -> list[dict]:
    """The journal without what legitimately differs between two runs (timing)."""
    return [replace(e, timing=Timing()) for e in journal.entries]


@dataclass
class StraightRun:
    entries: list[Entry]          # the journal, timings left out (`stable`)
    db_text: str                  # the flags database it wrote
    progress: str                 # what it showed on standard error


@pytest.fixture(scope="module")
def straight_run(project: Path) -> StraightRun:
    done = tune(project)
    assert done.returncode == 0, done.stderr
    journal = Journal.latest(str(project / ".autopass"))
    return StraightRun(stable(journal), (project / "autopass.flags.json").read_text(),
                       done.stderr)


def test_tune_journals_every_evaluation_and_writes_the_winners(project, straight_run) -> None:
    entries, db_text = straight_run.entries, straight_run.db_text
    search = [e for e in entries if e.phase == "search"]
    measured = [e for e in search if not e.identical]
    assert len(measured) == 8                                # the budget counts these
    assert len({e.config for e in search}) == len(search)    # nothing measured twice
    assert [e.n for e in entries] == list(range(1, len(entries) + 1))
    assert all(e.outcome == "OK" and e.pairs == 2 for e in measured)
    # the rest compiled to the baseline's program byte for byte: no run, no budget
    assert all(e.ratio == 1.0 and e.timing.runs == 0 for e in search if e.identical)
    db = flags_db.load(str(project / "autopass.flags.json"))
    assert db.entries, "an 8-evaluation GA on this program finds a faster candidate"
    final = [e for e in entries if e.phase == "final"][-1]
    assert final.verdict == "faster" and final.ratio < 1
    settings = Journal.latest(str(project / ".autopass")).settings
    for source, entry in db.entries.items():
        assert source in settings.sources and not os.path.isabs(source)
        assert flagset.validate(entry.flags) and entry.gain.ratio < 1
        assert entry.gain.metric == "instructions" and entry.run
        assert "x [" in entry.why and "over the recorded build" in entry.why
    assert db_text == flags_db.to_json(db)              # stable, sorted formatting


def test_an_entrys_why_names_the_build_its_gain_is_against() -> None:
    """duktape's -O2 entry read "0.9487x of the recorded build": it was measured on PGO.
    Issue 62: a gain reads as a speedup (above 1 is faster), as everywhere a user reads."""
    from autopass_build.tuning.publish import why
    final = Entry(9, Phase.FINAL, "k", {"a.c": "-O2"}, Outcome.OK, "faster", 0.9487, 0.9189,
                  0.9816, 20)
    assert why("agent", final) == ("final re-measurement: speedup 1.0541x [1.0187, 1.0883] "
                                   "over the recorded build, 20 pairs")
    assert "1.0541x [1.0187, 1.0883] over the pgo+lto build" in why("agent", final, "pgo+lto")
    assert "over the PGO build" in why("agent", final, "PGO")


def test_progress_says_how_long_the_rest_of_the_search_takes(straight_run) -> None:
    """Each measured evaluation's line says about how long the rest will take, from the
    pace so far (none before the first evaluation has ended)."""
    lines = [line for line in straight_run.progress.splitlines() if "] " in line
             and line.startswith("tune: [")]
    assert len(lines) >= 8, straight_run.progress   # an identical candidate keeps its slot
    assert " left · " not in lines[0]
    assert all(re.search(r"· the rest about \d+ (s|min) · measuring ", line) for line in lines[1:]), \
        lines


def test_duration_text_reads_like_a_person_would_say_it() -> None:
    from autopass_build.core.durations import duration_text
    from autopass_build.tuning.clock import Pace
    assert [duration_text(s) for s in (0.2, 40, 89, 125, 5399, 5400, 9000)] == \
        ["1 s", "40 s", "1 min", "2 min", "90 min", "1.5 h", "2.5 h"]
    pace = Pace(started=time.monotonic() - 60, measured=2)     # 30 s an evaluation
    assert pace.time_left(4) == "the rest about 2 min · " and pace.time_left(0) == ""
    assert Pace().time_left(5) == ""                            # nothing measured yet


def test_resume_after_kill_9_gives_the_same_journal(project, straight_run) -> None:
    expected, expected_db = straight_run.entries, straight_run.db_text
    rng = random.Random(20261130)
    straight_id = Journal.latest(str(project / ".autopass")).run_id
    kills, finished = 0, None
    for attempt in range(30):
        args = ["--resume"] if attempt else []
        before = _entries(project, straight_id)
        process = subprocess.Popen([AUTOPASS, "tune", *args], cwd=project,
                                   env=scratch_env(project),
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        # Kill at a random moment after the run made progress (one more journal line),
        # so each attempt gets somewhere however slow the machine is.
        while process.poll() is None and _entries(project, straight_id) <= before:
            time.sleep(0.05)
        time.sleep(rng.uniform(0.0, 1.5))
        if process.poll() is not None:
            finished = process.wait()
            said = process.stderr.read().decode()
            # killed after the run had ended (its database written, then its end mark)
            # and before the process exited: the run is whole, and --resume says so
            if attempt and finished == 2 and "nothing to resume" in said:
                finished = 0
            assert finished == 0, said
            break
        family = psutil.Process(process.pid).children(recursive=True)
        process.send_signal(signal.SIGKILL)
        process.wait()
        for child in family:          # the benchmark runs in its own session
            try:
                child.kill()
            except psutil.NoSuchProcess:
                pass
        kills += 1
    assert finished == 0 and kills >= 1, f"{kills} kills, exit {finished}"
    journal = Journal.latest(str(project / ".autopass"))
    assert stable(journal) == expected
    assert (project / "autopass.flags.json").read_text().replace(
        journal.run_id, "RUN") == _without_run(expected_db)


def _entries(project: Path, other_than: str) -> int:
    """Journal lines of the latest run unless it is `other_than` (-1: no new run yet)."""
    try:
        journal = Journal.latest(str(project / ".autopass"))
    except JournalError:
        return -1
    return len(journal.entries) if journal.run_id != other_than else -1


def _without_run(db_text: str) -> str:
    data = json.loads(db_text)
    for entry in data["entries"].values():
        entry["run"] = "RUN"
    return json.dumps(data, indent=2, sort_keys=True) + "\n"


def test_sigterm_stops_children_and_says_how_to_resume(project) -> None:
    process = subprocess.Popen([AUTOPASS, "tune", "--budget", "40", "--seed", "9"],
                               cwd=project, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    journal_dir = project / ".autopass" / "runs"
    deadline = time.monotonic() + 120
    family: list[psutil.Process] = []
    while time.monotonic() < deadline:
        time.sleep(0.3)
        family = psutil.Process(process.pid).children(recursive=True)
        try:
            latest = Journal.latest(str(project / ".autopass"))
        except JournalError:      # the run has not written its journal yet
            continue
        if latest.settings.seed == 9 and latest.entries and family:
            break
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 130
    assert "autopass tune --resume" in err.decode()
    time.sleep(0.5)
    assert not [p for p in family if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    journal = Journal.latest(str(journal_dir.parent))
    assert journal.settings.seed == 9 and journal.entries   # nothing finished was lost


def test_a_full_disk_stops_resumably(project) -> None:
    """F12: no file may grow (RLIMIT_FSIZE, as on a full disk): the candidate's link
    fails, then its journal line cannot be written; the run stops with a message that
    says how to resume, and the journal keeps what it had."""
    done = tune(project, "--budget", "2", "--seed", "21")
    assert done.returncode == 0, done.stderr
    before = Journal.latest(str(project / ".autopass"))
    size = os.path.getsize(before.path)

    def no_growth() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))

    done = subprocess.run([AUTOPASS, "tune", "--resume", "--budget", "4"], cwd=project,
                          capture_output=True, text=True, timeout=300, preexec_fn=no_growth)
    assert done.returncode == 2, done.stderr
    assert "autopass tune --resume" in done.stderr and "Traceback" not in done.stderr
    assert Journal.open(before.folder).entries == before.entries


def test_resume_with_nothing_to_resume(tmp_path) -> None:
    shutil.copytree(TUNE_MINI, tmp_path / "p")
    (tmp_path / "p" / ".autopass").mkdir()
    done = tune(tmp_path / "p", "--resume")
    assert done.returncode == 2


def _entry(n: int, config: str) -> Entry:
    return Entry(n, Phase.SEARCH, config, {"a.c": "-O2"}, Outcome.OK, "same", 1.0, 0.98, 1.02, 2)


def test_journal_drops_a_torn_last_line_and_rejects_damage(tmp_path) -> None:
    journal = Journal.create(str(tmp_path), RunSettings(strategy="random", seed=0))
    journal.append(_entry(1, "a"))
    journal.append(_entry(2, "b"))
    with open(journal.path, "ab") as handle:
        handle.write(b'{"n": 3, "ke')           # kill -9 mid-write
    reader = Journal.latest(str(tmp_path))
    assert [e.n for e in reader.entries] == [1, 2]
    assert Path(journal.path).read_bytes().endswith(b'"ke')   # a reader changes nothing
    again = Journal.latest(str(tmp_path))
    again.take_over()
    with pytest.raises(JournalError, match="another autopass process"):
        Journal.latest(str(tmp_path)).take_over()
    again.append(_entry(3, "c"))
    assert [e.n for e in Journal.open(journal.folder).entries] == [1, 2, 3]
    text = Path(journal.path).read_text().splitlines()
    Path(journal.path).write_text("\n".join([text[0], "garbage", text[2]]) + "\n")
    with pytest.raises(JournalError, match="line 2 is damaged"):
        Journal.open(journal.folder)


# -- the loop's decisions, against recorded measurements (as kernel_tuner tests strategies
#    against a recorded cache): a timing metric, where one "faster" can be a fluke.
class RecordedMeasurements:
    """Answers evaluate() from a table: flags text -> the verdicts of successive looks."""

    def __init__(self, table: dict[str, list[tuple[str, float]]]):
        self.table = {k: list(v) for k, v in table.items()}
        self.asked: list[str] = []
        from types import SimpleNamespace
        self.units = [SimpleNamespace(id="u1", source_rel="a.c", source_hash="h", cwd="/p",
                                      compiler="/nonexistent/clang", opt_level="-O2",
                                      argv=["-O2", "-c", "a.c", "-o", "a.o"])]
        self.target = SimpleNamespace(output_rel="prog")

    def evaluate(self, by_unit, progress=None, measure=None, link_flags=(), post_link=None, attribute=None,
                 until=None):
        from autopass_build.candidates.evaluate import Evaluation
        from autopass_build.core.outcome import Outcome
        from autopass_build.measuring.measure import Comparison
        from autopass_build.measuring.stats import Estimate
        text = " ".join(by_unit.get("u1", ()))
        self.asked.append(text)
        verdict, ratio = self.table[text].pop(0) if len(self.table[text]) > 1 else self.table[text][0]
        if verdict == "crash":
            return Evaluation(Outcome.RUN_CRASH, None, detail="killed by signal 11")
        estimate = Estimate(ratio, ratio - 0.02, ratio + 0.02 if verdict != "faster" else 0.999,
                            20, 0.95)
        return Evaluation(Outcome.OK, Comparison(Outcome.OK, verdict, estimate, runs=40))


def scripted_tuner(tmp_path, table, budget, pgo_alone=None):
    """A tuner over recorded measurements; with `pgo_alone` (the verdicts of PGO alone
    against the recorded build), a PGO run with a stand-in profile."""
    from autopass_build import config as cfg
    from autopass_build.candidates.pgo import TrainedProfile
    from autopass_build.store.index import Store
    from autopass_build.tuning.space import Knob, Space
    from autopass_build.tuning.tuner import Tuner, TuneRequest

    class ScriptedTuner(Tuner):
        def _evaluator(self):
            if self.request.pgo:
                profile = tmp_path / "profile.profdata"
                profile.write_bytes(b"a stand-in profile")
                self.profile = TrainedProfile(str(profile), "hash", "prog", 1, "", "ir")
            return self.recorded

        def _plain_evaluator(self):
            return RecordedMeasurements({f"-fprofile-use={tmp_path}/profile.profdata":
                                         pgo_alone or []})

        def _hot_sources(self, evaluator, outsiders):
            return ["a.c"]

        def _space(self, evaluator):
            return Space((Knob("x", ((), ("-O3",), ("-O2",), ("-O1",)), "level"),))

    store = Store.create(str(tmp_path / ".autopass"))
    config = cfg.parse('[measure]\nmetric = "wall"\n', project_dir=str(tmp_path))
    tuner = ScriptedTuner(store, config, TuneRequest(strategy="greedy", budget=budget, stages=(),
                                                     flags_db=str(tmp_path / "db.json"),
                                                     pgo=pgo_alone is not None))
    tuner.recorded = RecordedMeasurements(table)
    return tuner


def test_a_fluke_faster_is_confirmed_before_anything_builds_on_it(tmp_path) -> None:
    table = {"-O3": [("faster", 0.90), ("same", 1.0)],       # a fluke: gone on a second look
             "-O2": [("faster", 0.95), ("faster", 0.96)],     # real
             "-O1": [("slower", 1.2)]}
    tuner = scripted_tuner(tmp_path, table, budget=3)
    result = tuner.run()
    phases = [(e.phase, e.flags.get("a.c")) for e in result.journal.entries]
    assert phases[:5] == [("search", "-O3"), ("confirm", "-O3"), ("search", "-O2"),
                          ("confirm", "-O2"), ("search", "-O1")]
    assert result.best.flags == {"a.c": "-O2"} and result.best.phase == "confirm"
    assert result.best.ratio == 0.96                    # the unselected second look
    assert result.winners and result.winners[0].flags == ("-O2",)


def test_a_final_measurement_that_fails_is_reported_not_a_traceback(tmp_path, capsys) -> None:
    """The final re-measurement crashes: nothing is written, and the summary and the
    report say what happened (a None ratio once raised TypeError in the summary)."""
    from autopass_build.cli.tune import _print_result
    from autopass_build.outputs.report import summarize, text

    table = {"-O3": [("same", 1.0)],
             "-O2": [("faster", 0.95), ("faster", 0.96), ("crash", 0.0)],
             "-O1": [("slower", 1.2)]}
    result = scripted_tuner(tmp_path, table, budget=3).run()
    assert result.final is not None and result.final.outcome == Outcome.RUN_CRASH
    assert result.winners == [] and result.flags_db is None
    _print_result(result, "wall")
    said = capsys.readouterr().out
    assert "final re-measurement: RUN_CRASH (killed by signal 11)" in said
    assert "nothing written" in said
    assert "no per-file flags written" in text(summarize(result.journal))


@pytest.mark.parametrize("pgo_alone, shipped", [("faster", True), ("same", False)])
def test_a_verified_pgo_stage_ships_when_no_flag_wins(tmp_path, capsys, pgo_alone, shipped):
    """No per-file flag holds up on top of PGO; PGO alone against the recorded build
    decides whether the database (the profile, no entries) is written."""
    from autopass_build.cli.tune import _print_result

    table = {"-O3": [("same", 1.0)], "-O2": [("same", 1.0)], "-O1": [("slower", 1.2)]}
    result = scripted_tuner(tmp_path, table, budget=3,
                            pgo_alone=[(pgo_alone, 0.94 if shipped else 1.0)]).run()
    assert result.winners == [] and result.best is None
    db_file = tmp_path / "db.json"
    assert (result.flags_db is not None) == shipped == db_file.exists()
    _print_result(result, "wall")
    said = capsys.readouterr().out
    if shipped:
        db = flags_db.load(str(db_file))
        assert db.entries == {} and db.profile and db.profile.path == "autopass.profdata"
        assert (tmp_path / "autopass.profdata").read_bytes() == b"a stand-in profile"
        assert "wrote the PGO profile" in said
    else:
        assert "nothing written" in said


def test_on_pgo_the_winners_are_also_measured_against_the_recorded_build(tmp_path):
    """Gains found on top of PGO are against PGO; the journal also says what PGO alone
    and PGO with the winners give over the plain build (phases pgo-alone, tuned-on-pgo)."""
    table = {"-O3": [("same", 1.0)], "-O2": [("faster", 0.95), ("faster", 0.96)],
             "-O1": [("slower", 1.2)]}
    use = f"-fprofile-use={tmp_path}/profile.profdata"
    tuner = scripted_tuner(tmp_path, table, budget=3, pgo_alone=[("faster", 0.93)])
    tuner._plain_evaluator = lambda: plain
    plain = RecordedMeasurements({use: [("faster", 0.93)], f"{use} -O2": [("faster", 0.89)]})
    result = tuner.run()
    assert result.winners and result.winners[0].flags == ("-O2",)
    versus = {e.phase: e.ratio for e in result.journal.entries
              if e.phase in (Phase.PGO_ALONE, Phase.TUNED_ON_PGO)}
    assert versus == {Phase.PGO_ALONE: 0.93, Phase.TUNED_ON_PGO: 0.89}
    assert plain.asked == [use, f"{use} -O2"]


def test_the_summary_counts_identical_candidates_apart_from_the_measured() -> None:
    """An identical candidate (the baseline's program, not run) is neither a measured
    "same" nor the lowest estimate: it once read "2 measured: 1 same, 1 unclear; the
    lowest estimate was #1, 1.0000x [1.0000, 1.0000]" with one candidate measured."""
    from autopass_build.outputs.report import verdict_words

    identical = Entry(1, Phase.SEARCH, "a", {"a.c": "-O2"}, Outcome.OK, "same", 1.0, 1.0,
                      1.0, 0)
    measured = Entry(2, Phase.SEARCH, "b", {"a.c": "-O1"}, Outcome.OK, "unclear", 1.005,
                     0.985, 1.03, 30)
    assert identical.identical and not measured.identical
    assert verdict_words([identical, measured]) == (
        "1 search candidate measured: 1 unclear; the lowest estimate was #2, "
        f"{measured.interval_text()} (1 more identical to the baseline, not measured)")
    assert verdict_words([identical]) == ("no search candidate was measured: 1 candidate "
                                          "identical to the baseline")
    stage = Entry(3, Phase.STAGE, "s", {}, Outcome.OK, "faster", 0.93, 0.87, 0.99, 30)
    confirm = Entry(4, Phase.STAGE_CONFIRM, "s", {}, Outcome.OK, "faster", 0.93, 0.88, 0.99, 30)
    # cmark, budget 6: two stages measured and confirmed, two kept for BOLT, none left
    assert verdict_words([stage, confirm]) == (
        "no search candidate was measured: the stages took the budget (2 stage evaluations"
        "); a larger --budget leaves some for per-file flags")
    # x264: a candidate read faster, fresh pairs did not agree, nothing was written
    faster = Entry(5, Phase.SEARCH, "f", {"me.c": "-O2"}, Outcome.OK, "faster", 0.988,
                   0.9775, 0.9996, 30)
    again = Entry(6, Phase.CONFIRM, "f", {"me.c": "-O2"}, Outcome.OK, "unclear", 0.9967,
                  0.9839, 1.011, 30)
    assert verdict_words([faster, again]).endswith(
        f"; 1 faster candidate not confirmed by fresh pairs (#5: {again.interval_text()})")


def test_report_text_and_html(project, straight_run, tmp_path) -> None:
    out = tmp_path / "report.html"
    done = subprocess.run([AUTOPASS, "report", "--all", "--html", str(out)], cwd=project,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "ga (seed 4), 8 evaluations" in done.stdout
    assert "final re-measurement" in done.stdout and "rejected: " in done.stdout
    page = out.read_text()
    runs = page.count("<h2>run ")
    assert runs >= 1 and "<table>" in page
    assert page.count("alt='what the run shipped'") == runs
    bad = subprocess.run([AUTOPASS, "report", "no-such-run"], cwd=project, capture_output=True,
                         text=True)
    assert bad.returncode == 2 and "runs are listed in" in bad.stderr


FAST_MATH_SUM = """#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 1000000;
    float *a = malloc(sizeof(float) * n), sum = 0.0f;
    for (int i = 0; i < n; i++) a[i] = (float)(i % 1000) * 0.001f + 1e-4f * (float)(i % 7);
    for (int i = 0; i < n; i++) sum += a[i];    /* -ffast-math: clang vectorizes the sum */
    printf("%.9g\\n", sum);
    return 0;
}
"""


FMA_LOOP = """#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 1000000;
    double x = 1.0, y = 1.0000001, z = 1e-9;
    for (long i = 0; i < n; i++)
        x = x * y + z;             /* with FMA: one rounding a step instead of two */
    printf("%.17g\\n", x);
    return 0;
}
"""


@pytest.mark.skipif("fma" not in Path("/proc/cpuinfo").read_text().split(),
                    reason="this CPU has no FMA: -march=native leaves x*y+z alone")
def test_wrong_output_by_rounding_names_the_tolerance_that_accepts_it(tmp_path) -> None:
    """aubio's pitch track came out 1.6e-06 apart under one candidate (no -ffast-math
    in its build), and tune said only 'rejected: 1 WRONG_OUTPUT'.  A difference in
    printed numbers alone, and small, is named as such, with the [check] tolerance that
    would accept it; tune shows each rejection as it happens and sums them up."""
    root = tmp_path / "fma"
    root.mkdir()
    (root / "fma.c").write_text(FMA_LOOP)
    subprocess.run([AUTOPASS, "record", "--", "sh", "-c", "cc -O2 -c fma.c && cc fma.o -o fma"],
                   cwd=root, check=True, capture_output=True)
    config = ('[run]\ncommand = ["{exe}", "2000000"]\n[measure]\nmetric = "cpu"\n'
              'min_pairs = 2\nmax_pairs = 2\n')
    (root / "autopass.toml").write_text(config)
    native = [AUTOPASS, "try", "--flags", "fma.c=-march=native"]
    done = subprocess.run(native, cwd=root, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    found = re.search(r"WRONG_OUTPUT \(stdout line 1: .*; only numbers differ, by at most "
                      r"\S+ relative \(\[check\] mode = \"numbers\" with tolerance = (\S+) "
                      r"would accept it\)\)", done.stdout)
    assert found, done.stdout
    (root / "autopass.toml").write_text(
        config + f'[check]\nmode = "numbers"\ntolerance = {found.group(1)}\n')
    accepted = subprocess.run(native, cwd=root, capture_output=True, text=True)
    assert accepted.returncode == 0 and "outcome: OK" in accepted.stdout, accepted.stdout
    # tune's summary counts such candidates among the wrong outputs
    wrong = [Entry(n, Phase.SEARCH, str(n), {"fma.c": "x"}, Outcome.WRONG_OUTPUT, detail=d)
             for n, d in ((1, done.stdout.split("(", 1)[1][:-2]), (2, "exit code 1, the "
                                                                   "baseline's was 0"))]
    from autopass_build.tuning.explain import rounding_note
    [note] = rounding_note(wrong)
    assert note.startswith("1 candidate of 2 with wrong output differed only in printed "
                           "numbers, by little: stdout line 1:"), note


def test_stages_that_change_the_output_are_explained() -> None:
    """glslang rejects one of its own shaders when built with its PGO profile (by clang
    alone as well): the summary says what such a stage's wrong output means."""
    from autopass_build.tuning.explain import stage_note

    def wrong(n: int, phase: Phase, stages: str) -> Entry:
        return Entry(n, phase, str(n), {}, Outcome.WRONG_OUTPUT,
                     detail="exit code 1, the baseline's was 0", stages=stages)

    [note] = stage_note([wrong(1, Phase.STAGE, "pgo+lto"), wrong(2, Phase.STAGE, "pgo+thinlto"),
                         wrong(3, Phase.SEARCH, "")])
    assert note.startswith("wrong output explained: built with pgo+lto or pgo+thinlto the "
                           "program computes otherwise"), note
    assert "`autopass pgo`" in note
    [lto] = stage_note([wrong(1, Phase.STAGE, "lto")])
    assert "built with lto the program" in lto and "autopass pgo" not in lto
    assert stage_note([wrong(1, Phase.SEARCH, "")]) == ()


def test_wrong_output_under_fast_math_is_explained(tmp_path) -> None:
    """libvorbis builds with -ffast-math, and its PGO build encoded other bytes: the
    summary said only 'WRONG_OUTPUT'.  When the tuned units reorder floating point, it
    says why, and what lets such builds be measured."""
    root = tmp_path / "fm"
    root.mkdir()
    (root / "sum.c").write_text(FAST_MATH_SUM)
    build = "cc -O3 -ffast-math -c sum.c -o sum.o && cc sum.o -o sum"
    subprocess.run([AUTOPASS, "record", "--", "sh", "-c", build], cwd=root, check=True,
                   capture_output=True)
    (root / "autopass.toml").write_text(
        '[run]\ncommand = ["{exe}", "3000000"]\n[measure]\nmetric = "cpu"\nmin_pairs = 2\n'
        'max_pairs = 2\n[tune]\nstages = []\n')
    done = tune(root, "--strategy", "random", "--budget", "6", "--seed", "1")
    assert done.returncode == 0, done.stderr
    journal = Journal.latest(str(root / ".autopass"))
    assert any(e.outcome == Outcome.WRONG_OUTPUT for e in journal.entries)
    assert ("wrong output explained: sum.c is compiled with -ffast-math, so floating-point "
            "results depend on how the code is optimized") in done.stdout, done.stdout
    assert flagset.loose_floating_point(["-O3", "-ffast-math", "-fno-fast-math"]) == ""
    assert flagset.loose_floating_point(["-Ofast", "-c", "a.c"]) == "-Ofast"
    # The fix it names: numbers compared with a tolerance (the sums differ by ~5e-5).
    (root / "autopass.toml").write_text((root / "autopass.toml").read_text()
                                        + '[check]\nmode = "numbers"\ntolerance = 1e-3\n')
    again = tune(root, "--strategy", "random", "--budget", "6", "--seed", "1")
    assert again.returncode == 0, again.stderr
    searched = Journal.latest(str(root / ".autopass")).of_phase(Phase.SEARCH)
    assert searched and all(e.outcome == Outcome.OK for e in searched), \
        [e.interval_text() for e in searched]


def test_numbers_mode_compares_text_exactly_and_numbers_within_the_tolerance() -> None:
    from autopass_build.measuring.output_check import numbers_differ
    assert numbers_differ(b"sum 1499406.5\nn=3\n", b"sum 1499335.75\nn=3\n", 1e-3) == ""
    assert "more than the relative tolerance 1e-06" in numbers_differ(
        b"sum 1499406.5\n", b"sum 1499335.75\n", 1e-6)
    assert "line 2: text differs" in numbers_differ(b"a 1\nb 2\n", b"a 1\nc 2\n", 0.1)
    assert "stdout has 1 numbers, the baseline's 2" in numbers_differ(b"1 2", b"1 x", 0.1)
    assert numbers_differ(b"x=nan inf -2e-05", b"x=nan inf -2.00001e-05", 1e-3) == ""
    assert numbers_differ(b"information", b"information", 1e-9) == ""


ONE_COMMAND = """CC ?= cc
CFLAGS ?= -O1
mini: main.c hot.c warm.c
\t$(CC) $(CFLAGS) -c main.c hot.c warm.c
\t$(CC) -o $@ main.o hot.o warm.o
clean:
\trm -f mini *.o
"""


def test_units_compiled_in_one_command_are_tuned_as_that_command(tmp_path) -> None:
    """F23: lp_solve's library is one `cc -c` of 26 sources; duktape's `duk` one `cc -o
    duk duktape.c ...` of six, at -Os.  Apply mode gives such a command one set of flags,
    so a per-file winner for one source could not ship as measured; then tune searched
    none of them, and duktape's 84 % hot unit got no flag.  Now the hottest source stands
    for its command: each candidate's flags go to every source of it, every source gets
    the entry, and apply mode gives the command the flags they agree on."""
    root = tmp_path / "mini"
    shutil.copytree(TUNE_MINI, root)
    (root / "Makefile").write_text(ONE_COMMAND)
    subprocess.run([AUTOPASS, "record", "--", "make", "-s"], cwd=root, check=True,
                   capture_output=True)
    (root / "autopass.toml").write_text(
        '[run]\ncommand = ["{exe}", "20"]\n[measure]\nmetric = "instructions"\nlayout_check = false\n'
        'min_pairs = 2\nmax_pairs = 2\n[tune]\nstrategy = "agent"\nbudget = 3\nstages = []\n')
    done = subprocess.run([AUTOPASS, "tune"], cwd=root, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "hot.c is compiled in one command with main.c, warm.c: they take its flags" \
        in done.stderr
    db = flags_db.load(str(root / "autopass.flags.json"))
    assert sorted(db.entries) == ["hot.c", "main.c", "warm.c"]
    [flags] = {entry.flags for entry in db.entries.values()}
    assert "-O3" in flags             # vectorizing what -O1 left scalar
    assert "wrote 3 entries" in done.stdout and "the same for main.c, warm.c" in done.stdout
    # `try` measures what a build could ship: the command's other sources take the flags
    tried = subprocess.run([AUTOPASS, "try", "--flags", "hot.c=-O2"],
                           cwd=root, capture_output=True, text=True)
    assert tried.returncode == 0, tried.stderr
    assert "hot.c is compiled in one command with main.c, warm.c: they take its flags" \
        in tried.stderr
    assert "outcome: OK" in tried.stdout
    split = subprocess.run([AUTOPASS, "try", "--flags", "hot.c=-O2", "--flags", "warm.c=-O3"],
                           cwd=root, capture_output=True, text=True)
    assert split.returncode != 0 and "Traceback" not in split.stderr
    assert "hot.c and warm.c are compiled in one command" in split.stderr
    subprocess.run(["make", "-s", "clean"], cwd=root, check=True)
    applied = subprocess.run([AUTOPASS, "apply", "--", "make", "-s"], cwd=root,
                             capture_output=True, text=True)
    assert applied.returncode == 0 and "warning" not in applied.stderr, applied.stderr
    by_hand = tmp_path / "by-hand"
    by_hand.mkdir()
    for source in ("main.c", "hot.c", "warm.c"):
        shutil.copy(root / source, by_hand)
    clang = toolchain.find_tool("clang")
    hand_flags = list(flags)
    if decisions.of_flags(flags):     # a decision carried in the IR: apply loads the plugin
        store = Store.open_existing(str(root / ".autopass"))
        hand_flags += decisions.plugin_flags(Replayer(store).plugin_for(store.units()[0]))
    subprocess.run([clang, "-O1", "-c", "main.c", "hot.c", "warm.c", *hand_flags], cwd=by_hand,
                   check=True)
    for obj in ("main.o", "hot.o", "warm.o"):
        assert (root / obj).read_bytes() == (by_hand / obj).read_bytes(), obj
    # entries that disagree (edited by hand) leave the command as it was, with a note
    db.entries["warm.c"] = flags_db.FlagsEntry(("-O2",), db.entries["warm.c"].source_hash)
    flags_db.save(str(root / "autopass.flags.json"), db)
    subprocess.run(["make", "-s", "clean"], cwd=root, check=True)
    differ = subprocess.run([AUTOPASS, "apply", "--", "make", "-s"], cwd=root,
                            capture_output=True, text=True)
    assert differ.returncode == 0
    assert "the command compiles several sources at once, and their entries differ" in \
        differ.stderr


SHARED_WITH_ANOTHER_PROGRAM = """CC ?= cc
CFLAGS ?= -O1
all: mini other
mini other: main.c hot.c warm.c other.c
\t$(CC) $(CFLAGS) -c main.c hot.c warm.c other.c
\t$(CC) -o mini main.o hot.o warm.o
\t$(CC) -o other other.o
clean:
\trm -f mini other *.o
"""


def test_a_command_compiling_sources_of_another_program_is_not_tuned(tmp_path) -> None:
    """The command compiles other.c too, which `mini` is not made of: flags tuned for
    mini's hot.c would reach other.c unmeasured, so none is searched, and said so (the
    stages, when asked for, are still tuned)."""
    root = tmp_path / "mini"
    shutil.copytree(TUNE_MINI, root)
    (root / "Makefile").write_text(SHARED_WITH_ANOTHER_PROGRAM)
    (root / "other.c").write_text("int main(void) { return 0; }\n")
    subprocess.run([AUTOPASS, "record", "--", "make", "-s"], cwd=root, check=True,
                   capture_output=True)
    (root / "autopass.toml").write_text(
        '[run]\ncommand = ["{exe}", "20"]\ntarget = "mini"\n[measure]\n'
        'metric = "instructions"\nlayout_check = false\nmin_pairs = 2\nmax_pairs = 2\n[tune]\n'
        'strategy = "agent"\nbudget = 3\nstages = []\n')
    done = subprocess.run([AUTOPASS, "tune"], cwd=root, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "no per-file search: hot.c (compiled in one command with sources mini is not " \
        "made of, which apply mode would give the same flags, unmeasured)" in done.stderr
    assert not Journal.latest(str(root / ".autopass")).entries
    assert not (root / "autopass.flags.json").exists()


def test_a_second_measuring_command_waits_for_the_first(project) -> None:
    """Two commands timing the benchmark at once spoil each other's measurements, and
    the second rewrote what the first was using (`profile` during a PCRE2 `tune`): while
    `tune` runs, `profile` and `try` in the same store are refused in one line naming it;
    when it ends, the lock is gone with it."""
    from autopass_build.store import busy
    lock = project / ".autopass" / busy.LOCK_NAME
    process = subprocess.Popen([AUTOPASS, "tune", "--budget", "40", "--seed", "31"],
                               cwd=project, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while f"pid {process.pid}," not in (lock.read_text() if lock.exists() else ""):
            assert process.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        for command in (["profile"], ["try", "--flags", "hot.c=-O2"]):
            done = subprocess.run([AUTOPASS, *command], cwd=project, capture_output=True,
                                  text=True, timeout=60)
            assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
            assert f"`autopass tune` (pid {process.pid}, since " in done.stderr
            assert "wait for it to end, or stop it" in done.stderr
        assert process.poll() is None, "tune went on"
    finally:
        process.terminate()
        process.wait(60)
    with busy.measuring(str(project / ".autopass"), "test"):
        assert f"pid {os.getpid()}," in lock.read_text()


@pytest.mark.parametrize("text, seconds", [("45m", 2700), ("2h", 7200), ("1h30m", 5400),
                                           ("90s", 90), ("90", 90), (" 1.5h ", 5400)])
def test_a_time_budget_reads_as_people_write_it(text, seconds) -> None:
    from autopass_build.core.durations import parse_duration
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "45x", "m", "10m5", "0s"])
def test_a_time_that_is_none_is_one_clear_line(project, text) -> None:
    done = tune(project, "--time", text)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.startswith("autopass: error: --time: ") and \
        done.stderr.count("\n") == 1, done.stderr


def test_a_time_budget_ends_the_search_in_time(project) -> None:
    """`--time` alone: the time decides, not a count; the search stops while what is left
    still holds the final re-measurement, and says so; the split is said first."""
    started = time.monotonic()
    done = tune(project, "--time", "12s", "--seed", "31")
    took = time.monotonic() - started
    assert done.returncode == 0, done.stderr
    assert "budget: no stages, per-file flags the rest" in done.stderr, done.stderr
    assert "--time: the search stops after " in done.stderr
    journal = Journal.latest(str(project / ".autopass"))
    measured = [e for e in journal.of_phase(Phase.SEARCH) if not e.identical]
    assert len(measured) >= 1 and took < 60, (len(measured), took)
    assert journal.settings.time == 12.0


def test_the_search_of_a_time_budget_stays_uncounted_after_the_stages() -> None:
    """`--time` alone after stages (jsoncpp, a newcomer's run): the search's progress
    read "[1/99991]", the sentinel less the stages' evaluations.  A counted budget is
    split as said."""
    from autopass_build.tuning.clock import UNCOUNTED, search_budget

    assert search_budget(UNCOUNTED, 9, 2) == UNCOUNTED
    assert search_budget(40, 9, 2) == 29


def test_resume_lowers_a_budget_as_well_as_raising_it(project) -> None:
    """A run killed early resumes with a lower budget and ends there; a run that
    finished is not resumed (its strategy, asked again, measured one more candidate)
    unless --budget raises its budget."""
    process = subprocess.Popen([AUTOPASS, "tune", "--budget", "8", "--seed", "33"],
                               cwd=project, env=scratch_env(project),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    journal_dir = None
    while time.monotonic() < deadline and process.poll() is None:
        latest = Journal.latest(str(project / ".autopass"))
        if latest.settings.seed == 33 and len(latest.of_phase(Phase.SEARCH)) >= 2:
            journal_dir = latest.folder
            break
        time.sleep(0.05)
    process.kill()
    process.wait()
    assert journal_dir is not None
    before = len([e for e in Journal.open(journal_dir).of_phase(Phase.SEARCH)
                  if not e.identical])
    done = tune(project, "--resume", "--budget", "3")
    assert done.returncode == 0, done.stderr
    journal = Journal.open(journal_dir)
    assert journal.settings.seed == 33
    measured = [e for e in journal.of_phase(Phase.SEARCH) if not e.identical]
    assert len(measured) == max(3, before) < 8
    again = tune(project, "--resume")
    assert again.returncode == 2 and "finished (budget 3): nothing to resume" in \
        again.stderr, again.stderr
    more = tune(project, "--resume", "--budget", str(len(measured) + 1))
    assert more.returncode == 0, more.stderr
    assert len([e for e in Journal.open(journal_dir).of_phase(Phase.SEARCH)
                if not e.identical]) == len(measured) + 1
