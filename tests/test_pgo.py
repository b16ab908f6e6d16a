"""PGO from the recorded build: instrumented replay, training run, merged profile in the
store by content hash; the PGO build differs from the plain one, runs correctly, and a
changed profile file is detected."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from support import AUTOPASS, env_with_autopass

from autopass_build import config as cfg
from autopass_build.candidates.evaluate import Evaluator
from autopass_build.candidates.pgo import flags_for, load, train
from autopass_build.store.index import Store

MINI = Path(__file__).parent / "data" / "tune-mini"


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("pgo") / "mini"
    shutil.copytree(MINI, root)
    subprocess.run([AUTOPASS, "record", "--", "make", "CFLAGS=-O2"], cwd=root, check=True,
                   capture_output=True)
    (root / "autopass.toml").write_text('[run]\ncommand = ["{exe}", "20"]\n'
                                        '[measure]\nmetric = "instructions"\nlayout_check = false\n'
                                        'min_pairs = 2\nmax_pairs = 2\n'
                                        '[tune]\nstages = []\n')   # the --pgo path here
    return root


def test_pgo_trains_a_profile_and_builds_with_it(recorded) -> None:
    store = Store.open_existing(str(recorded / ".autopass"))
    evaluator = Evaluator(store, cfg.load(str(recorded / "autopass.toml")))
    profile = train(evaluator)
    assert Path(profile.path).is_file() and profile.runs == 1
    assert load(store.dir) == profile
    [hot] = [u for u in evaluator.units if u.source_rel == "hot.c"]
    plain = Path(evaluator.replayer.object_for(hot)).read_bytes()
    guided = Path(evaluator.replayer.object_for(hot, (profile.use_flag(),))).read_bytes()
    assert guided != plain
    built = evaluator.replayer.build(evaluator.target.output, flags_for(evaluator, profile))
    out = subprocess.run([built.binary, "20"], capture_output=True, text=True, check=True)
    reference = subprocess.run([recorded / "mini", "20"], capture_output=True, text=True)
    assert out.stdout == reference.stdout
    Path(profile.path).write_bytes(b"changed")          # someone touched the store
    assert load(store.dir) is None


def test_pgo_command_measures_against_the_recorded_build(recorded) -> None:
    done = subprocess.run([AUTOPASS, "pgo"], cwd=recorded, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "profile " in done.stdout and "instructions: speedup " in done.stdout


def test_tune_on_pgo_ships_the_profile_and_apply_uses_it(recorded) -> None:
    done = subprocess.run([AUTOPASS, "tune", "--pgo", "--strategy", "greedy", "--budget", "3"],
                          cwd=recorded, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    from autopass_build.tuning.journal import Journal
    settings = Journal.latest(str(recorded / ".autopass")).settings
    assert settings.pgo and "with its PGO profile" in done.stderr
    # gains are against PGO alone; PGO alone is also measured against the recorded build
    versus = {e.phase: e for e in Journal.latest(str(recorded / ".autopass")).entries}
    assert versus["pgo-alone"].ratio is not None
    assert "PGO alone against the recorded build: " in done.stdout
    db = json.loads((recorded / "autopass.flags.json").read_text())
    assert db["profile"]["path"] == "autopass.profdata"
    assert (recorded / "autopass.profdata").is_file()
    objects = ["main.o", "hot.o", "warm.o"]
    subprocess.run(["make", "clean"], cwd=recorded, check=True, capture_output=True)
    subprocess.run(["make", "CFLAGS=-O2"], cwd=recorded, check=True, capture_output=True)
    plain = {o: (recorded / o).read_bytes() for o in objects}
    subprocess.run(["make", "clean"], cwd=recorded, check=True, capture_output=True)
    applied = subprocess.run([AUTOPASS, "apply", "--", "make", "CFLAGS=-O2"], cwd=recorded,
                             capture_output=True, text=True)
    assert applied.returncode == 0 and "warning" not in applied.stderr, applied.stderr
    assert [o for o in objects if (recorded / o).read_bytes() != plain[o]] == objects
    # what ships is what was measured: the applied object equals the replayed PGO object
    from autopass_build.candidates.fidelity import compare_objects
    from autopass_build.candidates.pgo import load
    store = Store.open_existing(str(recorded / ".autopass"))
    evaluator = Evaluator(store, cfg.load(str(recorded / "autopass.toml")))
    [hot] = [u for u in evaluator.units if u.source_rel == "hot.c"]
    tuned = tuple(db["entries"].get("hot.c", {}).get("flags", ()))
    replayed = Path(evaluator.replayer.object_for(
        hot, (load(store.dir).use_flag(),) + tuned)).read_bytes()
    assert compare_objects(replayed, (recorded / "hot.o").read_bytes())[0]
    (recorded / "autopass.profdata").write_bytes(b"someone else's profile")
    checked = subprocess.run([AUTOPASS, "db", "check"], cwd=recorded, capture_output=True,
                             text=True)
    assert checked.returncode == 1
    assert "is not the PGO profile the build was tuned with" in checked.stdout
    subprocess.run(["make", "clean"], cwd=recorded, check=True, capture_output=True)
    stale = subprocess.run([AUTOPASS, "apply", "--", "make", "CFLAGS=-O2"], cwd=recorded,
                           capture_output=True, text=True)
    assert stale.returncode == 0
    assert "is not the PGO profile the flags were tuned with" in stale.stderr


def test_another_programs_function_of_a_profiled_name_is_not_called_out_of_date(
        recorded, tmp_path) -> None:
    """jsoncpp's test program has a main() of its own: clang finds the tool's profile
    "out of date" for it.  The profile was not trained on that source, so nothing is
    said of it (nor of a source without a profiled function), and --policy error does
    not fail its compile."""
    from autopass_build.candidates.pgo import load
    from autopass_build.core import flags_db
    from autopass_build.core.files import hash_file

    root = tmp_path / "other"
    root.mkdir()
    shutil.copyfile(load(str(recorded / ".autopass")).path, root / "autopass.profdata")
    db = flags_db.empty()
    db.profile = flags_db.ProfileRef("autopass.profdata",
                                     hash_file(str(root / "autopass.profdata")))
    db.target = flags_db.TargetStages("mini", ("pgo",), "-O2", ("main.c", "hot.c", "warm.c"))
    flags_db.save(str(root / "autopass.flags.json"), db)
    (root / "tool.c").write_text(
        "#include <stdint.h>\n"
        "void hot_scale(uint32_t *d, int n, uint32_t f) {\n"
        "  for (int i = 0; i < n; i++) if (d[i] & 1) d[i] *= f; else d[i] += f;\n}\n"
        "int main(int argc, char **argv) { return argc > 3 ? 2 : 0; }\n")
    (root / "unrelated.c").write_text("int unrelated(int x) { return x * 3; }\n")
    compile_tool = ["sh", "-c", "cc -O2 -c tool.c -o tool.o && cc -O2 -c unrelated.c"]
    plain = subprocess.run(["clang-19", "-O2", "-c", "tool.c", "-o", "plain.o",
                            f"-fprofile-use={root / 'autopass.profdata'}"],
                           cwd=root, capture_output=True, text=True)
    assert "(hash mismatch) hot_scale" in plain.stderr, plain.stderr  # what clang says
    for policy in ("warn", "error"):
        built = subprocess.run([AUTOPASS, "apply", "--policy", policy, "--", *compile_tool],
                               cwd=root, capture_output=True, text=True)
        assert built.returncode == 0, built.stderr
        assert "warning" not in built.stderr, built.stderr    # nor "no profile data"
        assert (root / "tool.o").is_file() and (root / "unrelated.o").is_file()


def test_a_stale_profile_is_summarized_and_never_fails_a_werror_build(recorded) -> None:
    from autopass_build.candidates.pgo import load
    store_profile = load(str(recorded / ".autopass"))
    shutil.copyfile(store_profile.path, recorded / "autopass.profdata")  # the shipped one
    hot = recorded / "hot.c"
    original = hot.read_text()
    # Whether the tune before wrote flags for hot.c depends on what it found; an entry
    # would go stale with the source and, under --policy error, fail the build first.
    # This test is about the profile alone.
    db_path = recorded / "autopass.flags.json"
    db_text = db_path.read_text()
    db = json.loads(db_text)
    db["entries"].pop("hot.c", None)
    db_path.write_text(json.dumps(db))
    # new control flow in a profiled function: its profile no longer matches
    hot.write_text(original.replace("acc = mix(acc, 7);", "if (r & 1) acc = mix(acc, 7);"))
    try:
        subprocess.run(["make", "clean"], cwd=recorded, check=True, capture_output=True)
        built = subprocess.run([AUTOPASS, "apply", "--", "make", "CFLAGS=-O2 -Werror"],
                               cwd=recorded, capture_output=True, text=True)
        assert built.returncode == 0, built.stderr
        assert ("hot.c: the PGO profile is out of date (1 function whose control flow "
                "changed: hot_checksum)") in built.stderr
        assert "(hash mismatch)" not in built.stderr    # clang's own line: summarized
        subprocess.run(["make", "clean"], cwd=recorded, check=True, capture_output=True)
        strict = subprocess.run([AUTOPASS, "apply", "--policy", "error", "--", "make",
                                 "CFLAGS=-O2"], cwd=recorded, capture_output=True, text=True)
        assert strict.returncode != 0 and "autopass: error: hot.c: the PGO profile" in strict.stderr
    finally:
        hot.write_text(original)
        db_path.write_text(db_text)


def test_a_training_command_turns_pgo_on_and_is_what_trains(recorded, tmp_path) -> None:
    config = recorded / "train.toml"
    marker = tmp_path / "trained"
    config.write_text((recorded / "autopass.toml").read_text().replace(
        '[measure]', f'train = ["sh", "-c", "touch {marker}; exec \\"$0\\" 5", "{{exe}}"]\n[measure]'))
    (recorded / ".autopass" / "pgo.json").unlink(missing_ok=True)   # train afresh
    done = subprocess.run([AUTOPASS, "tune", "--config", str(config), "--strategy", "random",
                           "--budget", "1"], cwd=recorded, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert marker.exists()                     # the training command ran, not the benchmark
    from autopass_build.tuning.journal import Journal
    assert Journal.latest(str(recorded / ".autopass")).settings.pgo
    off = subprocess.run([AUTOPASS, "tune", "--config", str(config), "--no-pgo", "--strategy",
                          "random", "--budget", "1"], cwd=recorded, capture_output=True, text=True)
    assert off.returncode == 0 and not Journal.latest(str(recorded / ".autopass")).settings.pgo


def test_a_changed_benchmark_trains_and_profiles_afresh(recorded, tmp_path) -> None:
    """F29: the stored PGO profile and hot-spot profile were reused for the same target
    whatever [run] said since; a changed command (another input, a benchmark that now
    crashes) kept the old profile (dav1d).  Both now carry the workload they ran."""
    from autopass_build.evidence import hotspots
    from autopass_build.measuring.benchmark import Benchmark

    first = subprocess.run([AUTOPASS, "tune", "--pgo", "--strategy", "random", "--budget", "1"],
                           cwd=recorded, capture_output=True, text=True)
    assert first.returncode == 0, first.stderr
    config = recorded / "other.toml"
    config.write_text((recorded / "autopass.toml").read_text().replace('"20"]', '"7"]'))
    again = subprocess.run([AUTOPASS, "tune", "--config", str(config), "--pgo", "--strategy",
                            "random", "--budget", "1"], cwd=recorded, capture_output=True,
                           text=True)
    assert again.returncode == 0, again.stderr
    assert "training a PGO profile" in again.stderr
    assert "profiling the baseline" in again.stderr
    other = Benchmark.from_config(cfg.load(str(config))).workload()
    stored_profile = hotspots.load(str(recorded / ".autopass"))
    stored_pgo = load(str(recorded / ".autopass"))
    assert stored_profile is not None and stored_profile.workload == other
    assert stored_pgo is not None and stored_pgo.workload == other
    same = subprocess.run([AUTOPASS, "tune", "--config", str(config), "--pgo", "--strategy",
                           "random", "--budget", "1"], cwd=recorded, capture_output=True,
                          text=True)
    assert same.returncode == 0 and "training a PGO profile" not in same.stderr


def test_a_benchmark_of_milliseconds_is_profiled_exactly(recorded) -> None:
    """tune-mini at 7 runs 2 ms: perf took 3 samples, under CI load none in the program,
    and tune stopped with "the profile puts no time in a recorded unit".  Too few samples
    to tell now hand the run to callgrind, which counts it exactly."""
    from autopass_build.evidence.hotspots import profile

    config = recorded / "short.toml"
    config.write_text((recorded / "autopass.toml").read_text().replace('"20"]', '"7"]'))
    evaluator = Evaluator(Store.open_existing(str(recorded / ".autopass")),
                          cfg.load(str(config)))
    found = profile(evaluator)
    assert found.method == "callgrind"
    assert next(iter(found.unit_shares())) == "hot.c"


def test_a_benchmark_that_exits_non_zero_by_design_trains_and_is_sampled(recorded) -> None:
    """F43: minisat exits 20 for "unsatisfiable", grep 1 for "no match": the training run was
    called failed on any status but 0 (no PGO, no BOLT), and perf's status, the program's,
    failed the profile over to callgrind.  The measured runs check the status against the
    baseline's; training and sampling take it as it comes."""
    from autopass_build.measuring.sampling import perf_samples

    config = recorded / "exit3.toml"
    config.write_text((recorded / "autopass.toml").read_text().replace(
        'command = ["{exe}", "20"]', 'command = ["sh", "-c", "\\"$0\\" 20; exit 3", "{exe}"]'))
    (recorded / ".autopass" / "pgo.json").unlink(missing_ok=True)   # train afresh
    evaluator = Evaluator(Store.open_existing(str(recorded / ".autopass")),
                          cfg.load(str(config)))
    profile = train(evaluator)
    assert Path(profile.path).is_file() and profile.runs == 1
    busy = "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done; exit 3"
    samples = perf_samples(["sh", "-c", busy], str(recorded), {"PATH": "/usr/bin:/bin"},
                           60, frequency=999)
    assert sum(samples.values()) > 20


