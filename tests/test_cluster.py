"""`autopass tune --cluster` on real Ray clusters started on this machine
(ray.cluster_utils.Cluster: a head and measuring nodes, each with its benchmark slot),
tuning tiny real programs measured in callgrind instructions, so that a cluster run can
be compared with the local run exactly: the same candidates, in the same order, with
the same verdicts.  Faults: a node removed mid-run, the driver killed with kill -9."""

from __future__ import annotations

import json
import math
import os
import random
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest
from support import AUTOPASS, TUNE_MINI_MEASURED, recorded_copy, recorded_tune_mini

from autopass_build.core import bolt_commands
from autopass_build.tuning.journal import Journal, Phase

cluster_utils = pytest.importorskip("ray.cluster_utils",
                                    reason="Ray is not installed (pip install 'autopass[cluster]')")

CONFIG = TUNE_MINI_MEASURED + """[tune]
stages = []
strategy = "ga"
budget = 8
seed = 4
max_units = 2
options = { population = 4 }
"""
SLOT = {"autopass_bench": 1}


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    return recorded_tune_mini(tmp_path_factory.mktemp("cluster") / "mini", CONFIG)


@pytest.fixture(scope="module")
def local_run(project: Path) -> list[tuple]:
    """The run on this machine alone: what every cluster run must reproduce."""
    done = tune(project)
    assert done.returncode == 0, done.stderr
    return verdicts(project)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A head without a benchmark slot (it only schedules) and three measuring nodes,
    each with a cache of its own for shipped projects."""
    made = cluster_utils.Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    caches = tmp_path_factory.mktemp("node-caches")
    for n in range(3):
        made.add_node(num_cpus=1, resources=SLOT,
                      env_vars={"AUTOPASS_NODE_CACHE": str(caches / f"node{n}")})
    made.wait_for_nodes()
    made.caches = caches
    yield made
    made.shutdown()


def fresh(project: Path, tmp_path: Path) -> Path:
    """A copy of the recorded project without its runs."""
    copy = tmp_path / "mini"
    shutil.copytree(project, copy, symlinks=True)
    shutil.rmtree(copy / ".autopass" / "runs", ignore_errors=True)
    (copy / "autopass.flags.json").unlink(missing_ok=True)
    return copy


def environment(project: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTEST_CURRENT_TEST", "RAY_ADDRESS")}
    return {**env, "TMPDIR": str(project.parent)}


def tune(project: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([AUTOPASS, "tune", *args], cwd=project, capture_output=True,
                          text=True, timeout=600, env=env or environment(project))


def _tune_until(project: Path, address: str, reached: Callable[[str], bool]
                ) -> tuple[subprocess.Popen, list[str]]:
    """`tune --cluster address` started in `project`, its stderr read until a line
    `reached` says it is where the test acts: the process, and the lines read."""
    process = subprocess.Popen([AUTOPASS, "tune", "--cluster", address], cwd=project,
                               env=environment(project), stderr=subprocess.PIPE, text=True)
    assert process.stderr is not None
    seen = []
    for line in process.stderr:
        seen.append(line)
        if reached(line):
            break
    return process, seen


class Ratio(float):
    """A ratio of callgrind counts, equal to another within 0.05 %: the counts move by
    0.02 % with the length of the binary's path, and a node builds in a folder of its
    own (rounding both to 3 decimals was not enough: 1.7025 fell on either side once the
    suite's folders were longer)."""
    def __eq__(self, other: object) -> bool:
        return isinstance(other, float) and math.isclose(self, other, rel_tol=5e-4)

    __hash__ = float.__hash__


def verdicts(project: Path) -> list[tuple]:
    """Each entry's phase, configuration, verdict and ratio (a Ratio)."""
    journal = Journal.latest(str(project / ".autopass"))
    return [(str(e.phase), e.config, e.verdict, None if e.ratio is None else Ratio(e.ratio))
            for e in journal.entries]


def test_a_cluster_run_is_the_local_run_measured_several_at_a_time(project, local_run, tmp_path,
                                                                cluster) -> None:
    """Three measuring nodes, GA with a population of 4: the candidates come in batches,
    and the journal holds the local run's entries, in its order, with its verdicts.
    Joined by `auto`, and (issue 63, item 5) with the project shipped to the nodes
    ([cluster].ship = "always"): packed once, named by its hash, unpacked by each node
    into its own cache, built and measured there, never in the driver's tree."""
    copy = fresh(project, tmp_path)
    with open(copy / "autopass.toml", "a") as config:
        config.write('[cluster]\nship = "always"\n')
    done = tune(copy, "--cluster", "auto",        # Ray finds the cluster by $RAY_ADDRESS
                env={**environment(copy), "RAY_ADDRESS": cluster.address})
    assert done.returncode == 0, done.stderr
    assert verdicts(copy) == local_run
    assert "cluster: the project shipped to the nodes (" in done.stderr, done.stderr
    assert not list((copy / ".autopass" / "work").glob("node-*"))   # not in the driver's tree
    trees = list(cluster.caches.glob("node*/*/tree"))
    assert len(trees) == 3 and all((t.parent / ".complete").exists() for t in trees), trees
    assert all(list((t / ".autopass" / "work").glob("node-*")) for t in trees)
    assert len({t.parent.name for t in trees}) == 1          # one archive, by its hash
    # what `auto` joined, and the target group with its nodes, said at connect
    assert f"cluster auto: joined {cluster.address}; 3 measuring nodes" in done.stderr
    group = next(line for line in done.stderr.splitlines() if "target group" in line)
    assert "(this machine's CPU)" in group and group.count("/") == 3, group
    checks = [line for line in done.stderr.splitlines() if "A/A 1.0000x" in line]
    assert len(checks) == 3, done.stderr            # every node checked before verdicts
    assert "3 nodes give verdicts; candidates are measured up to 3 at a time" in done.stderr
    assert json.loads((copy / "autopass.flags.json").read_text())["entries"]
    # which node measured each search candidate: in the journal, and in the report
    journal = Journal.latest(str(copy / ".autopass"))
    searched = [e for e in journal.entries if e.phase == Phase.SEARCH]
    assert searched and all(e.node for e in searched)
    assert len({e.node for e in searched}) > 1          # several nodes took candidates
    report = subprocess.run([AUTOPASS, "report"], cwd=copy, capture_output=True, text=True)
    assert f"[on {searched[0].node}]" in report.stdout


def test_the_stages_are_measured_on_the_nodes_and_the_search_on_top_of_them(
        project, tmp_path, cluster) -> None:
    """Issue 63, item 6: a stage composition's look is built and measured on a node of
    the target group, as a candidate is, and the nodes' baseline then moves to the
    composition chosen, so that the search measures on top of it there as it does here:
    the journal is the local run's, entry for entry, and each stage look names its node."""
    runs = {}
    for where in ("locally", "on-cluster"):
        copy = fresh(project, tmp_path / where)
        toml = copy / "autopass.toml"
        toml.write_text(toml.read_text().replace("stages = []", 'stages = ["lto"]')
                        .replace("budget = 8", "budget = 6"))
        done = tune(copy, *(("--cluster", cluster.address) if where == "on-cluster" else ()))
        assert done.returncode == 0, done.stderr
        assert "baseline: lto" in done.stderr, done.stderr
        runs[where] = (copy, done.stderr)
    (copy, said), (local, _) = runs["on-cluster"], runs["locally"]
    assert verdicts(copy) == verdicts(local)
    journal = Journal.latest(str(copy / ".autopass"))
    looks = journal.of_phase(Phase.STAGE)
    assert [e.stages for e in looks] == ["lto"] and all(e.node for e in looks), looks
    searched = journal.of_phase(Phase.SEARCH)
    assert searched and all(e.node for e in searched)
    # the nodes were joined, and their A/A checked, once: before the stages
    assert said.count("A/A 1.0000x") == 3 and said.index("A/A") < said.index("stage lto")
    report = subprocess.run([AUTOPASS, "report"], cwd=copy, capture_output=True, text=True)
    assert f"stage lto: {looks[0].interval_text()} over the recorded build " \
           f"[on {looks[0].node}]" in report.stdout, report.stdout


@pytest.mark.skipif(bolt_commands.missing() != "", reason="needs bolt-19 (scripts/setup.sh)")
def test_the_training_runs_are_on_a_node_and_train_the_local_runs_profiles(
        project, tmp_path, cluster) -> None:
    """Issue 63, item 6: with the stages measured on the cluster, their training runs are
    on a verdict node too: PGO's (the recorded build instrumented, built and run there),
    CS-PGO's after the search (the build so far instrumented after inlining) and BOLT's
    (the binary instrumented, trained and rewritten by the node that measures the step).
    What they trained is kept in the driver's store under its hash, recorded as a local
    training records it, and shipped from there.  The profiles are the ones a local run
    trains, so the journal is the local run's, entry for entry.  With the project
    shipped, PGO's profile is sent to each node and the stages are measured there all
    the same; CS-PGO and BOLT train here, said (a profile names code by the tree's
    paths, and the nodes' copy is at others)."""
    from test_bolt import BOLT_MINI
    from test_bolt import CONFIG as BOLT_CONFIG

    from autopass_build.candidates import bolt, pgo, training
    from autopass_build.core import flags_db

    # bolt-mini: PGO pays there in instructions (1.07x), so the steps go on top of it
    recorded = recorded_copy(BOLT_MINI, tmp_path / "recorded" / "mini", BOLT_CONFIG.replace(
        'stages = ["bolt"]', 'stages = ["pgo", "cspgo", "bolt"]').replace(
        "budget = 4", "budget = 5"))
    runs = {}
    for where in ("locally", "on-cluster", "shipped"):
        copy = fresh(recorded, tmp_path / where)
        assert pgo.load(str(copy / ".autopass")) is None       # trained by this run
        toml = copy / "autopass.toml"
        toml.write_text(toml.read_text()
                        + ('[cluster]\nship = "always"\n' if where == "shipped" else ""))
        done = tune(copy, *(("--cluster", cluster.address) if where != "locally" else ()))
        assert done.returncode == 0, done.stderr
        runs[where] = (copy, done.stderr)
    (copy, said), (local, said_here) = runs["on-cluster"], runs["locally"]
    shipped, said_shipped = runs["shipped"]
    for other in (copy, shipped):
        assert verdicts(other) == verdicts(local)
    # shipped: the nodes work in their copy of the project, which the profile trained
    # after it was shipped is sent to
    assert "cluster: the project shipped to the nodes (" in said_shipped, said_shipped
    assert "cluster: training the PGO profile on " in said_shipped, said_shipped
    looks = Journal.latest(str(shipped / ".autopass")).of_phase(Phase.STAGE)
    assert [e.stages for e in looks][0] == "pgo" and looks[0].node, looks
    assert "CS-PGO is trained on this machine, not on a node: the nodes build a shipped " \
        "copy" in said_shipped and "BOLT is trained and measured on this machine" in said_shipped
    assert [e.node for e in looks if e.stages == "pgo+bolt"] == [""], looks
    profile = pgo.load(str(shipped / ".autopass"))
    assert profile is not None
    digest = re.search(r"sha256 ([0-9a-f]{12})", said_shipped)
    assert digest, said_shipped                  # this run's archive, each node's copy
    copies = [tree / os.path.relpath(profile.path, shipped)
              for tree in cluster.caches.glob(f"node*/{digest[1]}*/tree")]
    assert len(copies) == 3 and all(c.is_file() for c in copies), copies   # each node
    # on the cluster: each training on a node, each step measured on one
    for what in ("PGO", "CS-PGO"):
        assert f"cluster: training the {what} profile on " in said, said
        assert len(re.findall(rf"\n\S+ {what} profile trained on \S+ in ", said)) == 1, said
    assert "cluster: training" not in said_here and "CS-PGO: building" in said_here
    # the node's own lines, whole, as a training here says them
    assert re.search(r"\n\S+ \[\S+\] CS-PGO: building \S+ instrumented after inlining", said)
    assert re.search(r"stage pgo: .* -> faster", said), said
    looks = Journal.latest(str(copy / ".autopass")).of_phase(Phase.STAGE)
    assert [e.stages for e in looks] == ["pgo", "pgo+cspgo", "pgo+bolt"] and all(
        e.node for e in looks), looks
    store, store_here = str(copy / ".autopass"), str(local / ".autopass")
    here, there = pgo.load(store_here), pgo.load(store)
    assert here is not None and there is not None
    assert there.hash == here.hash and there.path.startswith(store)   # the driver's store
    cs, cs_here = (training.load(s, pgo.CS_FILE, pgo.TrainedCs) for s in (store, store_here))
    assert cs is not None and cs_here is not None and cs.path.startswith(store)
    assert (cs.hash, cs.base) == (cs_here.hash, cs_here.base)   # (built: by its paths)
    trained, trained_here = bolt.load(store), bolt.load(store_here)
    assert trained is not None and trained_here is not None
    assert trained.path.startswith(store) and trained.binary == trained_here.binary
    db, db_here = (flags_db.load(str(p / "autopass.flags.json")) for p in (copy, local))
    assert db.target is not None and db_here.target is not None
    assert db.target.stages == db_here.target.stages
    if db.target.bolt is not None:       # kept: shipped from the driver's store
        assert (copy / db.target.bolt.path).read_bytes() == Path(trained.path).read_bytes()


def test_a_bench_lost_while_it_trains_the_profile_hands_the_training_to_the_next(
        project, tmp_path, cluster) -> None:
    """F75 (issue 63, item 6) for the training run: the bench training the PGO
    profile dies (its Ray worker killed with kill -9 while the training command runs):
    the node is left out, said, the training goes to the next verdict node, and the run
    ends with the profile kept and the stage measured."""
    from autopass_build.candidates import pgo

    copy = fresh(project, tmp_path)
    toml = copy / "autopass.toml"
    toml.write_text(toml.read_text()
                    .replace('command = ["{exe}", "20"]',
                             'command = ["{exe}", "20"]\ntrain = ["sh", "-c", "sleep 3 && '
                             '{exe} 20"]')
                    .replace("stages = []", 'stages = ["pgo"]').replace("budget = 8",
                                                                      "budget = 4"))
    process, seen = _tune_until(copy, cluster.address,
                                lambda line: "cluster: training the PGO profile on " in line)
    deadline, trainer = time.monotonic() + 60, None
    while trainer is None and time.monotonic() < deadline:
        trainer = next((p for p in psutil.process_iter(["cmdline"])
                        if "NodeBench.train_pgo" in " ".join(p.info["cmdline"] or ())), None)
        time.sleep(0.05)
    assert trainer is not None, "".join(seen)
    trainer.kill()
    _, rest = process.communicate(timeout=600)
    said = "".join(seen) + rest
    assert process.returncode == 0, said
    assert said.count("cluster: training the PGO profile on ") == 2, said
    assert " lost (" in said and "PGO profile trained on " in said, said
    assert pgo.load(str(copy / ".autopass")) is not None
    looks = Journal.latest(str(copy / ".autopass")).of_phase(Phase.STAGE)
    assert [e.stages for e in looks] == ["pgo"], looks


LTO_MINI_TIMED = """
[run]
command = ["{exe}", "50"]
[measure]
metric = "cpu"
min_pairs = 2
max_pairs = 6
[cluster]
aa_noise = 0.4
"""


def test_a_head_to_head_of_two_close_compositions_is_measured_on_a_node(tmp_path,
                                                                        cluster) -> None:
    """Issue 63, item 6: two compositions within each other's intervals are measured
    against each other on a node of the target group, the nodes' baseline the one
    composition while the other is measured, and the run's (the recorded build) again
    after.  The looks are put in the journal as a run would have measured them (a
    timed A/B cannot be made to overlap on demand)."""
    from autopass_build import config as cfg
    from autopass_build.candidates import stages
    from autopass_build.candidates.evaluate import Evaluator
    from autopass_build.core.outcome import Outcome
    from autopass_build.measuring.stats import FASTER
    from autopass_build.store.index import Store
    from autopass_build.tuning import on_cluster
    from autopass_build.tuning.clock import Deadline, KindPace
    from autopass_build.tuning.journal import Entry
    from autopass_build.tuning.measuring import Measurements, config_key
    from autopass_build.tuning.rivals import against_its_rival
    from autopass_build.tuning.settings import RunSettings
    from autopass_build.tuning.stage_choice import Composer

    root = recorded_copy(Path(__file__).parent / "data" / "lto-mini", tmp_path / "mini",
                         LTO_MINI_TIMED + f'address = "{cluster.address}"\n')
    config = cfg.load(str(root / "autopass.toml"))
    store = Store.open_existing(str(root / ".autopass"))
    evaluator = Evaluator(store, config)
    journal = Journal.create(str(store.dir), RunSettings())
    said: list[str] = []
    measurements = Measurements(journal, evaluator, config, {}, said.append)
    composer = Composer(evaluator, measurements, (stages.Stage.LTO, stages.Stage.THINLTO),
                        lambda: None, said.append)
    for n, (name, ratio) in enumerate((("lto", 0.80), ("thinlto", 0.81)), 1):
        journal.append(Entry(n, Phase.STAGE, config_key({}, name), {}, Outcome.OK, FASTER,
                             ratio, ratio - 0.05, ratio + 0.05, 20, stages=name))
    best = composer.chosen(stages.of_name("lto"), journal.of_phase(Phase.STAGE)[0])
    environment = dict(os.environ)      # this process joins as a driver: put back after
    try:
        on_cluster.join(measurements, config, str(store.dir), evaluator, said.append)
        measurer = measurements.remote
        assert measurer is not None, said
        against_its_rival(composer, best, [stages.of_name("lto"), stages.of_name("thinlto")],
                          Deadline(None), KindPace())
        back = measurer.baseline
    finally:
        on_cluster.leave(measurements, said.append)
        os.environ.clear()
        os.environ.update(environment)
    [rival] = journal.of_phase(Phase.STAGE_RIVAL)
    assert rival.node and rival.measured and rival.stages == "thinlto", said
    assert back is not None and (back.unit_flags, back.link_flags) == ({}, ())


def test_verify_runs_its_builds_and_measurement_on_a_measuring_node(project, local_run,
                                                                   tmp_path, cluster) -> None:
    """`verify --cluster`: the three builds and the A/B on a node of the target group
    (one holding a benchmark slot, never the head), its progress relayed as it goes; the
    project shipped ([cluster].ship = "always"), so the node builds in a copy of its own."""
    copy = tmp_path / "mini"
    shutil.copytree(project, copy, symlinks=True)
    with open(copy / "autopass.toml", "a") as config:
        config.write('[build]\ncommand = "make"\nclean = "make clean"\n'
                     '[cluster]\nship = "always"\n')
    built = (copy / "mini").stat().st_mtime_ns
    done = subprocess.run([AUTOPASS, "verify", "--cluster", cluster.address], cwd=copy,
                          capture_output=True, text=True, timeout=600, env=environment(copy))
    assert done.returncode == 0, done.stderr
    on = [line for line in done.stderr.splitlines() if "verify: cluster: on " in line]
    # shipped (issue 63, item 5): built and measured in a copy of its own on the node
    assert len(on) == 1 and f"in its own copy of {copy} (shipped: " in on[0], done.stderr
    assert (copy / "mini").stat().st_mtime_ns == built      # the driver's tree untouched
    head = cluster.head_node.node_id
    assert f"/{head[:6]} " not in on[0], "verified on the head, which has no benchmark slot"
    assert "bit-identical" in done.stdout and "tuned vs plain" in done.stdout, done.stdout
    relayed = done.stderr.split(on[0], 1)[1]
    assert "verify: " in relayed, "the node's progress did not come back"


def test_a_node_lost_mid_run_loses_and_duplicates_nothing(project, local_run, tmp_path,
                                                          cluster) -> None:
    copy = fresh(project, tmp_path)
    """A fourth node joins, and is removed while the second batch is being measured: its
    candidate is measured again on another node, and the journal is the local run's."""
    victim = cluster.add_node(num_cpus=1, resources=SLOT)
    cluster.wait_for_nodes()
    process, seen = _tune_until(copy, cluster.address,   # the second batch on its nodes
                                lambda line: line.startswith("tune: [4/8]"))
    cluster.remove_node(victim, allow_graceful=False)
    _, rest = process.communicate(timeout=600)
    stderr = "".join(seen) + rest
    assert process.returncode == 0, stderr
    assert verdicts(copy) == local_run                # nothing lost, nothing twice
    assert "lost" in stderr, stderr


def test_resume_after_the_driver_is_killed_completes_locally_or_on_the_cluster(
        project, local_run, tmp_path, cluster) -> None:
    """kill -9 of the driver at a random moment of the search, then --resume of two
    copies of what it left: one on the cluster, one on this machine alone; each ends
    with the uninterrupted run's journal."""
    killed = fresh(project, tmp_path / "killed")
    process = subprocess.Popen([AUTOPASS, "tune", "--cluster", cluster.address],
                               cwd=killed, env=environment(killed),
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while process.poll() is None and _search_entries(killed) < 1:
        time.sleep(0.05)
    time.sleep(random.Random(20261204).uniform(0.0, 1.0))
    family = psutil.Process(process.pid).children(recursive=True)
    process.send_signal(signal.SIGKILL)
    process.wait()
    for child in family:
        try:
            child.kill()
        except psutil.NoSuchProcess:
            pass
    for where in (("--cluster", cluster.address), ()):
        copy = tmp_path / ("on-cluster" if where else "locally") / "mini"
        # not the nodes' scratch folders: a node still finishing the killed driver's
        # candidate writes and deletes there while the copy runs (seen on a busy machine)
        shutil.copytree(killed, copy, symlinks=True, ignore=_scratch_of_nodes)
        done = tune(copy, "--resume", *where)
        assert done.returncode == 0, done.stderr
        assert verdicts(copy) == local_run, where


def test_a_nodes_benchmarks_run_with_the_drivers_values_of_what_ray_sets(monkeypatch) -> None:
    """F95: Ray gives its workers OMP_NUM_THREADS=1 and marks of its own; a benchmark a
    node's bench starts inherits them.  The bench takes the driver's values instead
    (what Baseline carries, made on the driver), so an OpenMP benchmark runs on the node
    as it does here.  The variables are the ones a real Ray worker has beyond its
    driver's (Ray 2.60)."""
    from dataclasses import replace

    from autopass_build.cluster.node_bench import RAY_WORKER_ENV, Baseline, adopt_environment
    from autopass_build.config import load
    from autopass_build.measuring.benchmark import Benchmark

    for name in RAY_WORKER_ENV:                              # each put back afterwards
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OMP_NUM_THREADS", "4")              # the user's, on the driver
    made_on_driver = Baseline("store", load(None), "prog", {}, ())
    for name, value in (("OMP_NUM_THREADS", "1"), ("RAY_JOB_ID", "01000000"),
                        ("RAY_RAYLET_PID", "4242"), ("SPT_NOENV", "1")):  # a Ray worker's
        monkeypatch.setenv(name, value)
    adopt_environment(made_on_driver.environment)
    config = load(None)
    config = replace(config, run=replace(config.run, command=("{exe}",)))
    seen = Benchmark.from_config(config).env({})
    assert seen["OMP_NUM_THREADS"] == "4"
    assert not {"RAY_JOB_ID", "RAY_RAYLET_PID", "SPT_NOENV"} & set(seen)


def test_an_address_is_taken_only_from_the_config_or_the_command_line(project, tmp_path,
                                                                       cluster) -> None:
    """$RAY_ADDRESS names a running cluster: a run not told to use it stays local."""
    copy = fresh(project, tmp_path)
    done = tune(copy, "--budget", "2", env={**environment(copy), "RAY_ADDRESS": cluster.address})
    assert done.returncode == 0, done.stderr
    assert "cluster" not in done.stderr


def test_a_cluster_that_cannot_be_reached_is_said_in_one_line_before_anything_runs(
        project, tmp_path) -> None:
    copy = fresh(project, tmp_path)
    for address, says in (("127.0.0.1:1", "cannot reach the cluster at '127.0.0.1:1'"),
                          ("head", "write it as HOST:PORT")):
        started = time.monotonic()
        done = tune(copy, "--cluster", address)
        assert done.returncode != 0 and says in done.stderr, done.stderr
        assert "Traceback" not in done.stderr and time.monotonic() - started < 30
        assert not (copy / ".autopass" / "runs").exists() or not any(
            (copy / ".autopass" / "runs").iterdir())      # refused before a run began


def test_a_port_held_by_something_else_than_ray_is_said_in_seconds(project, tmp_path) -> None:
    """F78 (issue 63): `--cluster HOST:PORT` where a plain TCP listener (or a web server) holds
    the port: Ray waited minutes for it, deaf to SIGTERM; now one line, within 30 s,
    before a run begins, and a SIGTERM meanwhile ends it as any other."""
    import socket
    import threading

    copy = fresh(project, tmp_path)
    quiet = socket.socket()
    quiet.bind(("127.0.0.1", 0))
    quiet.listen()
    held: list[socket.socket] = []
    threading.Thread(target=lambda: [held.append(quiet.accept()[0]) for _ in range(4)],
                     daemon=True).start()
    address = f"127.0.0.1:{quiet.getsockname()[1]}"
    started = time.monotonic()
    done = tune(copy, "--cluster", address)
    assert done.returncode != 0 and "Traceback" not in done.stderr, done.stderr
    assert f"'{address}' is not a Ray cluster" in done.stderr
    assert time.monotonic() - started < 30
    stopped = subprocess.Popen([AUTOPASS, "tune", "--cluster", address], cwd=copy,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(1.5)                                  # inside the wait for an answer
    stopped.send_signal(signal.SIGTERM)
    _, said = stopped.communicate(timeout=30)
    assert stopped.returncode != 0 and "Traceback" not in said, said
    quiet.close()


def _scratch_of_nodes(folder: str, names: list[str]) -> set[str]:
    return {"work"} & set(names) if Path(folder).name == ".autopass" else set()


def _search_entries(project: Path) -> int:
    runs = project / ".autopass" / "runs"
    journals = list(runs.glob("*/journal.jsonl")) if runs.exists() else []
    return sum(1 for j in journals for line in j.read_text().splitlines()
               if '"phase":"search"' in line)


def test_a_node_whose_a_a_check_is_wide_or_not_same_gives_no_verdicts() -> None:
    """The A/A gate on real comparison records: ±1 %, same or unclear, passes at aa_noise
    3 %; ±5 %, or an A/A called "faster", keeps the node out of verdicts, with the
    figure said."""
    from autopass_build.candidates.evaluate import Evaluation
    from autopass_build.cluster.dispatch import _noise_verdict
    from autopass_build.cluster.node_bench import NodeResult
    from autopass_build.cluster.nodes import Role
    from autopass_build.core.outcome import Outcome
    from autopass_build.measuring import stats
    from autopass_build.measuring.measure import Comparison

    def checked(verdict: str, low: float, high: float) -> tuple:
        estimate = stats.Estimate((low + high) / 2, low, high, 10, 1.0)
        comparison = Comparison(Outcome.OK, verdict, estimate)
        return _noise_verdict(NodeResult(Evaluation(Outcome.OK, comparison), "n"), 0.03)

    assert checked(stats.SAME, 0.99, 1.01)[0] == Role.VERDICTS
    assert checked(stats.UNCLEAR, 0.99, 1.01)[0] == Role.VERDICTS
    role, why = checked(stats.SAME, 0.95, 1.05)
    assert role == Role.NOISY and "±5.0% is wider than [cluster].aa_noise 3.0%" in why
    role, why = checked(stats.FASTER, 0.97, 0.99)
    assert role == Role.NOISY and "called faster" in why
    failed = _noise_verdict(NodeResult(Evaluation(Outcome.RUN_CRASH, detail="crashed"), "n"), 0.03)
    assert failed == (Role.NOISY, "its A/A check failed: crashed")


def test_a_node_that_lacks_a_tool_the_run_needs_stops_it_at_connect(project, tmp_path,
                                                                    cluster) -> None:
    """Issue 63, item 4: a measuring node without valgrind (this run counts instructions
    in callgrind) is found when the run connects, in one line naming the node and what it
    lacks, before the stages take their time: no run begins."""
    bare = tmp_path / "bin"                     # this machine's programs, but no valgrind
    bare.mkdir()
    for program in Path("/usr/bin").iterdir():
        if not program.name.startswith("valgrind"):
            (bare / program.name).symlink_to(program)
    lacking = cluster.add_node(num_cpus=1, resources=SLOT, env_vars={"PATH": str(bare)})
    cluster.wait_for_nodes()
    try:
        copy = fresh(project, tmp_path)
        started = time.monotonic()
        done = tune(copy, "--cluster", cluster.address)
        assert done.returncode != 0 and "Traceback" not in done.stderr, done.stderr
        said = done.stderr.strip().splitlines()[-1]
        assert f"/{lacking.node_id[:6]} (" in said and "has no valgrind" in said, said
        assert time.monotonic() - started < 120
        assert not any((copy / ".autopass" / "runs").glob("*/journal.jsonl"))
    finally:
        cluster.remove_node(lacking)


def test_busy_slots_other_groups_and_missing_compilers_are_found_by_the_probe(
        project, cluster) -> None:
    """The probe itself, on the real nodes: a slot held by another run is said and its
    node left out; a target group no node is in, a store a node cannot see, a recorded
    compiler the node has in another version: each a ClusterError naming it."""
    import ray

    from autopass_build.cluster.connect import ClusterError
    from autopass_build.cluster.nodes import cpu_model, measuring_nodes
    from autopass_build.cluster.preflight import Needed, check_nodes, needed_for
    from autopass_build.store.index import Store

    ray.init(address=cluster.address, logging_level="ERROR", log_to_driver=False)
    try:
        nodes = measuring_nodes(ray, cluster.address)
        needed = needed_for(Store(str(project / ".autopass")), "wall", ("pgo", "thinlto"))
        assert needed.tools == ("ld.lld",) and needed.compilers
        held_node = sorted(nodes)[0]
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        class SlotHolder:   # another run's bench: holds its node's slot while it lives
            def ready(self) -> bool:     # (local: Ray ships it by value to the node)
                return True

        holder = ray.remote(SlotHolder).options(
            resources=SLOT, num_cpus=0,
            scheduling_strategy=NodeAffinitySchedulingStrategy(held_node, soft=False)).remote()
        ray.get(holder.ready.remote())
        shown: list[str] = []
        found = check_nodes(ray, nodes, needed, "", cpu_model(), shown.append, seconds=5)
        assert found.group == cpu_model() and found.blind == ()
        assert any(f"node {held_node[:6]}: its benchmark slot stayed busy" in line
                   for line in shown), shown
        members = next(line for line in shown if "target group" in line)
        assert f"/{held_node[:6]}" not in members and members.count("/") == 2, members
        ray.kill(holder)
        elsewhere = Needed("/nonexistent/store", (), ())
        wrong = [("target group", needed, "sparc", "[cluster].target = 'sparc': no measuring"),
                 ("store", elsewhere, "", "cannot see the store /nonexistent/store, and "
                                          "[cluster].ship = \"never\""),
                 ("compiler", Needed(needed.store_dir, ((needed.compilers[0][0],
                                                         "clang 18.1.0 (x86_64)"),), ()),
                  "", "recorded with clang 18.1.0")]
        for what, asked, target, says in wrong:
            with pytest.raises(ClusterError, match=re.escape(says)):
                check_nodes(ray, nodes, asked, target, cpu_model(), shown.append, seconds=60,
                            ship="never")
        found = check_nodes(ray, nodes, elsewhere, "", cpu_model(), shown.append)
        assert len(found.blind) == 3 and "the project is shipped to them" in shown[-1]
    finally:
        ray.shutdown()


def _free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_a_cluster_started_as_the_docs_say_is_joined_by_its_ray_client_address(
        project, local_run, tmp_path) -> None:
    """Issue 63, item 2: `ray start --head` (as docs/cluster.md starts it, with a benchmark
    slot) and `--cluster ray://HOST:PORT`: the Ray client address the docs give works with
    what `autopass[cluster]` installs; `verify` builds and measures on the node through it.
    (ray.cluster_utils cannot serve Ray client: its proxy starts no per-client server.)"""
    import tempfile

    gcs, client = _free_port(), _free_port()
    scratch = tempfile.mkdtemp(prefix="rt", dir="/tmp")    # Ray's socket paths stay short
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    head = subprocess.Popen(
        [str(Path(AUTOPASS).with_name("ray")), "start", "--head", "--block", "--port",
         str(gcs), "--ray-client-server-port", str(client), "--node-ip-address", "127.0.0.1",
         "--num-cpus", "1", "--resources", json.dumps(SLOT), "--temp-dir", scratch,
         "--include-dashboard", "false", "--disable-usage-stats"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
        start_new_session=True)
    address = f"ray://127.0.0.1:{client}"
    try:
        _wait_for_head(address, head)
        copy = tmp_path / "mini"
        shutil.copytree(project, copy, symlinks=True)
        with open(copy / "autopass.toml", "a") as config:
            config.write('[build]\ncommand = "make"\nclean = "make clean"\n')
        done = subprocess.run([AUTOPASS, "verify", "--cluster", address], cwd=copy,
                              capture_output=True, text=True, timeout=600, env=environment(copy))
        assert done.returncode == 0, done.stderr
        assert "verify: cluster: on " in done.stderr, done.stderr
        assert "SIGTERM handler" not in done.stderr, done.stderr     # the server's noise
        assert "bit-identical" in done.stdout and "tuned vs plain" in done.stdout, done.stdout
    finally:
        _stop_head(head, scratch)


def _stop_head(head: subprocess.Popen, scratch: str) -> None:
    """The head's processes killed, found by the folder only they name: SIGTERM makes
    `ray start --block` stop them gracefully, 30 s here; `ray stop` would stop every
    Ray process of the machine, the module's cluster too."""
    os.killpg(head.pid, signal.SIGKILL)
    head.communicate()
    for process in psutil.process_iter(["cmdline"]):
        if any(scratch in part for part in process.info["cmdline"] or ()):
            try:
                process.kill()
            except psutil.NoSuchProcess:
                pass
    shutil.rmtree(scratch, ignore_errors=True)


def _wait_for_head(address: str, head: subprocess.Popen, seconds: float = 120) -> None:
    """Until the head answers at `address` as Ray does."""
    from autopass_build.cluster.connect import ClusterError, check_reachable

    deadline = time.monotonic() + seconds
    while True:
        try:
            check_reachable(address, seconds=2)
            return
        except ClusterError:
            if head.poll() is not None or time.monotonic() > deadline:
                head.kill()
                pytest.fail(f"ray start did not serve {address}: {head.communicate()[0][-2000:]}")
            time.sleep(1)
