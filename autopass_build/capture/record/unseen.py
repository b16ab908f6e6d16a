"""After a recording that captured no compile: did the build compile anyway, past the
wrapper, or was there nothing to compile?

CMake and Meson write the compiler's full path into their build files when they
configure; a build folder configured before `autopass record` calls /usr/bin/clang-19
itself, and the compiler names record mode puts first on PATH are never asked.  A build
that was up to date compiles nothing at all.  SCons runs the compiler with a PATH of its
own, not the build's, and ignores $CC.  Each needs a different fix, so `record` looks at
what the build wrote and says which.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from autopass_build.core.plural import counted

OBJECT_SUFFIXES = (".o", ".obj", ".lo")
MAX_FILES = 50_000        # a bounded look: a huge tree is not walked whole for advice
SKIPPED_FOLDERS = frozenset({".autopass", ".git", ".hg", ".svn", "node_modules"})
CONFIGURED_BY = (("CMakeCache.txt", "CMake"), ("build.ninja", "Ninja"),
                 ("meson-info", "Meson"))
SCONS_MARKERS = frozenset({"SConstruct", "Sconstruct", "sconstruct", ".sconsign.dblite"})


@dataclass(frozen=True)
class Unseen:
    objects: int          # object files written since the build started
    example: str          # one of them, relative to the folder looked in
    configured_by: str    # the build system whose configured folder holds them, or ""
    scons: bool = False   # an SCons build: its own PATH for the compiler


def unseen_compiles(folder: str, since: float) -> Unseen | None:
    """Object files under `folder` written at or after `since` (the build compiled past
    the wrapper), or None when there are none (the build was up to date)."""
    count, example, configured_by, seen = 0, "", "", 0
    scons = False
    for current, folders, files in os.walk(folder):
        folders[:] = [f for f in folders if f not in SKIPPED_FOLDERS]
        names = set(files) | set(folders)
        scons = scons or not SCONS_MARKERS.isdisjoint(names)
        for marker, system in CONFIGURED_BY:
            if marker in names and not configured_by:
                configured_by = system
        for name in files:
            seen += 1
            if not name.endswith(OBJECT_SUFFIXES):
                continue
            path = os.path.join(current, name)
            try:
                if os.stat(path).st_mtime >= since:
                    count += 1
                    example = example or os.path.relpath(path, folder)
            except OSError:
                continue
        if seen > MAX_FILES:
            break
    return Unseen(count, example, configured_by, scons) if count else None


def advice(folder: str, since: float, command: str = "record") -> str:
    """One line for a build under `autopass <command>` (record, apply) that no compile
    of went through autopass: why, and what to do."""
    unseen = unseen_compiles(folder, since)
    if unseen is None:
        return ("nothing was compiled: if the build was up to date, clean it first (e.g. "
                f"`make clean`) and run `autopass {command}` again, so that every compile "
                "runs under autopass")
    where, fix = _why_and_fix(unseen, command)
    objects = counted(unseen.objects, "object")
    return (f"the build compiled {objects} (e.g. {unseen.example}) but none "
            f"through autopass{where}: {fix}")


def _why_and_fix(unseen: Unseen, command: str) -> tuple[str, str]:
    """Why the compiles went past the wrapper, as the build shows it, and the fix."""
    if unseen.scons:
        return (" (SCons runs the compiler with a PATH of its own and ignores $CC)",
                "let SConstruct pass the build's environment on: "
                "`env = Environment(ENV=os.environ)`")
    if unseen.configured_by:
        fix = (f"configure the build under `autopass {command}` too, in a fresh folder "
               f"(`autopass {command} -- sh -c \"cmake -S . -B build && ninja -C build\"`),"
               " or pass the compiler as CC=autopass-cc / CXX=autopass-c++")
        if command == "verify":
            fix = ("let [build].command configure a fresh build folder too, and "
                   "[build].clean remove it, so that the compiler it caches is autopass's")
        return (f" (a folder {unseen.configured_by} configured before, which names the "
                "compiler by its full path)", fix)
    # `make CC=/usr/bin/gcc`, or a name that is no compiler's (`CC = mycc`)
    example = ("in [build].command" if command == "verify"
               else f"(`autopass {command} -- make CC=autopass-cc CXX=autopass-c++`)")
    return (" (the build names its compiler by a full path, or by a name autopass does not "
            "stand in for: it answers to cc, gcc, g++, clang, clang++ and their versioned "
            "names)", f"pass the compiler as CC=autopass-cc / CXX=autopass-c++ {example}")
