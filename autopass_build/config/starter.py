"""Text generated from the configuration model: the starter `autopass.toml` that
`autopass init` writes, and the configuration reference (docs/configuration.md).  Both
read the keys' own records (config/model.py), so neither restates a default by hand."""

from __future__ import annotations

import json
import textwrap
from dataclasses import Field, fields

from autopass_build.config.model import SECTIONS

PLAIN_KINDS = {"str": "string", "int": "integer", "float": "number", "bool": "true or false"}
HEADER = """\
# autopass.toml -- what to build, what to run, how to judge it.
# Written by `autopass init`; every key is optional unless marked. Each key, its type and
# default: docs/configuration.md.
"""


def toml_value(value: object) -> str:
    """A default as TOML text."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, tuple) and value and isinstance(value[0], tuple):
        return "{ " + ", ".join(f"{k} = {toml_value(v)}" for k, v in value) + " }"
    if isinstance(value, tuple):
        return json.dumps(list(value))
    if isinstance(value, (int, str)):
        return json.dumps(value)
    raise TypeError(f"no TOML form for {value!r}")


def default_of(item: Field) -> object:
    return item.default_factory() if callable(item.default_factory) else item.default


def kind_of(item: Field) -> str:
    """The key's type in a user's words, with the bounds it declares (`number > 0`)."""
    meta = item.metadata
    kind = meta["kind"] or PLAIN_KINDS.get(str(item.type), str(item.type))
    bounds = [f"{sign} {meta[name]:g}" for name, sign in
              (("least", ">="), ("above", ">"), ("most", "<="), ("below", "<"))
              if meta.get(name) is not None]
    return " ".join([kind] + [" and ".join(bounds)] if bounds else [kind])


def _comment(text: str, width: int = 88) -> list[str]:
    return textwrap.wrap(text, width - 2, initial_indent="# ", subsequent_indent="# ",
                         break_on_hyphens=False, break_long_words=False)


def _key_lines(item: Field, given: dict[str, str]) -> list[str]:
    meta = item.metadata
    lines = _comment(meta["doc"])
    if item.name in given:
        return lines + [given[item.name]]
    if meta["example"]:
        return lines + [f"# {item.name} = {meta['example']}"]
    value = meta["shown"] or toml_value(default_of(item))
    if str(item.type).startswith("tuple[tuple") and not meta["shown"]:
        value = "{}"     # an empty table, not an empty list
    return lines + [f"{item.name} = {value}"]


def starter_text(build: str | list[str] = "make -j2", target: str = "",
                 clean: str | None = "make clean") -> str:
    """The file `autopass init` writes.  `build`: a string (run by the shell) or an
    argument vector.  A JSON string or array of strings is TOML too, escapes included.
    `clean` None: left for the user, with a line that says so."""
    given = {"build.command": f"command = {json.dumps(build)}",
             "build.clean": (f"clean = {json.dumps(clean)}" if clean is not None else
                             '# clean = "..."    # set it: autopass could not tell how to '
                             "clean this build"),
             "run.target": f"target = {json.dumps(target)}"}
    out = [HEADER]
    for section, model in SECTIONS.items():
        out.append(f"[{section}]")
        out += _comment(" ".join((model.__doc__ or "").split()))
        mine = {k.split(".")[1]: v for k, v in given.items() if k.startswith(section + ".")}
        for item in fields(model):
            out += [""] + _key_lines(item, mine)
        out.append("")
    return "\n".join(out)


def reference_markdown() -> str:
    """docs/configuration.md: every section and key with its type, default and meaning."""
    out = ["# Configuration reference", "",
           "`autopass.toml` holds what to build, what to run and how to judge it. "
           "`autopass init` writes one with every key, set or commented out; "
           "autopass finds the nearest one upwards from the current folder, or takes "
           "`--config FILE`. Unknown keys and sections are errors that suggest the key "
           "meant; command-line options override the file.", "",
           "This page is generated from the configuration model "
           "(`autopass_build/config/model.py`) by `python scripts/docs.py`; a test fails "
           "when the two differ. So is its JSON Schema, `docs/autopass.schema.json`: an "
           "editor that reads one (taplo, Even Better TOML) completes keys, shows their "
           "docs and marks a value out of bounds; point it at the file, e.g. with a first "
           "line `#:schema ./docs/autopass.schema.json` (a path from the toml's folder).",
           ""]
    for section, model in SECTIONS.items():
        out += [f"## [{section}]", "", " ".join((model.__doc__ or "").split()), ""]
        for item in fields(model):
            default = toml_value(default_of(item))
            if str(item.type).startswith("tuple[tuple") and default == "[]":
                default = "{}"
            out += [f"### `{item.name}`", "",
                    f"*{kind_of(item)}*, default `{default}`"
                    + (f"; for example `{item.metadata['example']}`"
                       if item.metadata["example"] and item.metadata["example"] != default
                       else ""), "",
                    item.metadata["doc"], ""]
    return "\n".join(out).rstrip() + "\n"
