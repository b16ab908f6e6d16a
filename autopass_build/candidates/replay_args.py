"""The arguments replay gives the compiler and the linker, from a unit's recorded command:
its code-generation flags (to compile its IR), its own arguments for its source alone
(to compile it from source), the options that keep ThinLTO's cache, and where a
replayed link's inputs sit."""

from __future__ import annotations

import os
import shutil

from autopass_build.capture.compiler_args import Invocation, classify
from autopass_build.capture.option_table import (
    R_DEBUG,
    R_DEPENDENCY,
    R_LINK,
    R_LINK_INPUT,
    R_MODE,
    R_OPTIMIZATION,
    R_OTHER,
    R_OUTPUT,
    R_SIDE_OUTPUT,
    R_SOURCE,
)
from autopass_build.core.files import hash_file, write_atomic
from autopass_build.core.outcome import EvaluationError, Outcome
from autopass_build.core.stage_flags import THINLTO, USE, lto_of
from autopass_build.store.build_records import LinkRecord, UnitRecord

OBJECT_ENDINGS = (".o", ".obj", ".a", ".so", ".lo", ".la", ".c", ".cc", ".cpp")
MAX_TREE_FILE = 1 << 20      # version and linker scripts are small; outputs are not read
# A shared library linked from objects compiled without -fPIC (clang's default PIE):
# GNU ld lets libgsm's pass, as its code reaches the data of other files through the
# GOT; under LTO the data is in the one module, reached directly, and lld refuses it.
NOT_PIC = b"recompile with -fPIC"
NOT_PIC_SAID = ("objects without -fPIC, which lld refuses in an LTO shared library: add "
                "-fPIC to their flags (GNU ld lets them pass)")
# Roles of a unit's original arguments that matter when compiling its IR.
CODEGEN_ROLES = (R_OPTIMIZATION, R_DEBUG, R_OTHER)


# A relink under ThinLTO generates code again only for the modules a candidate changed
# and those that import from them: the others come from this cache (keyed by their
# inputs and options, so a hit is what the link would make).  Bounded: a 390-unit C++
# program's entries are tens of megabytes each time the baseline changes.
THINLTO_CACHE_POLICY = "cache_size_bytes=4g:prune_after=168h"


def thinlto_cache(link_argv: list[str], folder: str) -> list[str]:
    """The link options that keep ThinLTO's code generation in `folder`, for a link whose
    last LTO option is -flto=thin (lld's, or the gold plugin's that GNU ld loads).  A
    link that uses a PGO profile itself (CS-PGO: its context-sensitive part is read in
    the link's backends) gets a folder of that profile's content: LLVM's cache key does
    not hold the profile, so a CS-PGO candidate took the objects of the build without
    it and was byte for byte that build."""
    if lto_of(link_argv) != THINLTO:
        return []
    profiles = [t[len(USE):] for t in link_argv if t.startswith(USE)]
    if profiles:
        try:
            folder = os.path.join(folder, "profile-" + hash_file(profiles[-1])[:16])
        except OSError:
            return []           # the link says what is wrong with the profile itself
    lld = any(t == "-fuse-ld=lld" or (t.startswith("--ld-path=") and "lld" in t)
              for t in link_argv)
    if lld:
        return [f"-Wl,--thinlto-cache-dir={folder}",
                f"-Wl,--thinlto-cache-policy={THINLTO_CACHE_POLICY}"]
    return [f"-Wl,-plugin-opt,cache-dir={folder}",
            f"-Wl,-plugin-opt,cache-policy={THINLTO_CACHE_POLICY}"]


def parsed_unit(unit: UnitRecord) -> Invocation:
    parsed = classify(unit.argv, unit.cwd)
    if not isinstance(parsed, Invocation):  # pragma: no cover - recorded units parse
        raise EvaluationError(Outcome.COMPILE_FAIL, f"cannot re-read {unit.source_rel}'s command")
    return parsed


def codegen_args(unit: UnitRecord) -> list[str]:
    return [t for arg in parsed_unit(unit).args if arg.role in CODEGEN_ROLES for t in arg.tokens]


def source_args(unit: UnitRecord) -> list[str]:
    """The unit's own compile arguments for only this source, without -c/-o/dep files."""
    parsed = parsed_unit(unit)
    out: list[str] = []
    for arg in parsed.args:
        if arg.role in (R_OUTPUT, R_MODE, R_DEPENDENCY, R_SIDE_OUTPUT, R_LINK, R_LINK_INPUT):
            continue
        if arg.role == R_SOURCE and os.path.normpath(
                os.path.join(unit.cwd, arg.tokens[0])) != unit.source:
            continue
        out.extend(arg.tokens)
    return out


def tree_files(link: LinkRecord, root: str) -> list[str]:
    """The hashes of the files `link` reads from the project tree under `root` besides
    its inputs (a version script, a linker script): the user's next build may rewrite
    them, and a relink cached before would be stale."""
    skip = {os.path.realpath(i.path) for i in link.inputs} | {os.path.realpath(link.output)}
    found = []
    for token in link.argv:
        for part in token.replace("=", ",").split(","):
            path = os.path.realpath(os.path.join(link.cwd, part))
            if (part and not part.startswith("-") and not part.endswith(OBJECT_ENDINGS)
                    and path.startswith(root + os.sep) and path not in skip
                    and os.path.isfile(path) and os.path.getsize(path) <= MAX_TREE_FILE):
                found.append(hash_file(path))
    return found


def in_tree(inputs: str, original: str) -> str:
    """Where a link's input at `original` (absolute) is put for its replay: the same
    path under `inputs`, emptied.  A link orders its LTO modules by their paths:
    glslang's archives, byte for byte the build's, linked from folders named by their
    hashes, made other code than the build's link (its BOLT profile did not fit the
    build apply made); the same paths under one prefix keep every input's place."""
    path = os.path.join(inputs, os.path.normpath(original).lstrip(os.sep))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if os.path.lexists(path):
        os.unlink(path)
    return path


def linked_into_tree(made: str, path: str) -> str:
    """`made` (an object of the store) at `path`: hard-linked, else copied."""
    try:
        os.link(made, path)
    except OSError:
        shutil.copyfile(made, path)
    return path


def thinlto_cache_folder(work: str, link_rules: int) -> str:
    """work/thinlto-cache, emptied once where it was filled under other `link_rules`
    (relink.LINK_RULES): ThinLTO's cache key does not hold the order of a link's
    modules, and its entries made by links with their inputs elsewhere gave other code
    than a fresh link (glslang's libglslang.so)."""
    folder = os.path.join(work, "thinlto-cache")
    marker = os.path.join(folder, "autopass-link-rules")   # lld prunes llvmcache-* only
    try:
        with open(marker, encoding="utf-8") as handle:
            if handle.read().strip() == str(link_rules):
                return folder
    except OSError:
        pass
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder, exist_ok=True)
    write_atomic(marker, f"{link_rules}\n".encode())
    return folder