NOSTDLIB_MAKEFILE = """CC ?= cc
CFLAGS ?= -O2
CRT = $(shell $(CC) -print-file-name=$(1))
prog: main.c libhot.so
\t$(CC) $(CFLAGS) -o $@ main.c -L. -lhot
libhot.so: hot.c
\t$(CC) $(CFLAGS) -fPIC -c hot.c -o hot.o
\t$(CC) -shared -nostdlib $(call CRT,crti.o) $(call CRT,crtbeginS.o) hot.o -lc \\
\t  $(call CRT,crtendS.o) $(call CRT,crtn.o) -Wl,-soname,libhot.so.1 -o libhot.so.1.0
\tln -sf libhot.so.1.0 libhot.so
"""


def test_a_library_linked_without_the_default_libraries_is_profiled(tmp_path) -> None:
    """libtool links a C++ shared library with -nostdlib and a `-lc` of its own, before the
    profile runtime clang appends: the runtime's atexit stayed undefined in the
    instrumented library.  hunspell's program then failed to link ("hidden symbol `atexit'
    ... is referenced by DSO") and tune skipped PGO; this library, loaded by a program
    that did link, left a profile with no function in it."""
    from autopass_build.core import toolchain

    root = tmp_path / "nostdlib"
    root.mkdir()
    for source in ("main.c", "hot.c"):
        shutil.copy(Path(__file__).parent / "data" / "shared-mini" / source, root)
    (root / "Makefile").write_text(NOSTDLIB_MAKEFILE)
    subprocess.run([AUTOPASS, "record", "--", "make", "-s"], cwd=root, check=True,
                   capture_output=True)
    (root / "autopass.toml").write_text('[run]\ncommand = ["{exe}", "300"]\ntarget = "prog"\n')
    evaluator = Evaluator(Store.open_existing(str(root / ".autopass")),
                          cfg.load(str(root / "autopass.toml")))
    profile = train(evaluator)
    shown = subprocess.run([toolchain.find_tool("llvm-profdata"), "show", "--all-functions",
                            profile.path], capture_output=True, text=True, check=True).stdout
    assert "  work:" in shown and "  main:" in shown, shown


