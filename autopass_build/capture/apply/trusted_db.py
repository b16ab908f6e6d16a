"""The flags database as apply mode reads it: refused when untrusted (core/trust.py),
parsed by its one loader (core/flags_db.py), and kept per file version -- in this
process (the wrapper's server decides every compile of a build) and in a marshal file
(a wrapper started once per compile) -- so a build does not parse and check it again
for each compile."""

from __future__ import annotations

import marshal
import os

from autopass_build.core import flags_db
from autopass_build.core.files import hash_bytes, user_cache_dir, write_atomic
from autopass_build.core.flags_db import FlagsDb
from autopass_build.core.trust import refusal


def load(path: str) -> tuple[FlagsDb | None, str]:
    """(database, "") or (None, why it is refused); (None, "") when there is none."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None, ""
    except OSError as error:
        return None, f"cannot read {path}: {error.strerror}"
    why = refusal(path, st, "the flags of every compile")
    if why:
        return None, why
    version = (os.path.abspath(path), st.st_size, st.st_mtime_ns, st.st_ino)
    if version in _LOADED:
        return _LOADED[version]
    try:
        data = _cached(path, st)
        if data is None:
            text = flags_db.read_text(path)
            if text is None:
                return None, ""
            data = flags_db.loads(text, path)
            _remember(path, st, data)
        loaded: tuple[FlagsDb | None, str] = (flags_db.from_json(data, path), "")
    except flags_db.FlagsDbError as error:
        loaded = (None, str(error))
    _LOADED[version] = loaded
    return loaded


# The database as this process read it, by file version: the wrapper's server decides
# every compile of a build in one process, and checking a 390-entry database's flags
# against the allowlist again for each compile cost GEOS's apply build 75 ms a compile.
_LOADED: dict[tuple[str, int, int, int], tuple[FlagsDb | None, str]] = {}


def _cache_file(path: str, st: os.stat_result) -> str:
    key = f"{os.path.abspath(path)}:{st.st_size}:{st.st_mtime_ns}:{st.st_ino}"
    return user_cache_dir("flagsdb", hash_bytes(key.encode()) + ".marshal")


def _cached(path: str, st: os.stat_result):
    """The database as parsed by an earlier compile of this build (keyed by path, size,
    mtime and inode: any edit is a miss), or None."""
    try:
        with open(_cache_file(path, st), "rb") as handle:
            return marshal.load(handle)
    except (OSError, ValueError, EOFError, TypeError):
        return None


def _remember(path: str, st: os.stat_result, data: object) -> None:
    target = _cache_file(path, st)
    try:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        write_atomic(target, marshal.dumps(data))  # type: ignore[arg-type]  # JSON values
    except (OSError, ValueError):
        pass  # only a cache
