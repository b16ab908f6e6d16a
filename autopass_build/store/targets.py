"""Which recorded units each linked binary is made of.

A link's inputs were hashed when it ran: objects match units by object hash, archive
members match units by the hash of their bytes, and sources compiled in the link call
itself are units already.  Inputs that match nothing (assembler objects, prebuilt
objects) are listed as such, so a reader sees exactly what autopass can tune.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field

from autopass_build.core import plural
from autopass_build.core.files import relative_to
from autopass_build.core.stage_flags import strips_all
from autopass_build.store.build_records import LinkRecord, UnitRecord
from autopass_build.store.index import Store


@dataclass
class Target:
    output: str
    output_rel: str
    kind: str
    units: list[str] = field(default_factory=list)          # unit ids, link order
    unit_sources: list[str] = field(default_factory=list)   # their source_rel
    shared_libraries: list[str] = field(default_factory=list)
    unmatched: list[str] = field(default_factory=list)      # inputs with no unit
    archives: list[str] = field(default_factory=list)
    # Units of the project's shared libraries this binary loads (recursively): they run
    # when it runs, so they are tuned with it.
    loaded_units: list[str] = field(default_factory=list)
    # Those libraries as built (absolute paths): what a run of the binary must find first.
    loaded_libraries: list[str] = field(default_factory=list)
    # Each of those libraries' own units, link order (a binary keeps one copy of a C++
    # inline function: see `unit_groups`).
    library_units: list[list[str]] = field(default_factory=list)
    strips: bool = False      # linked with -s: no symbol table (core/stage_flags.STRIP_ALL)

    def prebuilt_library_folders(self, root: str) -> list[str]:
        """The folders of the prebuilt shared libraries in the project tree this binary
        links (see `prebuilt_library_folders`)."""
        return prebuilt_library_folders((os.path.join(root, p) for p in self.shared_libraries),
                                        self.loaded_libraries, root)

    def runtime_units(self) -> list[str]:
        return self.units + [u for u in self.loaded_units if u not in self.units]

    def unit_groups(self) -> list[tuple[str, list[str]]]:
        """`runtime_units` by the binary that links them, (its path, its units in link
        order): this one, then each loaded library (each unit once, where it first
        comes)."""
        seen = set(self.units)
        groups = [(self.output, list(self.units))]
        for library, units in zip(self.loaded_libraries, self.library_units):
            groups.append((library, [u for u in units if u not in seen]))
            seen.update(units)
        return [(binary, units) for binary, units in groups if units]

    def to_json(self) -> dict:
        return asdict(self)


class ObjectIndex:
    """Units by the hash of the object they made.  Two units can make the same bytes:
    libtool compiles each source twice (PIC into .libs/, and the default, PIE on Debian's
    clang), and for many sources the objects are identical while their IR is not (a PIE
    module in an LTO link of a shared library makes clang choose local-exec TLS, and the
    link fails: jq).  So the unit whose own output is the path the link named comes
    first; else the newest.  An archive names only its members' file names: see
    `member_folder`."""

    def __init__(self, units: list[UnitRecord]):
        self._by_hash: dict[str, list[UnitRecord]] = {}
        self._per_folder: dict[str, int] = {}
        for unit in sorted(units, key=lambda u: u.recorded_at, reverse=True):
            if unit.object_hash:
                self._by_hash.setdefault(unit.object_hash, []).append(unit)
            if unit.output:
                folder = os.path.dirname(os.path.realpath(unit.output))
                self._per_folder[folder] = self._per_folder.get(folder, 0) + 1

    def member_folder(self, members: list[tuple[str, str]]) -> str:
        """The folder an archive's members were made in: the one holding the most of
        them under their own names, the one with fewest other objects on a tie.  One
        source can be compiled into several folders with identical bytes (libtool's
        `.libs/`, zlib's `objs/`; CMake's `jpeg-static.dir/` and `turbojpeg-static.dir/`
        for libjpeg-turbo, one PIC), and the archive's own folder need not be any of them
        (CMake puts libjpeg.a in the build folder); '' when no unit matches."""
        votes: dict[str, int] = {}
        for name, digest in members:
            for unit in self._by_hash.get(digest, []):
                if unit.output and os.path.basename(unit.output) == os.path.basename(name):
                    folder = os.path.dirname(os.path.realpath(unit.output))
                    votes[folder] = votes.get(folder, 0) + 1
        if not votes:
            return ""
        return max(votes, key=lambda f: (votes[f], -self._per_folder.get(f, 0)))

    def find(self, digest: str | None, path: str = "") -> UnitRecord | None:
        """The unit that made these bytes; `path` is where the link (or, for an archive
        member, the archive's folder and the member's name) says they came from."""
        found = self._by_hash.get(digest or "", [])
        if path:
            wanted = os.path.realpath(path)
            for unit in found:
                if unit.output and os.path.realpath(unit.output) == wanted:
                    return unit
            # Not where the archive's other members were made: the member's own name
            # still tells `x86/cpu_features.o` from its PIC twin `cpu_features.shlib.o`
            # (libdeflate archives lib/x86/ and lib/arm/ objects of one name).
            for unit in found:
                if unit.output and os.path.basename(unit.output) == os.path.basename(path):
                    return unit
        return found[0] if found else None


def prebuilt_library_folders(linked: Iterable[str], built: Iterable[str], root: str
                             ) -> list[str]:
    """The folders of the shared libraries `linked` that lie in the project tree under
    `root` and that no recorded link made (`built`): prebuilt .so files.  A copy of the
    binary run elsewhere finds them there, where an rpath such as $ORIGIN no longer
    leads."""
    made = {os.path.realpath(p) for p in built}
    inside = os.path.realpath(root) + os.sep
    folders: list[str] = []
    for library in linked:
        path = os.path.realpath(library)
        folder = os.path.dirname(path)
        if (path not in made and path.startswith(inside) and os.path.isfile(path)
                and folder not in folders):
            folders.append(folder)
    return folders


def gone(unit: UnitRecord) -> bool:
    """Whether a unit's source and object were both deleted after the build: a configure
    script's probe under a name no rule knows (zlib's ztest$$.c), not part of the
    program.  A `make clean` deletes objects, never sources it did not make (see
    `probes` for those it did)."""
    return not os.path.exists(unit.source) and not (unit.output
                                                    and os.path.exists(unit.output))


def probes(store: Store) -> set[str]:
    """The ids of units that were configure probes: gone (source and object deleted),
    and not linked beside a unit whose source is still there.  A source the build
    generates (a parser from bison) is deleted by `make clean` with its object, but it
    was linked with the rest of the program: not a probe (`units` dropped it as one)."""
    units = {u.id: u for u in store.units()}
    candidates = {uid for uid, u in units.items() if gone(u)}
    if not candidates:
        return set()
    by_object = ObjectIndex(list(units.values()))
    kept: set[str] = set()
    for link in store.links():
        linked = {i.path for i in link.inputs if i.kind == "unit"}
        linked |= {u.id for i in link.inputs if i.kind == "object"
                   for u in [by_object.find(i.hash, i.path)] if u is not None}
        if linked & candidates and any(os.path.exists(units[u].source)
                                       for u in linked - candidates if u in units):
            kept |= linked & candidates
    return candidates - kept


def resolve(store: Store, root: str) -> list[Target]:
    units = store.units()
    by_id = {u.id: u for u in units}
    by_object = ObjectIndex(units)
    links, targets = [], []
    for link in store.links():
        target = _resolve_link(store, link, by_id, by_object, root)
        if not _probe(target, by_id):
            links.append(link)
            targets.append(target)
    _add_loaded_units(targets, links)
    return targets


def _probe(target: Target, by_id: dict[str, UnitRecord]) -> bool:
    """A link whose output and every unit in it are gone: a configure probe (after a
    `make clean` the sources are still there)."""
    return not os.path.exists(target.output) and all(gone(by_id[u]) for u in target.units)


def _add_loaded_units(targets: list[Target], links: list[LinkRecord]) -> None:
    by_output = {os.path.realpath(t.output): t for t in targets}
    shared_of = {os.path.realpath(link.output): [os.path.realpath(i.path) for i in link.inputs
                                                 if i.kind == "shared"] for link in links}

    def loaded(output: str, seen: list[str]) -> list[str]:
        """The project libraries `output` loads, recursively, each once, in `seen`."""
        for lib in shared_of.get(output, []):
            if lib in by_output and lib not in seen:
                seen.append(lib)
                loaded(lib, seen)
        return seen

    for target in targets:
        libraries = loaded(os.path.realpath(target.output), [])
        target.loaded_libraries = [by_output[lib].output for lib in libraries]
        target.library_units = [list(by_output[lib].units) for lib in libraries]
        target.loaded_units = list(dict.fromkeys(u for units in target.library_units
                                                 for u in units))


def _resolve_link(store: Store, link: LinkRecord, by_id: dict[str, UnitRecord],
                  by_object: ObjectIndex, root: str) -> Target:
    target = Target(link.output, relative_to(link.output, root), link.kind,
                    strips=strips_all(link.argv))

    def add(unit: UnitRecord | None, label: str) -> None:
        if unit is None:
            target.unmatched.append(label)
        elif unit.id not in target.units:
            target.units.append(unit.id)
            target.unit_sources.append(unit.source_rel)

    for item in link.inputs:
        if item.kind == "unit":
            add(by_id.get(item.path), item.path)
        elif item.kind == "object":
            add(by_object.find(item.hash, item.path), relative_to(item.path, root))
        elif item.kind == "shared":
            target.shared_libraries.append(relative_to(item.path, root))
        elif item.kind == "archive":
            target.archives.append(relative_to(item.path, root))
            record = store.archive(item.hash or "")
            members = record.members if record else []
            folder = by_object.member_folder(members)
            for name, digest in members:
                add(by_object.find(digest, os.path.join(folder, os.path.basename(name))),
                    f"{relative_to(item.path, root)}({name})")
    return target


SHOWN_EXECUTABLES = 6      # of a long list, in a line: `autopass targets` has them all


def executables_text(targets: list[Target], shown: int = SHOWN_EXECUTABLES) -> str:
    """The executables, the likely benchmark first, each with its unit count: outside a
    test folder before inside one (gnulib's tests/current-locale links more units than
    m4 itself), then the one named as the project (sox in sox-14.4.2/, after whose
    examples it came), then the most units first (busybox's one-file build tools, such
    as applets/usage, after busybox_unstripped's 564).  At most `shown` of them (a
    project of 86 printed them all in one line), then how many more and where they are."""
    counted = [(len(t.runtime_units()), t.output_rel) for t in targets
               if t.kind == "executable"]
    project = _project_name(targets)
    counted.sort(key=lambda c: (_in_tests(c[1]), os.path.basename(c[1]).lower() != project,
                                -c[0], c[1]))
    text = ", ".join(f"{name} ({plural.counted(units, 'unit')})"
                     for units, name in counted[:shown])
    more = len(counted) - shown
    return text + (f" and {more} more (`autopass targets` lists them all)" if more > 0 else "")


def _project_name(targets: list[Target]) -> str:
    """The project's name as its folder says it, without a version: "sox" in
    sox-14.4.2/ (whose examples link as many units as sox itself)."""
    for target in targets:
        if target.output.endswith(target.output_rel):
            root = target.output[:len(target.output) - len(target.output_rel)].rstrip("/")
            return re.sub(r"[-_]v?\d[\w.+~-]*$", "", os.path.basename(root)).lower()
    return ""


_TEST_FOLDERS = frozenset({"t", "test", "tests", "testsuite", "unittests", "gnulib-tests"})


def _in_tests(path: str) -> bool:
    folders = path.split("/")[:-1]
    return any(f.lower() in _TEST_FOLDERS for f in folders) or \
        os.path.basename(path).startswith(("test-", "test_"))