def test_db_status_says_how_much_of_the_profile_matches_todays_source(recorded, tmp_path
                                                                      ) -> None:
    """Issue 46, item 3: the shipped PGO profile against today's units (clang's own
    counts of functions whose data it drops), and one recommendation."""
    from autopass_build.core.files import hash_file

    store = Store.open_existing(str(recorded / ".autopass"))
    profile = train(Evaluator(store, cfg.load(str(recorded / "autopass.toml"))))
    shutil.copy(profile.path, recorded / "autopass.profdata")
    db = recorded / "status.flags.json"
    db.write_text(json.dumps({"schema": 1, "cpu": None, "entries": {}, "target": None,
                              "toolchain": {"compiler": "", "target": ""},
                              "profile": {"path": "autopass.profdata",
                                          "hash": hash_file(profile.path)}}))
    status = [AUTOPASS, "db", "status", "--db", str(db)]
    fresh = subprocess.run(status, cwd=recorded, capture_output=True, text=True)
    assert fresh.returncode == 0, fresh.stdout + fresh.stderr
    line = next(x for x in fresh.stdout.splitlines() if x.startswith("PGO profile: ") and "/" in x)
    matched, total = map(int, line.split()[2].split("/"))
    assert matched == total > 0 and "recommendation: nothing" in fresh.stdout
    hot = recorded / "hot.c"
    original = hot.read_text()
    try:   # today's source: one function's control flow changed, one function added
        hot.write_text(original.replace("acc = mix(acc, 7);", "if (acc & 1) acc = mix(acc, 7);")
                       + "int added(int y) { return y > 2 ? y : -y; }\n")
        stale = subprocess.run(status, cwd=recorded, capture_output=True, text=True)
        subprocess.run(["make", "clean"], cwd=recorded, capture_output=True)
        built = subprocess.run([AUTOPASS, "apply", "--db", str(db), "--", "make"],
                               cwd=recorded, capture_output=True, text=True,
                               env=env_with_autopass())
    finally:
        hot.write_text(original)
    assert built.returncode == 0, built.stderr
    decay = built.stderr.strip().splitlines()[-1]     # apply's summary says it in one line
    assert "of what was tuned: the PGO profile out of date in 1 source " in decay, decay
    assert "autopass db status" in decay and "apply --train" in decay, decay
    assert stale.returncode == 1, stale.stdout + stale.stderr
    assert "1 changed, 1 new" in stale.stdout and "recommendation: retrain" in stale.stdout
    (recorded / "autopass.profdata").write_bytes(b"edited")    # no longer the one shipped
    edited = subprocess.run(status, cwd=recorded, capture_output=True, text=True)
    assert edited.returncode == 1 and "PGO profile: not usable" in edited.stdout
    assert "recommendation: retrain" in edited.stdout


