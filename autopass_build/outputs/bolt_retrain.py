"""`apply --train`'s BOLT step: the linked target, and each project shared library BOLT
rewrote in tuning, trained on today's build and rewritten in place.

    the target and its libraries, as linked (kept aside) ──llvm-bolt -instrument──▶
    copies in a scratch folder (libraries found first through LD_LIBRARY_PATH, by their
    sonames) ──one training run──▶ one profile per binary, merged, counts rounded
    (held to the last ones, steady_counts) ──llvm-bolt──▶ each binary in the tree rewritten; the program's profile also as YAML,
    for later builds by stale-profile inference

A binary whose training wrote nothing is left as linked.  Any failure, or a benchmark
output that the rewritten binaries change, puts every binary back as linked.
"""

from __future__ import annotations

import glob
import os
import shutil
from collections.abc import Callable

from autopass_build.candidates import training
from autopass_build.candidates.steady_counts import round_fdata
from autopass_build.core import bolt_commands as bolt
from autopass_build.core.errors import AutopassError
from autopass_build.core.files import copy_atomic, disk_full, hash_file
from autopass_build.core.flags_db import BoltLibrary, ProfileRef, TargetStages
from autopass_build.measuring.benchmark import Benchmark
from autopass_build.measuring.binaries import alias_soname

TRAINED_BOLT = "autopass.trained.fdata"
TRAINED_BOLT_STALE = "autopass.trained.bolt.yaml"
TRAINED_LIBRARY = "autopass.trained.{name}.fdata"


class BoltUntrained(AutopassError):
    """Why BOLT was not retrained: every binary is as linked."""


class BoltRetrain:
    def __init__(self, target: TargetStages, root: str, folder: str, bench: Benchmark,
                 show: Callable[[str], None],
                 held_to: dict[str, list[tuple[str, str]]] | None = None):
        self.target, self.root, self.folder = target, root, folder
        # profile name -> (a profile its counts may hold to, the fingerprint of its binary)
        self.held_to = held_to or {}
        self.bench, self.show = bench, show
        self.binary = os.path.join(root, target.output)
        self.libraries = [(library, os.path.join(root, library.output))
                          for library in target.bolt_libraries
                          if os.path.isfile(os.path.join(root, library.output))]

    def run(self, scratch: str, differs: Callable[[], str]) -> TargetStages:
        """The target's stages with the fresh profiles; the binaries rewritten in the
        tree.  `differs`: "" when the program's benchmark output is still the
        reference's.  BoltUntrained (all put back) when it cannot be done."""
        missing = bolt.missing()
        if missing:
            raise BoltUntrained(missing)
        linked = os.path.join(scratch, "linked")
        os.makedirs(linked)
        everything = [self.binary] + [path for _, path in self.libraries]
        kept = {path: os.path.join(linked, f"{index}-{os.path.basename(path)}")
                for index, path in enumerate(everything)}
        for path, copy in kept.items():
            shutil.copy2(path, copy)
        try:
            return self._retrained(scratch, kept, differs)
        except (bolt.BoltError, training.TrainingError, OSError, BoltUntrained) as error:
            said = _disk_words(error, self.folder) if isinstance(error, OSError) \
                else str(error)
            raise BoltUntrained(said + _put_back(kept)) from None

    def _retrained(self, scratch: str, kept: dict[str, str], differs) -> TargetStages:
        self._train(scratch, kept)
        program = self._kept(scratch, "prof.", TRAINED_BOLT, kept[self.binary])
        if program is None:
            raise BoltUntrained("the BOLT training run wrote no profile")
        yaml = os.path.join(self.folder, TRAINED_BOLT_STALE)
        bolt.to_yaml(kept[self.binary], program, yaml)
        self.show(f"BOLT: rewriting {self.target.output} with its profile")
        bolt.optimize(kept[self.binary], program, self.binary)
        libraries = []
        for index, (library, path) in enumerate(self.libraries):
            name = TRAINED_LIBRARY.format(name=os.path.basename(path))
            profile = self._kept(scratch, f"lib{index}-", name, kept[path])
            if profile is None:
                self.show(f"BOLT: {library.output} ran none of its code: left as linked")
                continue
            self.show(f"BOLT: rewriting {library.output} with its profile")
            bolt.optimize(kept[path], profile, path)
            libraries.append(BoltLibrary(library.output, ProfileRef(name, hash_file(profile)),
                                         bolt.code_fingerprint(kept[path])))
        why = differs()
        if why:
            raise BoltUntrained(f"the binaries BOLT rewrote {why}")
        return self.target.replace(
            bolt=ProfileRef(TRAINED_BOLT, hash_file(program)),
            bolt_binary=bolt.code_fingerprint(kept[self.binary]),
            bolt_libraries=tuple(libraries),
            bolt_stale=ProfileRef(TRAINED_BOLT_STALE, hash_file(yaml)))

    def _train(self, scratch: str, kept: dict[str, str]) -> None:
        """One run of the instrumented program with its libraries instrumented beside
        it: `prof.<pid>.fdata` for the program, `lib<n>-.<pid>.fdata` for library n."""
        instrumented = os.path.join(scratch, os.path.basename(self.binary))
        self.show(f"BOLT: instrumenting {self.target.output}"
                  + (" and the project libraries it loads" if self.libraries else ""))
        bolt.instrument(kept[self.binary], instrumented, os.path.join(scratch, "prof"))
        folder = os.path.join(scratch, "lib")
        os.makedirs(folder)
        for index, (_, path) in enumerate(self.libraries):
            copy = os.path.join(folder, os.path.basename(path))
            bolt.instrument(kept[path], copy, os.path.join(scratch, f"lib{index}-"))
            alias_soname(copy)
        env = {"LD_LIBRARY_PATH": folder} if self.libraries else {}
        training.run(self.bench, instrumented, self.bench.env(env), self.show)

    def _kept(self, scratch: str, prefix: str, name: str, binary: str) -> str | None:
        """One binary's raw profiles merged, beside the database (None: none), each
        count held to a profile trained on this same `binary` or rounded."""
        raws = sorted(glob.glob(os.path.join(scratch, f"{prefix}*.fdata")))
        if not raws:
            return None
        fingerprint = bolt.code_fingerprint(binary)
        reference = next((path for path, trained_on in self.held_to.get(name, [])
                          if trained_on == fingerprint), None)
        if reference:      # read before the merge writes over it (the last one trained)
            reference = shutil.copy(reference, os.path.join(scratch, f"held-{name}"))
        merged = os.path.join(scratch, f"merged-{name}")
        bolt.merge(raws, merged)
        round_fdata(merged, reference)
        kept_as = os.path.join(self.folder, name)
        copy_atomic(merged, kept_as)     # whole, or the last one kept (a full disk)
        return kept_as


def _put_back(kept: dict[str, str]) -> str:
    """Each binary as linked again, whole or left as it is (a full disk): "" when all
    are back, else what stays as BOLT left it."""
    left = []
    for path, copy in kept.items():
        try:
            copy_atomic(copy, path, metadata=True)
        except OSError as error:
            left.append(f"{os.path.basename(path)} ({error.strerror})")
    return f"; not put back as linked: {', '.join(left)}" if left else ""


def _disk_words(error: OSError, folder: str) -> str:
    """An OSError as a user reads it: a full disk said as one, not errno's words."""
    if disk_full(folder):
        return f"no space left on the disk of {folder}"
    return f"{error.strerror or error}" + (f": {error.filename}" if error.filename else "")
