"""Issue 62: every error a command can end with derives from one base, so the command
line catches one type and prints one line (cli/main.py); the internal signals between
parts of autopass do not."""

from __future__ import annotations

import ast
from pathlib import Path

from autopass_build.core.errors import AutopassError

PACKAGE = Path(__file__).resolve().parents[1] / "autopass_build"
# signals between parts of autopass, never shown to a user as they are
INTERNAL = {"Stopped", "_Stopped", "_Untrained", "Interrupted", "ToolsUnsupported",
            "RivalCostly"}


def _exception_classes() -> dict[str, str]:
    """Every class of the package that derives from an exception, by name -> file."""
    found = {}
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and any(
                    isinstance(b, ast.Name) and (b.id.endswith(("Error", "Exception"))
                                                 or b.id in ("AutopassError",))
                    for b in node.bases):
                found[node.name] = str(path.relative_to(PACKAGE))
    return found


def test_every_error_class_derives_from_the_one_base() -> None:
    import importlib

    classes = _exception_classes()
    assert len(classes) >= 35
    for name, file in classes.items():
        if name in INTERNAL or name == "AutopassError":
            continue
        module = importlib.import_module("autopass_build." + file[:-3].replace("/", "."))
        assert issubclass(getattr(module, name), AutopassError), f"{file}: {name}"


def test_a_reader_that_leaves_ends_the_command_quietly(tmp_path) -> None:
    """`autopass units | head -1`: the reader gone before the listing is written is no
    error (exit 0, no traceback).  BrokenPipeError is an OSError: the full disk's
    handler, beside it in cli/main.py, must not take it first (it once did, and
    re-raised it as a traceback)."""
    import subprocess

    from support import AUTOPASS, TUNE_MINI, TUNE_MINI_MEASURED, recorded_copy

    root = recorded_copy(TUNE_MINI, tmp_path / "mini", TUNE_MINI_MEASURED)
    units = subprocess.Popen([AUTOPASS, "units"], cwd=root, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
    assert units.stdout is not None and units.stderr is not None
    units.stdout.close()                    # the reader leaves before a line is written
    said = units.stderr.read().decode()
    assert units.wait(timeout=120) == 0, said
    assert "Traceback" not in said, said
