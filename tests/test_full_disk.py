"""Issue 64, case 3: the disk fills while tune runs (its own writes, a compile), while it
keeps a trained profile, while `apply --train` writes one, and while apply mode's BOLT
rewrites the linked program.  Each on a real full disk: the project on a small tmpfs
(mounting needs root, which CI has), filled by the user's own training command or build
at the moment the test needs, or shrunk to what it holds."""

from __future__ import annotations

import errno
import shutil
import subprocess
from pathlib import Path

import pytest
from support import (
    AUTOPASS,
    TUNE_MINI,
    TUNE_MINI_MEASURED,
    env_with_autopass,
    recorded_copy,
    recorded_tune_mini,
    run,
    tmpfs,
    write,
)
from test_retrain import instrumented, project
from test_tune import CONFIG as TUNE_CONFIG
from test_tune import scratch_env, tune

from autopass_build.candidates.replay import Replayer
from autopass_build.core import bolt_commands, flags_db, toolchain
from autopass_build.core.files import hash_file
from autopass_build.store.index import Store
from autopass_build.tuning.journal import Journal

LTO_MINI = Path(__file__).parent / "data" / "lto-mini"
# the user's training command, which fills the disk once the program has run
FILL_AFTER = ('"sh", "-c", "{exe} %s >/dev/null; '
              'dd if=/dev/zero of=filler bs=64k 2>/dev/null; true"')


@pytest.fixture
def disk(tmp_path):
    """A 64 MB tmpfs, filled by the test's build or training command."""
    with tmpfs(tmp_path / "disk", "64m") as folder:
        yield folder


def test_a_full_disk_while_tune_keeps_its_profile_stops_resumably(disk):
    config = f"""
[build]
command = "make -s"
clean = "make -s clean"
[run]
command = ["{{exe}}", "50"]
train = [{FILL_AFTER % 50}]
[measure]
metric = "instructions"
layout_check = false
min_pairs = 2
max_pairs = 2
[tune]
strategy = "random"
budget = 4
stages = ["pgo", "lto"]
"""
    root = recorded_copy(LTO_MINI, disk / "p", config)
    done = subprocess.run([AUTOPASS, "tune"], cwd=root, capture_output=True, text=True)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    said = done.stderr.strip().splitlines()[-1]
    assert said.startswith("autopass: error: cannot keep the trained profile") and \
        "its disk is full" in said and "autopass tune --resume" in said, said
    blobs = root / ".autopass" / "blobs" / "profile"
    kept = list(blobs.rglob("*")) if blobs.exists() else []
    assert all(hash_file(str(p)) == p.stem for p in kept if p.is_file()), \
        "a profile cut short was kept under a hash it does not have"
    (root / "filler").unlink()
    (root / "autopass.toml").write_text(config.replace(f"train = [{FILL_AFTER % 50}]\n", ""))
    resumed = subprocess.run([AUTOPASS, "tune", "--resume"], cwd=root, capture_output=True,
                             text=True)
    assert resumed.returncode == 0, resumed.stderr
    assert flags_db.load(str(root / "autopass.flags.json")).target is not None


def test_a_full_disk_while_apply_train_writes_its_profile_builds_with_what_was_kept(disk):
    root = project(disk / "p")
    first = run([AUTOPASS, "apply", "--train", "--", "make"], root, env_with_autopass())
    assert first.returncode == 0, first.stderr
    kept = {p.name: hash_file(str(p)) for p in root.glob("autopass.trained.*")}
    subprocess.run(["make", "clean"], cwd=root, check=True, capture_output=True)
    write(root / "autopass.toml", '[build]\ncommand = "make"\n[run]\ncommand = ["{exe}", '
                                  f'"x"]\ntrain = [{FILL_AFTER % "x"}]\n')
    done = run([AUTOPASS, "apply", "--train", "--", "make"], root, env_with_autopass())
    said = done.stderr.decode()
    assert done.returncode == 0 and "Traceback" not in said, said
    assert "disk is full" in said or "no space left" in said, said
    assert (root / "prog").exists() and not instrumented(root / "prog")
    assert subprocess.run([root / "prog", "x"], capture_output=True).returncode == 0
    trained = flags_db.load(str(root / "autopass.trained.flags.json"))
    assert trained.profile is not None
    assert hash_file(str(root / trained.profile.path)) == trained.profile.hash, \
        "the trained database names a profile that is not the one beside it"
    assert {p.name for p in root.glob("autopass.trained.*")} == set(kept)