def test_a_profile_that_links_outside_the_database_folder_is_refused(recorded, tmp_path) -> None:
    """F87 (issue 64, case 5): the shipped profile replaced by a symbolic link to a file
    elsewhere (the same bytes, so its hash matches): not used, said in one line, the
    build goes on without it; truncated or another program's, the hash refuses it."""
    from autopass_build.candidates.pgo import load

    shipped = recorded / "autopass.profdata"
    kept = shipped.read_bytes() if shipped.exists() else Path(load(
        str(recorded / ".autopass")).path).read_bytes()
    outside = tmp_path / "elsewhere.profdata"
    outside.write_bytes(kept)
    db_path = recorded / "autopass.flags.json"
    db_text = db_path.read_text() if db_path.exists() else None
    from autopass_build.core import flags_db
    from autopass_build.core.files import hash_file
    db = flags_db.empty()
    db.profile = flags_db.ProfileRef("autopass.profdata", hash_file(str(outside)))
    flags_db.save(str(db_path), db)
    try:
        shipped.unlink(missing_ok=True)
        shipped.symlink_to(outside)
        subprocess.run(["make", "clean"], cwd=recorded, check=True, capture_output=True)
        built = subprocess.run([AUTOPASS, "apply", "--", "make", "CFLAGS=-O2"], cwd=recorded,
                               capture_output=True, text=True)
        assert built.returncode == 0, built.stderr
        assert f"is a symbolic link to {outside}, outside the database's folder" in built.stderr
        shipped.unlink()
        shipped.write_bytes(kept[: len(kept) // 2])                      # truncated
        subprocess.run(["make", "clean"], cwd=recorded, check=True, capture_output=True)
        cut = subprocess.run([AUTOPASS, "apply", "--", "make", "CFLAGS=-O2"], cwd=recorded,
                             capture_output=True, text=True)
        assert cut.returncode == 0 and "is not the PGO profile the flags were tuned with" \
            in cut.stderr, cut.stderr
    finally:
        shipped.unlink(missing_ok=True)
        shipped.write_bytes(kept)
        if db_text is not None:
            db_path.write_text(db_text)


def test_the_profiles_fit_is_said_by_what_the_compiles_warned() -> None:
    """The stage line on a profile's fit: a function whose control flow changed has its
    counts dropped (the pipelines differ); one with no counters was inlined everywhere
    in the instrumented build (a header's static helper, seen on flac) or not built:
    nothing is dropped, and the line says so rather than blame the pipeline."""
    from types import SimpleNamespace

    from autopass_build.candidates.pgo import TrainedProfile, match_note
    from autopass_build.core.pgo_profile import MISMATCH, MISSING, Said

    profile = TrainedProfile("/p.profdata", "h", "prog", 1, "w", "ir")
    missing = Said().read(f"a.c:3:1: warning: {MISSING}helper_ [-Wprofile-instr-missing]"
                          .encode())
    changed = Said().read(f"b.c:9:1: warning: {MISMATCH}hot_loop [-Wbackend-plugin]"
                          .encode())
    notes = [match_note(SimpleNamespace(replayer=SimpleNamespace(
        profile_said={"/p.profdata": said})), profile, "pgo") for said in (missing, changed)]
    assert "1 function it has no data for: helper_" in notes[0]
    assert "inlined everywhere there" in notes[0] and "dropped" not in notes[0], notes[0]
    assert "whose control flow changed: hot_loop" in notes[1]
    assert "counts are dropped" in notes[1] and "pipeline differs" in notes[1], notes[1]
