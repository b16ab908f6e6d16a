"""A copy, in the project's tree, of library code the program spends its time in.

GNU sed, grep, diffutils and gawk ship gnulib's regex (lib/regex.c) and use glibc's
unless configured `--with-included-regex`; many programs bundle zlib or libpng and link
the system's.  When the profile puts most of the run in a system library, the useful
advice is the file in the tree that defines the same functions and was not compiled:
recording a build that compiles it puts that code within reach of the tuner.

A definition is told from a call or a declaration by its shape: the name at the start
of a line (GNU style, the type on the line before) or after a type that starts the line,
an opening parenthesis after it, and no `;` ending the line.  A heuristic, so the advice
says "defines ... it seems", and it is only advice.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

SOURCE_SUFFIXES = (".c", ".cc", ".cpp", ".cxx")
SKIPPED_FOLDERS = {".git", ".autopass", ".hg", ".svn", "node_modules"}
MAX_FILES = 5_000     # sources read at most: a larger tree is searched no further
MAX_FILE_BYTES = 4 << 20


@dataclass(frozen=True)
class BundledCopy:
    function: str
    source: str          # relative to the project root


def find(root: str, functions: list[str], compiled: set[str]) -> BundledCopy | None:
    """The first of `functions` (the hottest first) that a source under `root` not in
    `compiled` (paths relative to root) seems to define."""
    wanted = [f for f in functions if re.fullmatch(r"[A-Za-z_]\w*", f)]
    if not wanted:
        return None
    patterns = {f: re.compile(rb"^(?:[A-Za-z_][\w \t*]*[ \t*])?" + re.escape(f.encode())
                              + rb"[ \t]*\([^;\n]*$", re.M) for f in wanted}
    found: dict[str, str] = {}
    for path in _sources(root):
        rel = os.path.relpath(path, root)
        if rel in compiled or not rel.isprintable():   # a name no message can print
            continue
        try:
            with open(path, "rb") as handle:
                text = handle.read(MAX_FILE_BYTES)
        except OSError:
            continue
        for function, pattern in patterns.items():
            if function not in found and function.encode() in text and pattern.search(text):
                found[function] = rel
        if wanted[0] in found:
            break
    return next((BundledCopy(f, found[f]) for f in wanted if f in found), None)


def _sources(root: str):
    seen = 0
    for folder, folders, files in os.walk(root):
        folders[:] = sorted(d for d in folders if d not in SKIPPED_FOLDERS)
        for name in sorted(files):
            if name.endswith(SOURCE_SUFFIXES):
                seen += 1
                if seen > MAX_FILES:
                    return
                yield os.path.join(folder, name)
