"""The native launcher (capture/launcher.c) and the wrapper served to it (server.py,
docs/RELIABILITY.md I17): the same behaviour as the Python wrapper, without a Python
start per compile; the Python wrapper whenever there is no server or a call it cannot
take."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import psutil
import pytest
from support import fake_compiler, write

from autopass_build.capture.build_env import apply_environment, record_environment
from autopass_build.capture.server import WrapperServer, folder_free
from autopass_build.store.index import Store

HELLO = "int twice(int x) { return 2 * x; }\n"


def _launcher(env: dict) -> str:
    cc = env["CC"]
    assert os.path.islink(cc) and "autopass-launcher-" in os.readlink(cc), \
        "the launcher was not built: record and apply would start Python per compile"
    return cc


def test_with_a_server_each_compile_is_decided_there(tmp_path, clang):
    root = tmp_path / "p"
    write(root / "a.c", HELLO)
    env = record_environment(str(root / ".autopass"), str(root))
    cc = _launcher(env)
    with WrapperServer() as server:
        env.update(server.env())
        done = subprocess.run([cc, "-O2", "-c", "a.c", "-o", "a.o"], cwd=root, env=env,
                              capture_output=True)
        version = subprocess.run([cc, "--version"], cwd=root, env=env, capture_output=True)
    assert done.returncode == 0 and done.stderr == b""
    assert (server.served, server.handed_back) == (2, 0)
    plain = subprocess.run([clang, "--version"], capture_output=True)
    assert version.stdout == plain.stdout           # a query: the compiler's own bytes
    [unit] = Store.open_existing(str(root / ".autopass")).units()
    assert unit.source_rel == "a.c"


def test_without_a_server_the_python_wrapper_does_it_all(tmp_path, clang):
    """A tree configured under autopass keeps $CC by its full path: built later without
    autopass's environment, the launcher finds no server and runs the Python wrapper,
    which passes the command through (or records into a store that is there)."""
    root = tmp_path / "p"
    write(root / "a.c", HELLO)
    cc = _launcher(record_environment(str(root / ".autopass"), str(root)))
    plain_env = {k: v for k, v in os.environ.items() if not k.startswith("AUTOPASS_")}
    done = subprocess.run([cc, "-O2", "-c", "a.c", "-o", "a.o"], cwd=root, env=plain_env,
                          capture_output=True)
    assert done.returncode == 0 and done.stderr == b""
    subprocess.run([clang, "-O2", "-c", "a.c", "-o", "plain.o"], cwd=root, check=True)
    assert (root / "a.o").read_bytes() == (root / "plain.o").read_bytes()
    assert not (root / ".autopass").exists()


@pytest.mark.parametrize("argv, path, answer", [
    (["cc", "-c", "a.c"], "/usr/bin:/bin", True),
    (["./cc", "-c", "a.c"], "/usr/bin", False),                    # argv[0] relative
    (["cc", "-c", "a.c"], "bin:/usr/bin", False),                  # a relative PATH folder
    (["autopass-cc", "../tools/gcc", "-c", "a.c"], "/usr/bin", False),   # a launched one
    (["autopass-cc", "--autopass-store=.autopass", "-c", "a.c"], "/usr/bin", False),
    (["cc", "-c", "src/a.c", "-o", "obj/a.o"], "/usr/bin", True),  # the wrapper's to resolve
    (["autopass-cc", "--autopass-mode=apply", "--autopass-policy=warn", "/usr/bin/cc"],
     "/usr/bin", True),
])
def test_a_call_with_paths_relative_to_its_folder_goes_to_python(argv, path, answer):
    assert folder_free(argv, {"PATH": path}) is answer


def test_a_relative_path_is_handed_back_and_still_built(tmp_path, clang):
    root = tmp_path / "p"
    write(root / "a.c", HELLO)
    env = record_environment(str(root / ".autopass"), str(root))
    cc = _launcher(env)
    with WrapperServer() as server:
        env.update(server.env(), PATH="bin:" + env["PATH"])
        done = subprocess.run([cc, "-O2", "-c", "a.c"], cwd=root, env=env,
                              capture_output=True)
    assert done.returncode == 0, done.stderr
    assert (server.served, server.handed_back) == (0, 1)
    assert len(Store.open_existing(str(root / ".autopass")).units()) == 1


def test_apply_mode_through_the_server_adds_the_tuned_flags(tmp_path, clang):
    root = tmp_path / "p"
    write(root / "a.c", HELLO)
    from autopass_build.capture.applier import compiler_id
    from autopass_build.core.files import hash_file

    db = root / "autopass.flags.json"
    db.write_text('{"schema": 1, "cpu": null, "toolchain": {"compiler": "%s", "target": ""},'
                  ' "entries": {"a.c": {"flags": ["-O1"], "source_hash": "%s"}}}'
                  % (compiler_id(clang), hash_file(str(root / "a.c"))))
    env = apply_environment(str(root), str(db), "error", str(tmp_path / "work"))
    with WrapperServer() as server:
        env.update(server.env())
        done = subprocess.run([_launcher(env), "-O3", "-c", "a.c", "-o", "a.o"], cwd=root,
                              env=env, capture_output=True)
    assert done.returncode == 0, done.stderr
    assert server.served == 1
    subprocess.run([clang, "-O3", "-c", "a.c", "-O1", "-o", "tuned.o"], cwd=root, check=True)
    assert (root / "a.o").read_bytes() == (root / "tuned.o").read_bytes()
    from autopass_build.capture.tally import applied_count, compiles_seen
    assert applied_count(str(tmp_path / "work")) == 1
    assert compiles_seen(str(tmp_path / "work")) == 1


@pytest.mark.parametrize("mode", ["record", "apply"])
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_reaches_the_compile_and_ends_the_launcher_as_it(tmp_path, clang, signum,
                                                                   mode):
    """Ctrl-C (the build's process group) or SIGTERM to the launcher alone, while the
    compiler runs: the compile gets it, no plain compile follows (a killed compile is no
    rejected flag, F15), no object is left, and the launcher dies by that signal."""
    root = tmp_path / "p"
    write(root / "a.c", HELLO)
    log = tmp_path / "calls.log"
    slow = fake_compiler(tmp_path, "slow-clang",
                         f'case "$*" in *--version*) exec "{clang}" "$@";; esac\n'
                         f'echo "$*" >> "{log}"\nexec sleep 30\n')
    db = root / "autopass.flags.json"
    db.write_text('{"schema": 1, "cpu": null, "entries": {"a.c": {"flags": ["-O1"]}}}')
    env = (record_environment(str(root / ".autopass"), str(root)) if mode == "record"
           else apply_environment(str(root), str(db), "apply-anyway", str(tmp_path / "w")))
    with WrapperServer() as server:
        env.update(server.env(), AUTOPASS_CC=slow)
        launched = subprocess.Popen([_launcher(env), "-O2", "-c", "a.c", "-o", "a.o"],
                                    cwd=root, env=env, start_new_session=True)
        sleeper = _child_named(launched.pid, "sleep")
        if signum == signal.SIGINT:
            os.killpg(launched.pid, signum)
        else:
            os.kill(launched.pid, signum)
        assert launched.wait(timeout=20) == -signum
    assert server.served == 1
    assert not sleeper.is_running() or sleeper.status() == psutil.STATUS_ZOMBIE
    assert not (root / "a.o").exists()
    assert len(log.read_text().splitlines()) == 1       # no second compile


def _child_named(pid: int, name: str) -> psutil.Process:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        for child in psutil.Process(pid).children(recursive=True):
            if child.name() == name:
                return child
        time.sleep(0.05)
    raise AssertionError(f"no {name} under {pid}")


def test_the_launcher_is_built_once_per_source(tmp_path):
    from autopass_build.capture.build_env import native_launcher, wrapper_dir

    folder = wrapper_dir(str(tmp_path))
    first = native_launcher(folder)
    assert first is not None and first == native_launcher(folder)
    assert Path(folder, first).stat().st_mode & 0o111