@pytest.mark.skipif(bolt_commands.missing() != "", reason="needs llvm-bolt (bolt-19)")
def test_a_full_disk_while_apply_mode_bolts_the_program_keeps_it_as_linked(disk):
    """The disk fills just before the link: the link fits, BOLT's rewrite does not."""
    root = project(disk / "p")
    assert run([AUTOPASS, "apply", "--train", "--", "make"], root,
               env_with_autopass()).returncode == 0
    make = (root / "Makefile").read_text()
    # 28 KB left for the link (its program is about 19 KB): none for BOLT's copy
    write(root / "Makefile", make.replace("prog: main.o work.o\n", "prog: main.o work.o\n"
                                          "\tdd if=/dev/zero of=room bs=4k count=7 2>/dev/null\n"
                                          "\t-dd if=/dev/zero of=filler bs=64k 2>/dev/null\n"
                                          "\trm -f room\n"))
    subprocess.run(["make", "clean"], cwd=root, check=True, capture_output=True)
    done = run([AUTOPASS, "apply", "--db", "autopass.trained.flags.json", "--", "make"], root,
               env_with_autopass())
    said = done.stderr.decode()
    assert done.returncode == 0 and "Traceback" not in said, said
    assert "BOLT not applied, the linked binary is kept" in said, said
    assert subprocess.run([root / "prog", "x"], capture_output=True).returncode == 0
    assert not bolt_commands.rewritten(str(root / "prog"))
    assert not list(root.glob(".autopass-bolt-*")), "BOLT's scratch was left in the tree"


def test_a_real_full_disk_stops_tune_resumably_and_room_lets_it_go_on(tmp_path) -> None:
    """F12 (issue 64, case 3) on a real full disk: the project, its store and its
    temporary folders on a tmpfs shrunk to what it holds after a first run.  `tune
    --resume` stops in one line that says the disk is full and how to go on (exit 2, no
    traceback), the journal keeps every entry it had; given room, it goes on to its
    budget from there."""
    with tmpfs(tmp_path / "disk", "96m") as disk:
        root = recorded_tune_mini(disk / "mini", TUNE_CONFIG)
        done = tune(root, "--budget", "2", "--seed", "21")
        assert done.returncode == 0, done.stderr
        before = Journal.latest(str(root / ".autopass"))
        used = shutil.disk_usage(disk).used
        subprocess.run(["mount", "-o", f"remount,size={used + 8192}", disk], check=True)
        stopped = tune(root, "--resume", "--budget", "4")
        assert stopped.returncode == 2, stopped.stderr
        assert "Traceback" not in stopped.stderr
        assert "autopass tune --resume" in stopped.stderr and "the disk is full" in \
            stopped.stderr, stopped.stderr
        assert stopped.stderr.count("autopass: error") == 1, \
            stopped.stderr
        assert Journal.open(before.folder).entries == before.entries
        # the other commands that write on the full disk: one line each, nothing of the
        # user's lost, nothing half-written left behind (an empty report, an empty copy
        # of autopass.toml: before, both were left)
        config = (root / "autopass.toml").read_bytes()
        for command in (["init", "--force"], ["report", "--html", "r.html"]):
            done = subprocess.run([AUTOPASS, *command], cwd=root, capture_output=True,
                                  text=True, timeout=600, env=scratch_env(root))
            assert done.returncode == 2, (command, done.stderr)
            assert "Traceback" not in done.stderr and "free space" in done.stderr, \
                (command, done.stderr)
        assert (root / "autopass.toml").read_bytes() == config
        assert not list(root.glob("autopass.toml.bak*")) and not (root / "r.html").exists()
        subprocess.run(["mount", "-o", "remount,size=96m", disk], check=True)
        resumed = tune(root, "--resume", "--budget", "4")
        assert resumed.returncode == 0, resumed.stderr
        after = Journal.open(before.folder).entries
        assert after[:len(before.entries)] == before.entries and len(after) > len(before.entries)


def test_a_compile_that_finds_the_disk_full_is_no_verdict_on_its_flags(tmp_path) -> None:
    """F12 (issue 64, case 3): the store's work folder on a full disk (a 16 KB tmpfs):
    the replayed compile fails with clang's "IO failure on output stream: No space left
    on device".  `try` says the disk is full, in one line (exit 2), as tune stops
    resumably; before, the candidate was COMPILE_FAIL, a verdict on its flags, which a
    tune journals and never measures again."""
    root = recorded_copy(TUNE_MINI, tmp_path / "mini", TUNE_MINI_MEASURED)
    replayer = Replayer(Store.open_existing(str(root / ".autopass")))
    [unit] = [u for u in replayer.units.values() if u.source_rel == "hot.c"]
    with tmpfs(tmp_path / "full", "64k") as full:
        with open(full / "filler", "wb", buffering=0) as filler:    # the disk, full
            with pytest.raises(OSError):
                while True:
                    filler.write(b"\0" * 4096)
        with pytest.raises(OSError) as raised:     # clang's compile into it, as replayed
            replayer.run_compiler([toolchain.find_tool("clang"), "-O2", "-c",
                                   str(root / "hot.c"), "-o", str(full / "hot.o")],
                                  str(root), unit)
        assert raised.value.errno == errno.ENOSPC, raised.value
    work = root / ".autopass" / "work"
    shutil.rmtree(work, ignore_errors=True)
    with tmpfs(work, "16k"):
        done = run([AUTOPASS, "try", "--flags", "hot.c=-O1"], root, timeout=300)
    said = done.stdout.decode() + done.stderr.decode()
    assert done.returncode == 2, said
    assert "the disk is full" in said and "Traceback" not in said, said
    assert "COMPILE_FAIL" not in said and "LINK_FAIL" not in said, said
