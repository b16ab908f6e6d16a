"""The binary a benchmark run starts: a copy without debug info for valgrind, one
stable name for the whole process, whichever folder the baseline or a candidate was
built in, and the name the loader looks for beside a shared library it loads."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import time

from autopass_build.core import proc


def debugless_copy(exe: str, folder: str) -> str:
    """A copy of `exe` without debug info, for valgrind: valgrind 3.19 gives up on the
    DWARF 5 that clang 19 writes with -g.  Same code, same instruction count."""
    out = os.path.join(folder, os.path.basename(exe))
    # GNU strip last: llvm-strip 19 refuses static binaries ("Link field value 39 in
    # section .rela.plt is not a symbol table": minisat's, linked with --static).
    for name in ("llvm-strip-19", "llvm-strip", "strip"):
        strip = shutil.which(name)
        if strip is None:
            continue
        done = proc.run_captured([strip, "--strip-debug", "-o", out, exe], folder,
                                 timeout=120)
        if done.status == 0 and os.path.exists(out):
            return out
    return exe


_stable_folder: list[str] = []   # this process's folder of stable names (see stable_name)


SLOTS = ("a", "b")   # two runs at once (a duet) need two names, of one length


def stable_name(exe: str, slot: str = SLOTS[0]) -> str:
    """`exe` under one path for the whole process: a symbolic link of its own file name
    in this process's folder.  The baseline and each candidate live in folders of their
    own, and a program that prints its argv[0] (gperf's "Command-line:" comment) would
    differ from the baseline in its output for that alone; the dynamic loader resolves
    the link, so $ORIGIN and /proc/self/exe still name the real file.  The second
    `slot` is for the partner of a duet: a path of the same length (argv and the
    environment's size shift the stack, and with it the run time)."""
    if not _stable_folder:
        _sweep_stable_folders()
        folder = tempfile.mkdtemp(prefix=f"{STABLE_PREFIX}{os.getpid()}-")
        atexit.register(shutil.rmtree, folder, True)
        for name in SLOTS:
            os.mkdir(os.path.join(folder, name))
        _stable_folder.append(folder)
    link = os.path.join(_stable_folder[0], slot, os.path.basename(exe))
    fresh = link + ".new"
    if os.path.lexists(fresh):
        os.unlink(fresh)
    os.symlink(os.path.abspath(exe), fresh)
    os.replace(fresh, link)
    return link


STABLE_PREFIX = "autopass-exe-"


def _sweep_stable_folders() -> None:
    """The stable-name folders of processes that are gone: one killed (kill -9, a
    cluster node's bench ended by Ray) never ran its exit handler, and left its folder
    in $TMPDIR, one a run.  Each folder names its process; ours, a live one's and one
    used within SWEEP_AFTER_S stay."""
    top = tempfile.gettempdir()
    try:
        names = os.listdir(top)
    except OSError:
        return
    for name in names:
        pid = name[len(STABLE_PREFIX):].split("-", 1)[0]
        if not (name.startswith(STABLE_PREFIX) and pid.isdigit()) or proc.alive(int(pid)):
            continue
        path = os.path.join(top, name)
        try:
            if os.lstat(path).st_uid == os.getuid() and _untouched_for(path, SWEEP_AFTER_S):
                shutil.rmtree(path, ignore_errors=True)
        except OSError:
            pass


# A folder is swept only when nothing in it changed for this long: a process of another
# PID namespace sharing $TMPDIR (a container's) looks gone from here, and its runs
# replace their links every run.
SWEEP_AFTER_S = 24 * 3600


def _untouched_for(folder: str, seconds: float) -> bool:
    newest = max(os.lstat(os.path.join(folder, part)).st_mtime
                 for part in ("", *os.listdir(folder)))
    return time.time() - newest > seconds


def alias_soname(path: str) -> None:
    """Beside a shared library, the name the loader looks for (its DT_SONAME) when the
    file has another (libtool links liblzma.so.5.4.1, the loader opens liblzma.so.5),
    so that LD_LIBRARY_PATH=<its folder> finds it."""
    soname = _soname(path)
    if soname and soname != os.path.basename(path):
        alias = os.path.join(os.path.dirname(path), soname)
        if not os.path.lexists(alias):
            os.symlink(os.path.basename(path), alias)


def _soname(path: str) -> str | None:
    from elftools.elf.dynamic import DynamicSection
    from elftools.elf.elffile import ELFFile

    with open(path, "rb") as handle:
        for section in ELFFile(handle).iter_sections():
            if isinstance(section, DynamicSection):
                for tag in section.iter_tags():
                    if tag.entry.d_tag == "DT_SONAME":
                        return str(getattr(tag, "soname"))   # set by pyelftools per tag
    return None


def build_id(path: str) -> str | None:
    """The linker's build ID of an ELF file (NT_GNU_BUILD_ID), which `strip` and
    `objcopy` keep: a stripped copy of a binary has its original's.  None when the file
    is not ELF, cannot be read, or has none."""
    from elftools.common.exceptions import ELFError
    from elftools.elf.elffile import ELFFile
    from elftools.elf.sections import NoteSection

    try:
        with open(path, "rb") as handle:
            for section in ELFFile(handle).iter_sections():
                if isinstance(section, NoteSection):
                    for note in section.iter_notes():
                        if note["n_type"] == "NT_GNU_BUILD_ID":
                            return str(note["n_desc"])
    except (OSError, ELFError, ValueError):
        return None
    return None
