"""Write the generated pages of docs/: the configuration reference (from the config
model), its JSON Schema (for editors), the command reference (from the parser) and the
map of the package (docs/architecture.md, from its docstrings and imports).  Run after changing either:

    python scripts/docs.py          # rewrite docs/configuration.md, autopass.schema.json, commands.md
    python scripts/docs.py --check  # exit 1 when a page differs from what it would write
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from architecture import architecture_markdown  # noqa: E402

from autopass_build.cli.main import build_parser  # noqa: E402
from autopass_build.cli.reference import commands_markdown  # noqa: E402
from autopass_build.config import reference_markdown  # noqa: E402
from autopass_build.config.schema import schema_text  # noqa: E402


def pages() -> dict[Path, str]:
    return {ROOT / "docs" / "configuration.md": reference_markdown(),
            ROOT / "docs" / "commands.md": commands_markdown(build_parser()),
            ROOT / "docs" / "autopass.schema.json": schema_text(),
            ROOT / "docs" / "architecture.md": architecture_markdown()}


def main(argv: list[str]) -> int:
    stale = [path for path, text in pages().items()
             if not path.exists() or path.read_text() != text]
    if "--check" in argv:
        for path in stale:
            print(f"{path.relative_to(ROOT)} is out of date: run python scripts/docs.py")
        return 1 if stale else 0
    for path in stale:
        path.write_text(pages()[path])
        print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
