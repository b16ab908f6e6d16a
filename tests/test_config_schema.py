"""The JSON Schema editors read (docs/autopass.schema.json) and the loader say the same
about every key: the same values accepted, the same refused.  Both come from the model's
key records; this checks that neither reads them differently."""

from __future__ import annotations

import json
import tomllib
from dataclasses import Field, fields
from pathlib import Path

import jsonschema
import pytest

from autopass_build import config as cfg
from autopass_build.config.schema import schema
from autopass_build.config.starter import default_of, toml_value

ROOT = Path(__file__).resolve().parents[1]
# what the loader checks across keys or beyond a value's shape, which a schema of single
# keys cannot say: a regular expression that does not compile, a duration's grammar, a
# [run].command without "{exe}", a mode or command that needs another key, max_pairs
# below min_pairs
LOADER_ONLY = {("check", "ignore"), ("tune", "time"), ("run", "command"),
               ("check", "mode"), ("check", "command"), ("agent", "backend"),
               ("measure", "max_pairs")}


def _samples(item: Field) -> list[object]:
    """Values at and just past each bound, each choice and one that is not, the
    default, and a value of the wrong type."""
    meta = item.metadata
    values: list[object] = [default_of(item), {"a": 1}]
    values += list(meta["choices"]) + (["no-such"] if meta["choices"] else [])
    step = 1 if str(item.type) == "int" else 1e-3
    for name in ("least", "most", "above", "below"):
        if meta[name] is not None:
            values += [meta[name] - step, meta[name], meta[name] + step]
    if str(item.type) in ("int", "float", "bool"):
        values += ["seven"]
    return values


def _toml(section: str, name: str, value: object) -> str:
    if isinstance(value, dict):
        return f"[{section}.{name}]\na = 1"
    return f"[{section}]\n{name} = {toml_value(value)}"


def _loader_accepts(text: str) -> bool:
    try:
        cfg.parse(text)
    except cfg.ConfigError:
        return False
    return True


KEYS = [(section, item) for section, model in cfg.SECTIONS.items() for item in fields(model)
        if (section, item.name) not in LOADER_ONLY]


@pytest.mark.parametrize("section,item", KEYS, ids=[f"{s}.{i.name}" for s, i in KEYS])
def test_schema_and_loader_agree_on_each_key(section, item):
    validator = jsonschema.Draft202012Validator(schema())
    for value in _samples(item):
        text = _toml(section, item.name, value)
        document = tomllib.loads(text)
        schema_accepts = validator.is_valid(document)
        assert schema_accepts == _loader_accepts(text), (
            f"{text!r}: the schema {'accepts' if schema_accepts else 'refuses'} it, "
            "the loader does not")


def test_the_schema_is_valid_and_refuses_unknown_keys():
    jsonschema.Draft202012Validator.check_schema(schema())
    validator = jsonschema.Draft202012Validator(schema())
    assert not validator.is_valid({"tune": {"budgett": 3}})
    assert not validator.is_valid({"tunes": {}})
    assert validator.is_valid(tomllib.loads(cfg.starter_text("make", "app")))


def test_the_shipped_schema_is_the_generated_one():
    shipped = json.loads((ROOT / "docs" / "autopass.schema.json").read_text())
    assert shipped == schema()
