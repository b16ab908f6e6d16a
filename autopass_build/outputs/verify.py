"""`autopass verify`: the tuned build through the user's own build system, checked.

Three clean builds of [build].command: one plain (no database), two in apply mode.  The
two tuned binaries must be bit-identical (a reproducible release build); then the
tuned binary is measured against the plain one, interleaved, with the configured
statistics -- the speedup the user actually gets, with its interval.  The tree is left
with the tuned build.

A binary that loads the project's own shared libraries (libtool's xz and liblzma.so)
is copied with them, and each side runs with its own copies first on LD_LIBRARY_PATH:
run where it was built, it would load whatever the system has installed under that
name, and both sides would measure the same library.
"""

from __future__ import annotations

import itertools
import os
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, replace

from autopass_build.capture.apply import applier
from autopass_build.capture.apply.tally import applied_count, not_applied
from autopass_build.capture.build_env import apply_environment, for_debian_packaging
from autopass_build.capture.record import unseen
from autopass_build.capture.server import serving
from autopass_build.config import Config
from autopass_build.core import flags_db
from autopass_build.core.apply_terms import ApplyPolicy
from autopass_build.core.errors import AutopassError
from autopass_build.core.files import fail_if_no_room, moved
from autopass_build.core.plural import counted
from autopass_build.measuring.benchmark import Benchmark
from autopass_build.measuring.binaries import alias_soname
from autopass_build.measuring.measure import Comparison, Progress, compare
from autopass_build.outputs import tree_snapshot
from autopass_build.outputs.tree_snapshot import Snapshot


class VerifyError(AutopassError):
    pass


@dataclass
class Verification:
    identical: bool
    plain: str              # copies of the binaries that were compared
    tuned: str
    comparison: Comparison | None
    libraries: int = 0      # project shared libraries copied with each side
    why_different: str = ""  # where the two tuned builds differ, and the likely cause
    not_applied: tuple[str, ...] = ()   # what of the database the tuned builds lacked


@dataclass(frozen=True)
class VerifyJob:
    """`verify` with its arguments, as one picklable callable: run here, or on a cluster
    node (cluster/on_target.py), there `moved` into the node's own copy of the tree."""
    config: Config
    binary: str
    db: str
    root: str
    measure: bool = True
    libraries: tuple[str, ...] = ()
    library_folders: tuple[str, ...] = ()
    scratch: str = ""
    policy: ApplyPolicy = ApplyPolicy.WARN

    def __call__(self, progress: Progress) -> Verification:
        return verify(self.config, self.binary, self.db, self.root, progress, self.measure,
                      self.libraries, self.library_folders, self.scratch, self.policy)

    def moved(self, here: str) -> VerifyJob:
        """This job on a copy of the tree at `here`: every path under the root, there."""
        def at(path: str) -> str:
            return moved(path, self.root, here)

        return replace(self, config=self.config.moved(self.root, here), binary=at(self.binary),
                       db=at(self.db), root=here, libraries=tuple(map(at, self.libraries)),
                       library_folders=tuple(map(at, self.library_folders)),
                       scratch=at(self.scratch) if self.scratch else "")


def _build(config: Config, env: dict[str, str], folder: str, progress: Progress,
           snapshot: Snapshot | None = None) -> None:
    """Clean, then build; after the clean, `snapshot` keeps only what the clean deleted."""
    for what, key, command in (("clean", "clean", config.build.clean),
                               ("build", "command", config.build.command)):
        if what == "build" and snapshot is not None:
            tree_snapshot.keep_deleted_only(snapshot)
        progress(f"{what}: {' '.join(command)}")
        done = subprocess.run(list(command), cwd=folder, env=env, capture_output=True)
        if done.returncode != 0:
            said = done.stderr.decode("utf-8", "replace")
            fail_if_no_room(said, folder)        # not the command's fault: said as such
            tail = said.strip().splitlines()[-3:]
            raise VerifyError(f"[build].{key} failed ({done.returncode}): " + " | ".join(tail)
                              + f"; set [build].{key} in {config.path or 'autopass.toml'} to "
                              + ("the command that brings the tree back to clean"
                                 if what == "clean" else "the command that builds the "
                                 "program from a tree that [build].clean cleaned"))


