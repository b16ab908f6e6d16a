"""Hashing, atomic writes and canonical JSON: the file primitives every layer shares.

Imported by the compiler wrapper in every compile, so it stays cheap: no `hashlib`
(it loads OpenSSL), no `json` (it imports `re`).
"""

from __future__ import annotations

import os
from _json import encode_basestring_ascii

try:  # the C module directly: `hashlib` loads OpenSSL, milliseconds per compile
    from _blake2 import blake2b
except ImportError:  # pragma: no cover - CPython always has it
    from hashlib import blake2b


def hash_bytes(data: bytes) -> str:
    return blake2b(data, digest_size=20).hexdigest()


def hash_file(path: str) -> str:
    digest = blake2b(digest_size=20)
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def to_json(value: object) -> str:
    """JSON for dicts, lists, strings, numbers, booleans and None (stdlib `json` reads it).

    Strings are ASCII-escaped, so surrogate-escaped bytes of non-UTF-8 paths
    round-trip through `json.loads`.
    """
    if isinstance(value, str):
        return encode_basestring_ascii(value)
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, dict):
        return "{" + ",".join(f"{encode_basestring_ascii(k)}:{to_json(v)}"
                              for k, v in sorted(value.items())) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(to_json(v) for v in value) + "]"
    raise TypeError(f"cannot encode {type(value).__name__} as JSON")


def hash_json(value: object) -> str:
    return hash_bytes(to_json(value).encode())


def write_atomic(path: str, data: bytes, durable: bool = False) -> None:
    """Replace `path` with `data` all at once: a crash leaves the old file or the new
    one.  `durable` also fsyncs before the rename (journals, the flags database)."""
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        with open(tmp, "wb") as handle:
            handle.write(data)
            if durable:
                handle.flush()
                os.fsync(handle.fileno())
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def user_cache_dir(*parts: str) -> str:
    """$XDG_CACHE_HOME/autopass/... (default ~/.cache): caches that outlive a store."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "autopass", *parts)


def relative_to(path: str, root: str) -> str:
    """`path` relative to `root`, or unchanged (absolute) when it lies outside it."""
    rel = os.path.relpath(path, root)
    return path if rel.startswith("..") else rel


def moved(path: str, root: str, here: str) -> str:
    """`path` (absolute) in a copy of the tree `root` at `here`; a path outside the tree
    is kept as it is (os.path.join keeps an absolute second part)."""
    return os.path.normpath(os.path.join(here, relative_to(path, root)))


def copy_atomic(source: str, path: str, metadata: bool = False) -> None:
    """`path` replaced by a copy of `source` all at once: a copy cut short (a full disk,
    a signal) never bears the name, and the file it would replace is kept.  `metadata`:
    its mode and times too (a program put back)."""
    import shutil

    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        (shutil.copy2 if metadata else shutil.copyfile)(source, tmp)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def out_of_space(error: OSError) -> bool:
    """Whether `error` is a write that found no room: the disk full, or a quota spent."""
    import errno

    return error.errno in (errno.ENOSPC, errno.EDQUOT)


NO_SPACE_SAID = "No space left on device"     # strerror(ENOSPC), as tools print it


def fail_if_no_room(said: str, folder: str) -> None:
    """A tool that failed (a compile, a link, BOLT) saying it found no room (`said`: its
    error output), or with `folder`'s disk full: an OSError(ENOSPC), which stops a run
    resumably, instead of a verdict on what was built (a candidate is not "failed"
    because the disk was full)."""
    import errno

    if NO_SPACE_SAID in said or disk_full(folder):
        raise OSError(errno.ENOSPC, NO_SPACE_SAID, folder)


def disk_full(folder: str) -> bool:
    """Whether the file system of `folder` has less than a megabyte left (what a failed
    write is then said to be: a full disk, not the write's own words)."""
    try:
        st = os.statvfs(folder)
    except OSError:
        return False
    return st.f_bavail * st.f_frsize < (1 << 20)
