"""Fixtures: the real clang-19 and clang++-19, opt, and a throwaway recording store.
Helpers that tests import are in support.py."""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import tempfile
from pathlib import Path

import pytest
from support import Recording, recording_env

from autopass_build.core import toolchain

# A suite started in the background (`nohup ... &`, a CI runner's shell) inherits SIGINT,
# SIGQUIT and SIGHUP ignored, and every process a test starts inherits that in turn: the
# tests that press Ctrl-C on `tune` or `apply --train` then saw it ignored, as the shell
# convention asks, and failed.  The tests' processes start as from a terminal.
for _signum in (signal.SIGINT, signal.SIGQUIT, signal.SIGHUP):
    if signal.getsignal(_signum) == signal.SIG_IGN:
        signal.signal(_signum, signal.default_int_handler if _signum == signal.SIGINT
                      else signal.SIG_DFL)


def _tool(name: str) -> str:
    path = toolchain.find_tool(name)
    if path is None:
        pytest.fail(f"{name} {toolchain.DEFAULT_LLVM_VERSION} not found; run scripts/setup.sh")
    return path


@pytest.fixture(scope="session")
def clang() -> str:
    return _tool("clang")


@pytest.fixture(scope="session")
def clangxx() -> str:
    return _tool("clang++")


@pytest.fixture(scope="session")
def opt() -> str:
    return _tool("opt")


@pytest.fixture
def rec(tmp_path: Path, clang: str, clangxx: str) -> Recording:
    root = tmp_path / "project"
    root.mkdir()
    store_dir = root / ".autopass"
    return Recording(root, store_dir, recording_env(root, store_dir, clang, clangxx))


# A wrapper server started on demand by a test's CMake build (capture/on_demand.py) goes
# a few seconds after its last call, not minutes after the test.
os.environ.setdefault("AUTOPASS_SERVER_IDLE", "5")
# `apply --train`'s cache of instrumented objects (capture/apply/train_cache.py): the session's
# own, never the user's ~/.cache, and removed when the session ends
if "AUTOPASS_TRAIN_CACHE" not in os.environ:
    os.environ["AUTOPASS_TRAIN_CACHE"] = tempfile.mkdtemp(prefix="autopass-test-train-cache-")
    atexit.register(shutil.rmtree, os.environ["AUTOPASS_TRAIN_CACHE"], True)
