"""The binary a benchmark run starts: a copy without debug info for valgrind, and one
stable name for the whole process, whichever folder the baseline or a candidate was
built in."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile

from autopass_build.core import proc


def debugless_copy(exe: str, folder: str) -> str:
    """A copy of `exe` without debug info, for valgrind: valgrind 3.19 gives up on the
    DWARF 5 that clang 19 writes with -g.  Same code, same instruction count."""
    strip = shutil.which("llvm-strip-19") or shutil.which("llvm-strip")
    if strip is None:
        return exe
    out = os.path.join(folder, os.path.basename(exe))
    done = proc.run_captured([strip, "--strip-debug", "-o", out, exe], folder, timeout=120)
    return out if done.status == 0 and os.path.exists(out) else exe


_stable_folder: list[str] = []   # this process's folder of stable names (see stable_name)


def stable_name(exe: str) -> str:
    """`exe` under one path for the whole process: a symbolic link of its own file name
    in this process's folder.  The baseline and each candidate live in folders of their
    own, and a program that prints its argv[0] (gperf's "Command-line:" comment) would
    differ from the baseline in its output for that alone; the dynamic loader resolves
    the link, so $ORIGIN and /proc/self/exe still name the real file."""
    if not _stable_folder:
        folder = tempfile.mkdtemp(prefix="autopass-exe-")
        atexit.register(shutil.rmtree, folder, True)
        _stable_folder.append(folder)
    link = os.path.join(_stable_folder[0], os.path.basename(exe))
    fresh = link + ".new"
    if os.path.lexists(fresh):
        os.unlink(fresh)
    os.symlink(os.path.abspath(exe), fresh)
    os.replace(fresh, link)
    return link