def verify(config: Config, binary: str, db: str, root: str, progress: Progress,
           measure: bool = True, libraries: tuple[str, ...] = (),
           library_folders: tuple[str, ...] = (), scratch: str = "",
           policy: ApplyPolicy = ApplyPolicy.WARN) -> Verification:
    """`root`: the project root the database's paths are relative to (the record root);
    `libraries`: the project's shared libraries `binary` loads, as built;
    `library_folders`: where the prebuilt ones it loads are; `scratch`: a folder on the
    tree's file system (the store) that keeps the files [build].clean deletes."""
    missing = [f"[build].{key}" for key, value in (("command", config.build.command),
                                                    ("clean", config.build.clean)) if not value]
    if missing:
        raise VerifyError(f"verify rebuilds from scratch: set {' and '.join(missing)} in "
                          f"{config.path or 'autopass.toml'}, e.g. command = \"make -j2\", "
                          "clean = \"make clean\"")
    if not os.path.isfile(db):   # else three builds and a measurement of plain against plain
        raise VerifyError(f"nothing to verify: {db} does not exist; `autopass tune` writes "
                          "it (or set [tune].flags_db to the database to verify)")
    folder = config.resolve(config.build.root)
    has_content = flags_db.applies_anything(applier.load(db)[0])
    keep = tempfile.mkdtemp(prefix="autopass-verify-")
    copies = []
    lacking: list[str] = []
    snapshot = _snapshot(folder, scratch, progress)
    try:
        for i, database in enumerate([os.path.join(keep, "none.json"), db, db]):
            work = os.path.join(keep, f"w{i}")
            env = apply_environment(root, database, policy if i else ApplyPolicy.WARN, work)
            packaging = for_debian_packaging(list(config.build.command), env)
            if packaging and i == 0:
                progress(packaging)
            started = time.time()
            with serving(env):
                _build(config, env, folder, progress, snapshot if i == 0 else None)
            if i == 1 and has_content and not applied_count(work):   # plain vs plain
                raise VerifyError("the tuned build took none of the tuned flags: "
                                  + unseen.advice(folder, started, "verify"))
            if i:
                lacking += not_applied(work)
            side = os.path.join(keep, f"b{i}")     # equal-length paths on every side
            copies.append(_copy_side(side, binary, libraries))
        different = [name for name in sorted(os.listdir(copies[1])) if not _same_bytes(
            os.path.join(copies[1], name), os.path.join(copies[2], name))]
        why = difference(os.path.join(copies[1], different[0]),
                         os.path.join(copies[2], different[0])) if different else ""
        comparison = None
        if measure:
            progress("measuring the tuned build against the plain one")
            plain, tuned = (_run_of(side, binary, libraries, library_folders)
                            for side in copies[:2])
            comparison = compare(Benchmark.from_config(config), *plain, *tuned, progress)
        return Verification(not different, copies[0], copies[1], comparison, len(libraries),
                            why, tuple(dict.fromkeys(lacking)))
    finally:
        shutil.rmtree(keep, ignore_errors=True)
        _restore(snapshot, progress)


def _snapshot(tree: str, scratch: str, progress: Progress) -> Snapshot | None:
    if not scratch:
        return None
    for leftover in tree_snapshot.leftovers(tree, scratch):   # a verify killed midway
        _restore(leftover, progress)
    try:
        return tree_snapshot.take(tree, scratch)
    except tree_snapshot.SnapshotError as error:
        progress(f"files [build].clean deletes and the build does not make again will "
                 f"not be put back: {error}")
        return None


def _restore(snapshot: Snapshot | None, progress: Progress) -> None:
    if snapshot is None:
        return
    put_back = tree_snapshot.restore(snapshot)
    if put_back:
        shown = ", ".join(put_back[:5]) + (", ..." if len(put_back) > 5 else "")
        progress(f"put back {counted(len(put_back), 'file')} that [build].clean deleted and "
                 f"the build did not make again: {shown}")


