"""The wrapper's code served on a Unix socket for the length of one build.

A Python start per compile costs 10-25 ms on this machine: 1.12x of Lua's build in apply
mode, whose 34 units compile in 0.15 s each.  So `autopass record`, `apply` and `verify`
keep the wrapper loaded in their own process while the build runs, and the native
launcher (launcher.c), standing where the build finds its compiler, sends each call here
(AUTOPASS_SERVER) and runs what the wrapper decides: `RemoteHost` carries each command
back to it.  One thread per call; the socket lives in a folder only this user can enter.
Anything that goes wrong before a command ran is answered "python": the launcher then
execs the Python wrapper, which does it all itself.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import struct
import tempfile
import threading
import time
from collections.abc import Iterator

from autopass_build.capture.host import Host
from autopass_build.capture.plan import PATH_OPTIONS, looks_like_compiler
from autopass_build.core.errors import AutopassError
from autopass_build.core.names import ENV_SERVER
from autopass_build.core.proc import Finished

VERSION = b"autopass-launcher-1"
END = 0xFFFFFFFF
MAX_FIELD = 1 << 30


class ProtocolError(AutopassError):
    pass


def send(conn: socket.socket, *fields: bytes) -> None:
    parts = []
    for field in fields:
        parts += [struct.pack("<I", len(field)), field]
    parts.append(struct.pack("<I", END))
    conn.sendall(b"".join(parts))


def receive(stream) -> list[bytes]:
    fields: list[bytes] = []
    while True:
        head = stream.read(4)
        if len(head) != 4:
            raise ProtocolError("the launcher went away")
        size, = struct.unpack("<I", head)
        if size == END:
            return fields
        if size > MAX_FIELD:
            raise ProtocolError("a field too large")
        data = stream.read(size)
        if len(data) != size:
            raise ProtocolError("the launcher went away")
        fields.append(data)


def _b(text: str) -> bytes:
    return os.fsencode(text)


def _env_fields(env: dict[str, str]) -> list[bytes]:
    return [_b(str(len(env)))] + [_b(f"{k}={v}") for k, v in env.items()]


class RemoteHost(Host):
    """The launcher at the other end of `conn` runs each command (see launcher.c)."""

    def __init__(self, conn: socket.socket, stream, stderr_is_terminal: bool,
                 said: set[str] | None = None):
        self.conn, self.stream = conn, stream
        self.stderr_is_terminal = stderr_is_terminal
        self.said = said if said is not None else set()   # the build's warnings so far
        self.ran = False          # a command ran: "python" is no longer an answer
        self.last_status = 0      # the status of the last command run
        self.ended = False        # exec was sent: the launcher is the command now

    def _run(self, how: str, path: str, argv: list[str], env: dict[str, str],
             timeout: float | None, fixed_layout: bool = False, stderr_path: str = ""
             ) -> tuple[Finished, bytes, bytes]:
        self.ran = True
        millis = max(1, int(timeout * 1000)) if timeout else 0
        send(self.conn, b"run", how.encode(), str(millis).encode(),
             b"1" if fixed_layout else b"0", _b(stderr_path), _b(path), *_env_fields(env),
             *map(_b, argv))
        reply = receive(self.stream)
        if len(reply) != 5 or reply[0] != b"status":
            raise ProtocolError(f"unexpected answer {reply[:1]!r}")
        self.last_status = int(reply[1])
        return Finished(self.last_status, reply[2] == b"1"), reply[3], reply[4]

    def buffered(self, path, argv, env, fixed_layout=False):
        return self._run("buffered", path, argv, env, None, fixed_layout)

    def inherit(self, path, argv, env):
        return self._run("inherit", path, argv, env, None)[0]

    def quiet(self, path, argv, env, timeout, stderr_path):
        return self._run("quiet", path, argv, env, timeout, stderr_path=stderr_path)[0]

    def write(self, out: bytes = b"", err: bytes = b"") -> None:
        if out or err:
            send(self.conn, b"write", out, err)

    def say(self, text: str) -> None:
        """A warning of ours is said once per build: the same words for every compile
        (another compiler, a stale profile) were hundreds of lines in a large build."""
        if text.startswith("autopass: warning:"):
            if text in self.said:
                return
            self.said.add(text)
        super().say(text)

    def exec(self, path, argv, env) -> int:
        send(self.conn, b"exec", _b(path), *_env_fields(env), *map(_b, argv))
        self.ended = True
        return 0

    def exit_like(self, status: int) -> int:
        return status             # sent as "exit": the launcher raises a signal itself


CALLS_END_SECONDS = 10.0   # how long the build's end waits for calls still being counted


class WrapperServer:
    """`with WrapperServer() as server:` serves while the block runs; `server.env()`
    holds what the build's environment needs."""

    def __init__(self) -> None:
        self.folder = tempfile.mkdtemp(prefix="autopass-server-")   # mode 0700
        self.path = os.path.join(self.folder, "socket")
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(self.path)
        self.listener.listen(64)
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._calls: list[threading.Thread] = []   # one per launcher's call
        self.served = 0            # calls the wrapper decided here
        self.handed_back = 0       # calls answered "python" (the launcher runs it all)
        self.said: set[str] = set()   # warnings said to this build (RemoteHost.say)

    def env(self) -> dict[str, str]:
        return {ENV_SERVER: self.path}

    def __enter__(self) -> "WrapperServer":
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        try:
            self.listener.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.listener.close()
        self._thread.join(timeout=CALLS_END_SECONDS)
        # A call's launcher may have exited on the answer before its thread counted it:
        # the counts are read once the build is over, so the calls finish first.
        deadline = time.monotonic() + CALLS_END_SECONDS
        for call in self._calls:
            call.join(timeout=max(0.0, deadline - time.monotonic()))
        shutil.rmtree(self.folder, ignore_errors=True)

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return                     # closed: the build is over
            call = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            self._calls.append(call)
            call.start()

    def _serve(self, conn: socket.socket) -> None:
        if serve(conn, self.said):
            self.served += 1
        else:
            self.handed_back += 1


