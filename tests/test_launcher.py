"""The native launcher (capture/launcher.c) and the wrapper served to it (server.py,
docs/RELIABILITY.md I17, I18): the same behaviour as the Python wrapper, without a Python
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
from autopass_build.core.apply_terms import ApplyPolicy
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


def _a_with_o1(root: Path, clang: str) -> Path:
    """a.c in `root`, and a flags database that gives it -O1."""
    from autopass_build.capture.apply.applier import compiler_id
    from autopass_build.core.files import hash_file

    write(root / "a.c", HELLO)
    db = root / "autopass.flags.json"
    db.write_text('{"schema": 1, "cpu": null, "toolchain": {"compiler": "%s", "target": ""},'
                  ' "entries": {"a.c": {"flags": ["-O1"], "source_hash": "%s"}}}'
                  % (compiler_id(clang), hash_file(str(root / "a.c"))))
    return db


def test_apply_mode_through_the_server_adds_the_tuned_flags(tmp_path, clang):
    root = tmp_path / "p"
    db = _a_with_o1(root, clang)
    env = apply_environment(str(root), str(db), ApplyPolicy.ERROR, str(tmp_path / "work"))
    with WrapperServer() as server:
        env.update(server.env())
        done = subprocess.run([_launcher(env), "-O3", "-c", "a.c", "-o", "a.o"], cwd=root,
                              env=env, capture_output=True)
    assert done.returncode == 0, done.stderr
    assert server.served == 1
    subprocess.run([clang, "-O3", "-c", "a.c", "-O1", "-o", "tuned.o"], cwd=root, check=True)
    assert (root / "a.o").read_bytes() == (root / "tuned.o").read_bytes()
    from autopass_build.capture.apply.tally import applied_count, compiles_seen
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
           else apply_environment(str(root), str(db), ApplyPolicy.APPLY_ANYWAY,
                                     str(tmp_path / "w")))
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
    from autopass_build.capture.build_env import wrapper_dir
    from autopass_build.capture.native_builds import native_launcher

    folder = wrapper_dir(str(tmp_path))
    first = native_launcher(folder)
    assert first is not None and first == native_launcher(folder)
    assert Path(folder, first).stat().st_mode & 0o111


def _on_demand_launcher(tmp_path, idle: str) -> tuple[str, dict, Path]:
    """(CMake's launcher as AutoPass.cmake writes it into a build folder, the environment
    of a build that no autopass process runs, its server's socket)."""
    from support import AUTOPASS_CC

    from autopass_build.capture import on_demand

    env = {k: v for k, v in os.environ.items() if not k.startswith("AUTOPASS_")}
    env["AUTOPASS_SERVER_IDLE"] = idle
    shown = subprocess.run([AUTOPASS_CC, "--autopass-launcher", str(tmp_path / "build")],
                           env=env, capture_output=True, text=True)
    assert shown.returncode == 0, shown.stderr
    launcher = shown.stdout.strip()
    assert Path(launcher).parent == tmp_path / "build"
    assert "autopass-launcher-" in os.readlink(launcher), launcher
    return launcher, env, Path(on_demand.socket_for(str(Path(launcher).parent)))


def _wait_for(what, seconds: float = 30):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = what()
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError(f"waited {seconds} s in vain")


def test_cmake_launcher_calls_are_served_by_a_server_started_on_demand(tmp_path, clang):
    """CMake's launcher form (cmake/AutoPass.cmake) with no autopass process running the
    build: the first call starts a server, detached and holding none of the build's files
    (make and ninja wait for their pipes to close), and goes to the Python wrapper; the
    calls after it are served, each with the tuned flags; the server goes when idle."""
    root = tmp_path / "p"
    db = _a_with_o1(root, clang)
    launcher, env, socket_path = _on_demand_launcher(tmp_path, idle="3")
    log = socket_path.with_suffix(".log")
    cmake_form = [launcher, "--autopass-mode=apply", f"--autopass-root={root}",
                  f"--autopass-db={db}", "--autopass-policy=error", clang, "-O3", "-c", "a.c"]
    first = subprocess.Popen(cmake_form + ["-o", "0.o"], cwd=root, env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert first.wait(timeout=60) == 0
    import select
    readable, _, _ = select.select([first.stdout, first.stderr], [], [], 5)
    assert len(readable) == 2 and first.stdout.read() == b"" and first.stderr.read() == b"", \
        "the build's pipes stay open after its compile: the server inherited them"
    _wait_for(lambda: socket_path.exists() and log.exists() and "serving" in log.read_text())
    for n in (1, 2, 3):
        done = subprocess.run(cmake_form + ["-o", f"{n}.o"], cwd=root, env=env,
                              capture_output=True)
        assert done.returncode == 0, done.stderr
    subprocess.run([clang, "-O3", "-c", "a.c", "-O1", "-o", "tuned.o"], cwd=root, check=True)
    tuned = (root / "tuned.o").read_bytes()
    assert all((root / f"{n}.o").read_bytes() == tuned for n in range(4))
    stopped = _wait_for(lambda: "stopped" in log.read_text() and log.read_text())
    assert "stopped (no call for 3 s) after serving 3 calls" in stopped, stopped
    assert not socket_path.exists()


def test_a_server_killed_while_its_compile_runs_fails_that_call_loudly(tmp_path, clang):
    """F102 (issue 64, case 6): the server killed (kill -9) while the compile it ordered runs.
    The compile runs to its end, its object the tuned compile's; the launcher, which can
    no longer report it (nor let the server tally it), fails the call with a line that
    says why, and the build stops there.  Before, its report to the dead server raised
    SIGPIPE: the call died by a signal, without a word.  The calls after it find no
    server and go to the Python wrapper, which builds them as the server would."""
    root = tmp_path / "p"
    write(root / "a.c", HELLO)
    db = root / "autopass.flags.json"        # -O1 for a.c, whatever compiles it
    from autopass_build.core.files import hash_file
    db.write_text('{"schema": 1, "cpu": null, "entries": {"a.c": {"flags": ["-O1"], '
                  '"source_hash": "%s"}}}' % hash_file(str(root / "a.c")))
    launcher, env, socket_path = _on_demand_launcher(tmp_path, idle="60")
    log = socket_path.with_suffix(".log")
    started = tmp_path / "started"
    slow = fake_compiler(tmp_path, "slow-clang",
                         f'case "$*" in *-c*) touch "{started}"; sleep 2;; esac\n'
                         f'exec "{clang}" "$@"\n')
    cmake_form = [launcher, "--autopass-mode=apply", f"--autopass-root={root}",
                  f"--autopass-db={db}", "--autopass-policy=apply-anyway", slow, "-O3",
                  "-c", "a.c"]
    assert subprocess.run(cmake_form + ["-o", "0.o"], cwd=root, env=env).returncode == 0
    serving = _wait_for(lambda: log.exists() and "serving" in log.read_text()
                        and log.read_text())
    server_pid = int(serving.split("pid ")[1].split()[0])
    started.unlink()        # the first call, the Python wrapper's, compiled too
    call = subprocess.Popen(cmake_form + ["-o", "1.o"], cwd=root, env=env,
                            stderr=subprocess.PIPE)
    _wait_for(started.exists)
    os.kill(server_pid, signal.SIGKILL)
    _, said = call.communicate(timeout=60)
    assert call.returncode > 0, (call.returncode, said)   # an exit status, not SIGPIPE
    assert b"lost the autopass process" in said, said
    subprocess.run([clang, "-O3", "-c", "a.c", "-O1", "-o", "tuned.o"], cwd=root, check=True)
    tuned = (root / "tuned.o").read_bytes()
    assert (root / "1.o").read_bytes() == tuned       # the compile ordered, run whole
    after = subprocess.run(cmake_form + ["-o", "2.o"], cwd=root, env=env,
                           capture_output=True)
    assert after.returncode == 0, after.stderr
    assert (root / "2.o").read_bytes() == tuned


def test_a_server_on_demand_hands_calls_back_once_autopass_changed_under_it(tmp_path,
                                                                          monkeypatch):
    """An upgrade of autopass must not be served by the old code still in memory: the
    first call after the code changed goes to the Python wrapper, and the server goes."""
    import socket
    import threading

    from autopass_build.capture import on_demand
    from autopass_build.capture.server import receive

    monkeypatch.setattr(on_demand, "STAMP_EVERY", 0.0)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(tmp_path / "s"))
    listener.listen(4)
    stamps = iter([(1, 100), (2, 100)])          # the code at start, then upgraded
    demand = on_demand.OnDemand(listener, idle=30, stamp=lambda: next(stamps))
    ended: list[str] = []
    loop = threading.Thread(target=lambda: ended.append(demand.run()))
    loop.start()
    client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    client.connect(str(tmp_path / "s"))
    with client.makefile("rb") as stream:
        assert receive(stream) == [b"python"]
    loop.join(timeout=10)
    assert ended == ["autopass's code changed"] and demand.handed_back == 1


@pytest.mark.skipif(os.getuid() != 0, reason="needs root to run a client as another user")
def test_another_users_call_is_refused_even_where_the_socket_is_reachable(tmp_path) -> None:
    """S6 (issue 64, case 6): the server's socket is in a folder of mode 0700; where that mode
    was widened (or another user reaches it some other way), a call from another user's
    process is closed unanswered and nothing runs for it (the kernel's SO_PEERCRED)."""
    import socket
    import struct

    from autopass_build.capture.server import VERSION, send

    canary = tmp_path / "canary"
    with WrapperServer() as server:
        os.chmod(server.folder, 0o755)
        os.chmod(server.path, 0o777)
        child = os.fork()
        if child == 0:                                    # the other user
            try:
                os.setgroups([])
                os.setgid(65534)
                os.setuid(65534)
                conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                conn.connect(server.path)
                args = [b"-c", b"touch " + os.fsencode(canary)]
                try:
                    send(conn, VERSION, b"/bin/sh", b"/", b"0", str(len(args)).encode(),
                         *args, b"0")
                    answer = conn.recv(4)
                except (ConnectionResetError, BrokenPipeError):
                    answer = b""
                os._exit(0 if answer == b"" else 1)       # closed without a word
            except BaseException as error:
                os.write(2, f"the other user's client: {error!r}\n".encode())
                os._exit(2)
        _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert server.served == 0 and not canary.exists()
    assert struct.calcsize("3i") == 12


def test_a_masquerade_link_to_the_native_launcher_is_autopass_whoever_serves_it(tmp_path):
    """F14 through the per-build server: CMake cached record mode's `clang++-19` link
    (-> autopass-c++ -> the native launcher), and the user's later `ninja` sends the
    call to an on-demand server, whose own paths are not the masquerade's.  The link
    resolves to the launcher's file, which is autopass: taken for the real compiler,
    the compile ran itself and stopped at the recursion guard."""
    from autopass_build.capture.plan import _is_autopass

    masquerade = tmp_path / "wrappers"
    masquerade.mkdir()
    (masquerade / "autopass-launcher-4dd5f6ff48e5").write_bytes(b"\x7fELF")
    (masquerade / "autopass-c++").symlink_to("autopass-launcher-4dd5f6ff48e5")
    (masquerade / "clang++-19").symlink_to("autopass-c++")
    elsewhere = frozenset({str(tmp_path / "b" / "autopass-launcher")})
    assert _is_autopass(str(masquerade / "clang++-19"), elsewhere)
    real = tmp_path / "bin" / "clang++-19"
    real.parent.mkdir()
    real.write_bytes(b"\x7fELF")
    assert not _is_autopass(str(real), elsewhere)
