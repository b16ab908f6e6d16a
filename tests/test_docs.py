"""The manual holds together: the generated pages match the code they come from, the
starter file is the model's, and every relative link points at something."""

from __future__ import annotations

import re
import sys
from dataclasses import fields
from pathlib import Path

from autopass_build import config as cfg
from autopass_build.config.starter import default_of

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
import docs  # noqa: E402


def test_the_generated_pages_match_the_model_and_the_parser():
    """docs/configuration.md from the config model, docs/commands.md from the parser: a
    key or an option added without regenerating them fails here."""
    stale = [str(path.relative_to(ROOT)) for path, text in docs.pages().items()
             if not path.exists() or path.read_text() != text]
    assert stale == [], f"{stale}: run python scripts/docs.py"


def test_every_key_is_documented_in_the_reference():
    reference = (ROOT / "docs" / "configuration.md").read_text()
    for section, model in cfg.SECTIONS.items():
        assert f"## [{section}]" in reference
        for item in fields(model):
            assert len(item.metadata["doc"]) > 20, f"[{section}].{item.name} has no doc"
            assert f"### `{item.name}`" in reference.split(f"## [{section}]")[1]


def test_the_starter_file_sets_the_models_defaults():
    """What `autopass init` writes reads back as the model's own defaults, except the
    keys it fills in from the recording (and [run].command, the "{exe}" placeholder)."""
    written = cfg.parse(cfg.starter_text("make", "app", None))
    filled = {("build", "command"), ("run", "target"), ("run", "command")}
    for section, model in cfg.SECTIONS.items():
        for item in fields(model):
            if (section, item.name) not in filled:
                assert getattr(getattr(written, section), item.name) == default_of(item), \
                    f"[{section}].{item.name}"


LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def test_every_relative_link_in_the_manual_resolves():
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    broken = []
    for page in pages:
        for target in LINK.findall(page.read_text()):
            if re.match(r"[a-z]+:", target) or target.startswith("#"):
                continue    # a web address or an anchor of the page itself
            path = target.split("#")[0]
            if not (page.parent / path).exists():
                broken.append(f"{page.relative_to(ROOT)} -> {target}")
    assert broken == []
