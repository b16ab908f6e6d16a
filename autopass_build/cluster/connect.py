"""The one door to a Ray cluster: the address the user gave, or nothing.

Ray's own default (`ray.init()` with no address) starts a new local cluster, or joins
one named by $RAY_ADDRESS; a tuning run does neither: it joins only the address written
in its config or on its command line, and never starts a cluster of its own (one that
would listen on the network)."""

from __future__ import annotations

import logging
import time

from autopass_build.core.errors import AutopassError

SLOT = "autopass_bench"        # a node's benchmark slot: one measurement at a time
CPU_LABEL = "autopass-cpu"     # a node's group, when its operator names it


class ClusterError(AutopassError):
    """A message for the user: the cluster cannot be used as asked."""


def error_line(error: BaseException) -> str:
    """The first line of what Ray (or a node) raised: its messages run to pages."""
    return (str(error).strip().splitlines() or [type(error).__name__])[0][:300]


RAY_MISSING = "a cluster run needs Ray: pip install 'autopass[cluster]'"


def check_reachable(address: str, seconds: float = 5.0) -> None:
    """A named head that does not answer, or no Ray here, said in seconds: Ray itself
    retries for minutes before it gives up.  "auto" is this machine's own cluster: Ray
    looks it up."""
    import importlib.util
    import socket

    if importlib.util.find_spec("ray") is None:     # found without importing it (slow)
        raise ClusterError(RAY_MISSING)
    text = address.strip()
    if text == "auto":
        return
    host, _, port = text.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        raise ClusterError(f"cluster address {address!r}: write it as HOST:PORT (the head's "
                           "GCS, e.g. head:6379), ray://HOST:PORT (Ray client, e.g. "
                           "ray://head:10001) or auto")
    try:
        answer = _grpc_hello(socket.create_connection((host, int(port)), timeout=seconds),
                             seconds)
    except OSError as error:
        raise ClusterError(f"cannot reach the cluster at {address!r} "
                           f"({error.strerror or error}): start it with `ray start --head` "
                           "on its head node, or fix the address") from None
    if not answer:
        raise ClusterError(f"{address!r} is not a Ray cluster: something listens there, but "
                           f"it did not answer as Ray's head does (gRPC) within {seconds:g} s; "
                           "fix the address (the head's GCS port, 6379 by default, or "
                           "ray://HOST:10001 for Ray client)")


# HTTP/2's client preface and an empty SETTINGS frame: what a gRPC client sends first.
# Ray's head (its GCS, or the Ray client server) is a gRPC server, and answers with a
# SETTINGS frame of its own.  Anything else listening on the port (a web server, a
# database, a plain TCP listener) does not, and ray.init would wait minutes for it,
# deaf to SIGTERM.
GRPC_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"
SETTINGS_FRAME = 0x04


def _grpc_hello(connection, seconds: float) -> bool:
    """Whether the server on `connection` answers the preface with an HTTP/2 SETTINGS
    frame within `seconds`; the connection is closed."""
    with connection:
        connection.settimeout(seconds)
        try:
            connection.sendall(GRPC_PREFACE)
            head = b""
            while len(head) < 9:
                more = connection.recv(9 - len(head))
                if not more:
                    return False
                head += more
        except OSError:
            return False
    return head[3] == SETTINGS_FRAME


def join(address: str):
    """The `ray` module, connected to the cluster at `address` (a "ray://host:10001"
    client address, a "host:6379" head address, or "auto" for a cluster this machine
    already belongs to).  Raises ClusterError with the fix."""
    if not address.strip():
        raise ClusterError("no cluster address: name one with --cluster ADDRESS or "
                           "[cluster].address (autopass never starts a cluster itself)")
    try:
        import ray
    except ImportError:
        raise ClusterError(RAY_MISSING) from None
    if ray.is_initialized():
        return ray
    check_reachable(address)
    client = address.strip().startswith("ray://")
    for attempt in range(1, (CLIENT_ATTEMPTS if client else 1) + 1):
        try:
            # a Ray client connection streams the server's own log, whose warnings are
            # about the server ("SIGTERM handler is not set ..."), not the run
            ray.init(address=address.strip(), log_to_driver=False, configure_logging=True,
                     logging_level=logging.ERROR if client else logging.WARNING)
            return ray
        except Exception as error:   # Ray raises ConnectionError, RuntimeError, ValueError
            if attempt < CLIENT_ATTEMPTS and client and "Initialization failure" in str(error):
                time.sleep(attempt)
                continue
            raise ClusterError(f"cannot join the cluster at {address!r} "
                               f"({error_line(error)[:200]}): start "
                               "it with `ray start --head` on its head node, or fix the "
                               "address") from None
    return ray


# Ray client's head starts a server process per connection, and that start fails now
# and then ("Initialization failure from server"): the forked process dies in gRPC,
# seen in one connection of four on a busy 2-core machine.  A new connection gets a
# new process.
CLIENT_ATTEMPTS = 3


def leave() -> None:
    """Disconnect (the cluster keeps running; it is the user's)."""
    import sys

    ray = sys.modules.get("ray")
    if ray is not None and ray.is_initialized():
        ray.shutdown()

