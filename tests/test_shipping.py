"""Shipping the project to cluster nodes (issue 63, item 5): packed once, named by its
hash, checked on arrival, unpacked into a cache of the node's own, and built and
measured there when the driver's tree is not on the node at all."""

from __future__ import annotations

import hashlib
import io
import tarfile
from pathlib import Path

import pytest
from support import TUNE_MINI_MEASURED, recorded_tune_mini

from autopass_build import config as cfg
from autopass_build.cluster.connect import ClusterError
from autopass_build.cluster.node_bench import Baseline, NodeBench
from autopass_build.cluster.shipping import NODE_CACHE_ENV, ShippedTree, pack, unpacked


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    root = recorded_tune_mini(tmp_path_factory.mktemp("ship") / "mini", TUNE_MINI_MEASURED,
                              profile=False)
    (root / "lib").mkdir()
    (root / "lib" / "libalias.so").symlink_to("../mini")       # a link inside the tree
    return root


@pytest.fixture(autouse=True)
def node_state_put_back():
    """A NodeBench made here, in the test's process, claims a CPU for the process's life
    and sets its environment (TMPDIR, the driver's values of what Ray sets): on a node
    that is the process's own, here it would leak into the tests after it (the pinning
    tests found their runs on another CPU than the one they expect)."""
    import os

    from autopass_build.measuring import cpu_pinning

    environment = dict(os.environ)
    claimed = cpu_pinning._claimed, cpu_pinning._claim_handle
    yield
    os.environ.clear()
    os.environ.update(environment)
    if cpu_pinning._claim_handle is not None and cpu_pinning._claim_handle is not claimed[1]:
        cpu_pinning._claim_handle.close()           # its lock goes with it
    cpu_pinning._claimed, cpu_pinning._claim_handle = claimed


def shipped_tree(root: Path, data: bytes | None = None) -> ShippedTree:
    data = pack(str(root), str(root / ".autopass")) if data is None else data
    return ShippedTree(hashlib.sha256(data).hexdigest(), len(data), [data], str(root),
                    ".autopass")


def test_the_archive_is_the_tree_less_the_stores_scratch_packed_alike_each_time(project):
    first = pack(str(project), str(project / ".autopass"))
    assert first == pack(str(project), str(project / ".autopass"))       # hash-named
    with tarfile.open(fileobj=io.BytesIO(first)) as archive:
        names = set(archive.getnames())
        link = archive.getmember("lib/libalias.so")
    assert {"hot.c", "mini", ".autopass/store.db", "lib"} <= names
    assert not {n for n in names if n.split("/")[:2] in (
        [".autopass", "work"], [".autopass", "runs"])}, names
    assert link.issym() and link.linkname == "../mini"


def test_a_node_builds_and_measures_its_own_copy_when_the_drivers_tree_is_gone(
        project, tmp_path, monkeypatch) -> None:
    """The node's bench from a shipped alone: the driver's tree renamed away first, so
    a path still read from there would fail."""
    driver = tmp_path / "driver" / "mini"
    driver.parent.mkdir()
    import shutil

    shutil.copytree(project, driver, symlinks=True)
    config = cfg.load(str(driver / "autopass.toml"))
    shipped = shipped_tree(driver)
    driver.rename(tmp_path / "driver" / "gone")
    monkeypatch.setenv(NODE_CACHE_ENV, str(tmp_path / "cache"))
    bench = NodeBench(Baseline(str(driver / ".autopass"), config, "mini", {}, (), shipped),
                      "a" * 16, "")
    info, missing, _ = bench.describe()
    assert missing == ""
    checked = bench.aa(config.measure)
    assert checked.evaluation.comparison is not None, checked.evaluation.detail
    assert checked.evaluation.comparison.verdict == "same"       # callgrind: the same code
    [tree] = (tmp_path / "cache").glob("*/tree")
    assert (tree.parent / ".complete").exists()
    assert list((tree / ".autopass" / "work").glob("node-*"))    # it worked there
    assert not driver.exists()


