"""The JSON Schema of `autopass.toml`, generated from the model (config/model.py):
editors that read one (Even Better TOML, taplo, VS Code) complete keys, show each key's
doc and flag a value out of bounds as it is typed.  It says what loading.py checks key
by key; what involves several keys (min_pairs <= max_pairs) stays loading.py's."""

from __future__ import annotations

import json
from dataclasses import Field, fields

from autopass_build.config.model import (
    ARGV_PARSER,
    MAX_PATTERN,
    MAX_PATTERNS,
    PATHS,
    PATTERNS,
    SECTIONS,
    SHELL,
    STAGE_LIST,
    TABLE_OF_NUMBERS,
    TABLE_OF_STRINGS,
)
from autopass_build.config.starter import default_of
from autopass_build.core.names import STAGES

_STRINGS = {"type": "array", "items": {"type": "string"}}
_COMMAND = {"anyOf": [{"type": "string"}, _STRINGS]}
BY_PARSER: dict[str, dict] = {
    SHELL: _COMMAND, ARGV_PARSER: _COMMAND,
    TABLE_OF_STRINGS: {"type": "object", "additionalProperties": {"type": "string"}},
    TABLE_OF_NUMBERS: {"type": "object", "additionalProperties": {"type": "number"}},
    STAGE_LIST: {"type": "array", "items": {"enum": list(STAGES)}, "uniqueItems": True},
    PATTERNS: {"type": "array", "items": {"type": "string", "maxLength": MAX_PATTERN},
               "maxItems": MAX_PATTERNS},
    PATHS: {"type": "array", "items": {"type": "string", "minLength": 1}},
}
BY_TYPE: dict[str, dict] = {"int": {"type": "integer"}, "float": {"type": "number"},
           "bool": {"type": "boolean"}, "str": {"type": "string"}}
BOUNDS = {"least": "minimum", "most": "maximum", "above": "exclusiveMinimum",
          "below": "exclusiveMaximum"}


def _key(item: Field) -> dict:
    meta = item.metadata
    out = dict(BY_PARSER[meta["parser"]] if meta["parser"] else BY_TYPE[str(item.type)])
    if meta["choices"]:
        out = {"enum": list(meta["choices"])}
    out.update({word: meta[name] for name, word in BOUNDS.items() if meta[name] is not None})
    default = default_of(item)
    if isinstance(default, tuple) and default and isinstance(default[0], tuple):
        default = dict(default)
    elif isinstance(default, tuple):
        default = {} if str(item.type).startswith("tuple[tuple") else list(default)
    return {"description": meta["doc"], **out, "default": default}


def schema() -> dict:
    """The whole file's schema: each section an object of its keys, nothing else allowed."""
    sections = {
        name: {"type": "object", "description": " ".join((model.__doc__ or "").split()),
               "properties": {item.name: _key(item) for item in fields(model)},
               "additionalProperties": False}
        for name, model in SECTIONS.items()}
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "title": "autopass.toml", "type": "object", "properties": sections,
            "additionalProperties": False}


def schema_text() -> str:
    return json.dumps(schema(), indent=2) + "\n"
