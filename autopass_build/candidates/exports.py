"""What a linked program or shared library exports (the definitions in its dynamic
symbol table), held unchanged across a step on top.

The steps that change how code is made, not what it offers (direct calls, layout, the
link-level knobs), must leave every binary of the build exporting what it did: a program
whose plugins call back into it, or a library another project links against, would
otherwise break where the benchmark does not look.  The check runs after the link, on
the candidate and the build without the step, before anything is measured."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from dataclasses import dataclass

from elftools.common.exceptions import ELFError
from elftools.elf.elffile import ELFFile
from elftools.elf.sections import SymbolTableSection

from autopass_build.candidates.candidate import Candidate
from autopass_build.core.outcome import EvaluationError, Outcome

SHOWN = 5          # symbols named in the refusal; the rest counted


def exports(path: str) -> frozenset[str]:
    """`path`'s exported definitions as "name type binding" (empty for a file that is not
    ELF or has no dynamic symbol table: a static program exports nothing)."""
    try:
        with open(path, "rb") as handle:
            table = ELFFile(handle).get_section_by_name(".dynsym")
            if not isinstance(table, SymbolTableSection):
                return frozenset()
            return frozenset(f"{s.name} {s['st_info']['type']} {s['st_info']['bind']}"
                             for s in table.iter_symbols()
                             if s.name and s["st_shndx"] != "SHN_UNDEF")
    except (OSError, ELFError):
        return frozenset()


def binaries(candidate: Candidate) -> dict[str, str]:
    """The program and each shared library built beside it, by path in its folder."""
    found = {os.path.relpath(candidate.binary, candidate.folder): candidate.binary}
    for root, _, names in os.walk(candidate.folder):
        for name in names:
            if name.endswith(".so") or ".so." in name:
                path = os.path.join(root, name)
                found[os.path.relpath(path, candidate.folder)] = path
    return found


class ExportsKept:
    """A post-link check (Evaluator.evaluate's `post_link`): the candidate, if each of its
    binaries exports what the same binary of `baseline()` does; else EvaluationError
    naming the step (`label`), the binary and what changed.  The baseline is asked for
    only when a candidate is checked: a step the journal holds already (a resumed run)
    builds nothing."""

    def __init__(self, baseline: Callable[[], Candidate], label: str):
        self.baseline = baseline
        self.label = label

    @functools.cached_property
    def before(self) -> dict[str, frozenset[str]]:
        """Each baseline binary's exports, read once (a step's look and its
        confirmation check the same baseline)."""
        return {rel: exports(path) for rel, path in binaries(self.baseline()).items()}

    def __call__(self, candidate: Candidate) -> Candidate:
        before = self.before
        for rel, path in sorted(binaries(candidate).items()):
            if rel not in before:
                continue
            now = exports(path)
            if now != before[rel]:
                raise EvaluationError(Outcome.POST_LINK_FAIL, (
                    f"{self.label} changed what {rel} exports ({_changes(before[rel], now)}); "
                    "a step on top must leave every binary's exports as they were"))
        return candidate


    def portable(self) -> KeepExports:
        """This check as a cluster node makes it, against its own baseline."""
        return KeepExports(self.label)

    def adopt(self, brought: object) -> None:
        """A check brings nothing back."""


@dataclass(frozen=True)
class KeepExports:
    """ExportsKept as data, for a node (PortableStep.portable)."""
    label: str


def _changes(before: frozenset[str], after: frozenset[str]) -> str:
    gone = sorted(s.split()[0] for s in before - after)
    new = sorted(s.split()[0] for s in after - before)
    parts = [f"{what} {', '.join(names[:SHOWN])}" + (f" and {len(names) - SHOWN} more"
                                                     if len(names) > SHOWN else "")
             for what, names in (("lost", gone), ("gained", new)) if names]
    return "; ".join(parts)