# What the wrapper reads as a path before it knows the call's folder: relative values
# would be taken from this process's folder, so such a call goes to the Python wrapper.
PATH_VARIABLES = ("AUTOPASS_STORE", "AUTOPASS_ROOT", "AUTOPASS_FLAGS_DB", "AUTOPASS_CC",
                  "AUTOPASS_CXX", "AUTOPASS_OPT", "AUTOPASS_MASQUERADE_DIR")


def folder_free(argv: list[str], env: dict[str, str]) -> bool:
    """Whether nothing of the call is a path relative to its folder that the wrapper would
    resolve without it: argv[0] and a launcher's compiler (`./cc`), relative folders on
    PATH, the options and variables that name files.  The wrapper resolves sources,
    outputs and response files against the call's folder itself."""
    options = [a.partition("=")[2] for a in argv[1:]
               if a.startswith(PATH_OPTIONS)]
    rest = [a for a in argv[1:] if not a.startswith("--autopass-")]
    launched = rest[:1] if rest and looks_like_compiler(rest[0]) else []
    if any("/" in w and not w.startswith("/") for w in [argv[0], *launched]):
        return False
    if any(value and not value.startswith("/") for value in options):
        return False
    if any(not folder.startswith("/") for folder in env.get("PATH", "").split(":")):
        return False
    return all(env.get(name, "/").startswith("/") for name in PATH_VARIABLES)


@contextlib.contextmanager
def serving(env: dict[str, str]) -> Iterator[None]:
    """Serve the wrapper while the block runs, naming the socket in `env` (the build's
    environment); where no socket can be made, the launchers run the Python wrapper."""
    try:
        server = WrapperServer()
    except OSError:
        yield
        return
    with server:
        env.update(server.env())
        yield


def same_user(conn: socket.socket) -> bool:
    """Whether the process at the other end of `conn` runs as this user (the kernel's
    SO_PEERCRED).  The socket lives in a folder only this user may enter; this holds
    even where that folder's mode was widened."""
    try:
        _, uid, _ = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                                        struct.calcsize("3i")))
    except OSError:
        return False
    return uid == os.getuid()


def serve(conn: socket.socket, said: set[str] | None = None) -> bool:
    """One launcher's call, start to end; False when it was handed back to the Python
    wrapper (answered "python").  `said`: the warnings said to the build so far."""
    from autopass_build.capture import wrapper

    if not same_user(conn):          # never run anything for another user's process
        conn.close()
        return False
    host = None
    with conn, conn.makefile("rb") as stream:
        try:
            call = receive(stream)
            if len(call) < 5 or call[0] != VERSION:
                send(conn, b"python")
                return False
            argv0, cwd, tty = os.fsdecode(call[1]), os.fsdecode(call[2]), call[3] == b"1"
            count = int(call[4])
            args = [os.fsdecode(a) for a in call[5:5 + count]]
            env = dict(os.fsdecode(e).partition("=")[::2] for e in call[6 + count:])
            if not folder_free([argv0] + args, env):
                send(conn, b"python")
                return False
            host = RemoteHost(conn, stream, tty, said)
            code = wrapper.main([argv0] + args, host=host, env=env, cwd=cwd)
            if not host.ended:
                send(conn, b"exit", str(code).encode())
            return True
        except Exception:
            try:
                if host is None or not host.ran:
                    send(conn, b"python")     # the Python wrapper does it all again
                    return False
                if not host.ended:   # our bug after a command ran: its status stands
                    send(conn, b"exit", str(host.last_status).encode())
            except OSError:
                pass
            return True