def _copy_side(side: str, binary: str, libraries: tuple[str, ...]) -> str:
    """The binary and the libraries it loads, copied into `side` as this build made them."""
    os.makedirs(side)
    for path in (binary, *libraries):
        if not os.path.isfile(path):
            raise VerifyError(f"the build did not produce {path}")
        copy = os.path.join(side, os.path.basename(path))
        shutil.copy2(path, copy)
        if path != binary:
            alias_soname(copy)
    return side


def _run_of(side: str, binary: str, libraries: tuple[str, ...],
            library_folders: tuple[str, ...]) -> tuple[str, dict[str, str]]:
    path = os.pathsep.join(([side] if libraries else []) + list(library_folders))
    return os.path.join(side, os.path.basename(binary)), {"LD_LIBRARY_PATH": path} if path else {}


def _same_bytes(a: str, b: str) -> bool:
    if os.path.islink(a) or os.path.islink(b):   # the soname aliases
        return os.readlink(a) == os.readlink(b)
    with open(a, "rb") as first, open(b, "rb") as second:
        return first.read() == second.read()


# A date or a time as builds embed them: __DATE__ ("Dec  3 2026"), __TIME__ ("00:30:49"),
# a build stamp ("2026-12-03 00:30:49 UTC", busybox's banner).
_STAMP = re.compile(rb"(?:19|20)\d\d-\d\d-\d\d|\d\d:\d\d:\d\d|"
                    rb"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) [ \d]\d (?:19|20)\d\d")


def difference(a: str, b: str) -> str:
    """Where two builds of one binary differ, said for the user: when a differing byte
    lies in text that is a date or a time, the cause and the fix (most builds that differ
    embed the time they were built); else the first differing byte, its ELF section and
    the text around it.  (The build ID differs too, but only as a digest of the rest.)"""
    with open(a, "rb") as handle:
        first = handle.read()
    with open(b, "rb") as handle:
        second = handle.read()
    if first == second:
        return ""
    name = os.path.basename(a)
    # the first 10,000 differing bytes at most: two builds may differ almost everywhere
    at = list(itertools.islice((i for i, (x, y) in enumerate(zip(first, second)) if x != y),
                               10000)) or [min(len(first), len(second))]
    for i in at:
        text = _printable_around(first, i)
        if _STAMP.search(text):
            shown = text.decode("ascii", "replace")[:80]
            return (f"{name} differs where the build wrote the time it ran ({shown!r}): "
                    "builds that embed it differ every time, with or without autopass; set "
                    "SOURCE_DATE_EPOCH (e.g. `SOURCE_DATE_EPOCH=$(git log -1 --format=%ct)`, "
                    "or any fixed number) in the build's environment, which clang's "
                    "__DATE__ and __TIME__ and most build scripts honour")
    text = _printable_around(first, at[0])
    section = _section_at(a, at[0])
    return (f"{name} first differs at byte {at[0]} of {len(first)}"
            + (f" (section {section})" if section else "")
            + (f", in the text {text.decode('ascii', 'replace')[:60]!r}" if len(text) >= 4
               else ""))


def _section_at(path: str, offset: int) -> str:
    """The name of the ELF section holding file offset `offset` ("" if none, not ELF)."""
    from elftools.common.exceptions import ELFError
    from elftools.elf.elffile import ELFFile

    try:
        with open(path, "rb") as handle:
            for section in ELFFile(handle).iter_sections():
                start, size = section["sh_offset"], section["sh_size"]
                if section["sh_type"] != "SHT_NOBITS" and start <= offset < start + size:
                    return section.name
    except (OSError, ELFError, ValueError):
        return ""
    return ""


def _printable_around(data: bytes, at: int) -> bytes:
    """The run of printable ASCII that holds byte `at` (empty when that byte is not)."""
    def printable(c: int) -> bool:
        return 32 <= c < 127
    start = at
    while start > 0 and printable(data[start - 1]) and at - start < 200:
        start -= 1
    end = at
    while end < len(data) and printable(data[end]) and end - at < 200:
        end += 1
    return data[start:end]
