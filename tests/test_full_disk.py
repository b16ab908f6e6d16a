"""Issue 64, case 3: the disk fills while tune keeps a trained profile, while `apply
--train` writes one, and while apply mode's BOLT rewrites the linked program.  Each on a
real full disk: the project on a small tmpfs (mounting needs root, which CI has), filled
by the user's own training command or build at the moment the test needs."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from support import AUTOPASS, env_with_autopass, recorded_copy, run, tmpfs, write
from test_retrain import instrumented, project

from autopass_build.core import bolt_commands, flags_db
from autopass_build.core.files import hash_file

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
