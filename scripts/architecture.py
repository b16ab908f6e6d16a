"""docs/architecture.md's map of the package, drawn from the code: each room (a folder
of autopass_build, in autopass_build.LAYERS' order) with its own docstring, the rooms
it imports from, and each module with the first sentence of its docstring."""

from __future__ import annotations

import ast
import re
import textwrap
from pathlib import Path

from autopass_build import LAYERS

PACKAGE = Path(__file__).resolve().parents[1] / "autopass_build"
PROSE = """\
# Architecture

The package's folders are the pipeline's rooms, in order; each imports only from the
rooms before it (`tests/test_layers.py` fails on an import that runs up the list, and on
any cycle).  The compiler wrapper (`capture/`) runs inside every compile of a user's
build, so it imports only `core/` and itself, and `tests/test_wrapper.py` pins its import
set.

How data flows: the wrapper writes each compile's IR and command line to the spool;
`store/` ingests it into `.autopass/store.db`; `candidates/` replays units from that IR
with a candidate's flags and relinks, `measuring/` checks the output and A/Bs it against
the baseline, `evidence/` reads what the compiler did and where the time goes;
`tuning/` asks a strategy for candidates, journals every measured entry
(`.autopass/runs/<run>/journal.jsonl`), concludes on the best and publishes the winners
to `autopass.flags.json`; in apply mode the same wrapper reads that file in every
compile.  Around the package: `cmake/AutoPass.cmake`, `examples/`, `bench/` (real
programs from Debian sources), `tests/`, `docs/RELIABILITY.md` (what must hold under bad
input, faults and attack, and which tests hold it), `scripts/`, `.ci/run`.

Checks: `bash .ci/run` runs everything as CI does; after it, `.venv/bin/pytest` alone
is the fast local loop (tests marked `slow` are left out; `-m "slow or not slow"` runs
all).

The rest of this page is drawn from the code by `python scripts/docs.py` (a test fails
when it differs): each room's own docstring, the rooms it imports from, and each module
with the first sentence of its docstring.
"""


def _first_sentence(doc: str | None, width: int = 120) -> str:
    text = " ".join((doc or "").split())
    match = re.match(r"(.+?[.?])(\s|$)", text)
    sentence = match.group(1) if match else text
    return sentence if len(sentence) <= width else sentence[:width - 3].rstrip() + "..."


def _imported_rooms(path: Path, own: str) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names = [node.module or ""] if isinstance(node, ast.ImportFrom) else \
            [a.name for a in node.names] if isinstance(node, ast.Import) else []
        for name in names:
            parts = name.split(".")
            if parts[0] == "autopass_build" and len(parts) > 1 and parts[1] in LAYERS:
                found.add(parts[1])
    return found - {own}


def _room(layer: str) -> list[str]:
    folder = PACKAGE / layer
    init = ast.get_docstring(ast.parse((folder / "__init__.py").read_text())) or ""
    modules = sorted(p for p in folder.rglob("*.py") if p.name != "__init__.py")
    uses = set().union(*(_imported_rooms(p, layer) for p in folder.rglob("*.py")))
    lines = [f"## {layer}/", "", textwrap.fill(" ".join(init.split("\n\n")[0].split()), 88),
             "", "Imports from: " + (", ".join(f"`{u}/`" for u in LAYERS if u in uses)
                                     or "nothing of the package") + ".", ""]
    for path in modules:
        name = str(path.relative_to(folder).with_suffix(""))
        doc = ast.get_docstring(ast.parse(path.read_text()))
        lines.append(f"- `{name}`: {_first_sentence(doc)}")
    return lines + [""]


def architecture_markdown() -> str:
    out = [PROSE, "Rooms, in order: " + " → ".join(f"`{layer}/`" for layer in LAYERS) + ".", ""]
    for layer in LAYERS:
        out += _room(layer)
    return "\n".join(out).rstrip() + "\n"