def test_a_pgo_baseline_is_built_with_the_profile_of_the_nodes_copy(project, tmp_path,
                                                                    monkeypatch) -> None:
    """F100: the search on PGO ships the store with its trained profile, but the baseline's
    flags named the profile at the driver's path (-fprofile-use=/driver/...), which a
    node of its own does not have: the node reads them in its copy.  The driver's tree
    is renamed away, so a flag still naming it fails the node's build."""
    import shutil

    from autopass_build.candidates import pgo
    from autopass_build.candidates.evaluate import Evaluator
    from autopass_build.store.index import Store

    driver = tmp_path / "driver" / "mini"
    driver.parent.mkdir()
    shutil.copytree(project, driver, symlinks=True)
    config = cfg.load(str(driver / "autopass.toml"))
    evaluator = Evaluator(Store(str(driver / ".autopass")), config)
    profile = pgo.train(evaluator)
    assert profile.path.startswith(str(driver) + "/")
    shipped = shipped_tree(driver)
    driver.rename(tmp_path / "driver" / "gone")
    monkeypatch.setenv(NODE_CACHE_ENV, str(tmp_path / "cache"))
    unit_flags = pgo.flags_for(evaluator, profile)
    bench = NodeBench(Baseline(str(driver / ".autopass"), config, "mini", unit_flags, (),
                               shipped), "b" * 16, "")
    checked = bench.aa(config.measure)
    assert checked.evaluation.comparison is not None, checked.evaluation.detail
    [tree] = (tmp_path / "cache").glob("*/tree")
    assert bench.evaluator is not None
    assert {f for flags in bench.evaluator.base_flags.values() for f in flags} == \
        {profile.use_flag().replace(str(driver), str(tree))}
    # the stages chosen later are read there too
    bench.rebase(unit_flags, ())
    assert bench.evaluator.base_flags == {u: tuple(f.replace(str(driver), str(tree))
                                                   for f in flags)
                                          for u, flags in unit_flags.items()}


def test_an_archive_that_arrives_damaged_or_reaches_outside_its_tree_is_refused(
        project, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv(NODE_CACHE_ENV, str(tmp_path / "cache"))
    good = pack(str(project), str(project / ".autopass"))
    damaged = shipped_tree(project, good)
    damaged = ShippedTree(damaged.digest, damaged.size, [good[:600] + b"X" + good[601:]],
                       damaged.root, damaged.store_rel)
    with pytest.raises(ClusterError, match="arrived damaged"):
        unpacked(damaged)
    evil = io.BytesIO()
    with tarfile.open(fileobj=evil, mode="w") as archive:
        entry = tarfile.TarInfo("../outside")
        entry.size = 3
        archive.addfile(entry, io.BytesIO(b"bad"))
    with pytest.raises(ClusterError, match="could not be unpacked|outside its tree"):
        unpacked(shipped_tree(project, evil.getvalue()))
    assert not (tmp_path / "cache" / "outside").exists()
    assert not list((tmp_path / "cache").glob("*.partial-*"))     # nothing half-unpacked


def test_a_node_ends_a_candidates_pairs_when_the_runs_time_is_up(project) -> None:
    """F105 on a cluster's node: the driver sends what is left of --time (in seconds:
    the node's clock is its own), and past it the node's A/B ends at its first look, as
    a local one does, where its precision would have it take all 64 pairs."""
    import dataclasses

    from autopass_build.measuring import stats

    config = cfg.load(str(project / "autopass.toml"))
    timed = dataclasses.replace(config.measure, metric="cpu", min_pairs=4, max_pairs=64,
                                precision=0.0001)
    bench = NodeBench(Baseline(str(project / ".autopass"), config, "mini", {}, ()),
                      "c" * 16, "")
    assert bench.evaluator is not None
    # another binary (its command line kept in a section of its own), the same code
    recorded = {unit.id: ("-frecord-command-line",) for unit in bench.evaluator.units}
    result = bench.evaluate([], recorded, timed, False, seconds_left=0.0)
    comparison = result.evaluation.comparison
    assert comparison is not None, result.evaluation.detail
    assert len(comparison.baseline) == stats.Sequential(4, 64, 0.0001).looks[0], result.lines
