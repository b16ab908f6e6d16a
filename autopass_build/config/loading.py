"""Reading `autopass.toml` into the model (config/model.py): validation with errors that
name the fix.

Layers, lowest first: defaults, the file, then command-line options (the CLI passes
them to `with_overrides`).  Unknown keys are errors ("did you mean ...?"), so a typo
never silently falls back to a default.
"""

from __future__ import annotations

import difflib
import os
import re
import shlex
from dataclasses import Field, fields, replace
from typing import Any

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
    AgentConfig,
    CheckConfig,
    Config,
    ConfigError,
    MeasureConfig,
    RunConfig,
    TuneConfig,
)
from autopass_build.core.names import CONFIG_NAME, STAGES
from autopass_build.core.trust import refusal

try:
    import tomllib
except ImportError:  # pragma: no cover - Python < 3.11
    import tomli as tomllib  # type: ignore[no-redef]

def _suggest(name: str, choices: list[str]) -> str:
    close = difflib.get_close_matches(name, choices, n=1)
    return f"; did you mean {close[0]!r}?" if close else f"; known: {', '.join(sorted(choices))}"


def _command(value: object, where: str) -> tuple[str, ...]:
    if isinstance(value, str):
        try:
            return tuple(shlex.split(value))
        except ValueError as error:
            raise ConfigError(f"{where}: cannot split {value!r} into arguments ({error}); "
                              "write it as a list of strings instead")
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise ConfigError(f"{where} must be a string or a list of strings, e.g. "
                      '["{exe}", "input.txt"]')


def _shell_command(value: object, where: str) -> tuple[str, ...]:
    """The user's own build: a string is run as their shell runs it (`sh -c`, as make
    runs a recipe: `&&`, `>/dev/null`, variables), a list as an argument vector."""
    if isinstance(value, str):
        return ("sh", "-c", value) if value.strip() else ()
    return _command(value, where)




def _patterns(value: object, where: str) -> tuple[str, ...]:
    """[check].ignore: regular expressions (Python's `re`), each one checked here."""
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value) \
            or len(value) > MAX_PATTERNS:
        raise ConfigError(f'{where} must be a list of at most {MAX_PATTERNS} regular '
                          'expressions, e.g. ["^Time used:"]')
    for i, pattern in enumerate(value):
        if len(pattern) > MAX_PATTERN:
            raise ConfigError(f"{where}[{i}] is {len(pattern)} characters long; at most "
                              f"{MAX_PATTERN}")
        try:
            re.compile(pattern)
        except re.error as error:
            raise ConfigError(f"{where}[{i}] = {pattern[:80]!r} is not a regular expression "
                              f"({error}); escape a literal ( [ * + ? with a backslash")
    return tuple(value)


def _holds_nul(value: object) -> bool:
    if isinstance(value, str):
        return "\0" in value
    if isinstance(value, list):
        return any(_holds_nul(v) for v in value)
    if isinstance(value, dict):
        return any(_holds_nul(k) or _holds_nul(v) for k, v in value.items())
    return False


def _coerce(section: str, name: str, item: Field, value: object) -> object:
    """`value` as the key `item` declares it: by its parser (model.key's `parser`), else
    by its Python type (this module's annotations are text)."""
    where = f"[{section}].{name}"
    if _holds_nul(value):   # TOML's "\u0000": no argument, path or variable can hold one
        raise ConfigError(f"{where} holds a NUL character (\\u0000), which no program "
                          "argument, path or environment variable can carry; remove it")
    parser = item.metadata.get("parser", "")
    if parser:
        return PARSERS[parser](value, where)
    kind = str(item.type)
    if kind == "int":
        if not isinstance(value, int) or isinstance(value, bool):
            raise ConfigError(f"{where} must be an integer, not {value!r}")
        return value
    if kind == "float":
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            raise ConfigError(f"{where} must be a number, not {value!r}")
        return float(value)
    if kind == "bool":
        if not isinstance(value, bool):
            raise ConfigError(f"{where} must be true or false, not {value!r}")
        return value
    if not isinstance(value, str):
        raise ConfigError(f"{where} must be a string, not {value!r}")
    return value


def _table_of_strings(value: object, where: str) -> tuple[tuple[str, str], ...]:
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise ConfigError(f"{where} must be a table of strings, e.g. env = {{ LC_ALL = \"C\" }}")
    return tuple(sorted(value.items()))


def _table_of_numbers(value: object, where: str) -> tuple[tuple[str, float], ...]:
    if not isinstance(value, dict) or not all(
            isinstance(v, (int, float)) and not isinstance(v, bool) for v in value.values()):
        raise ConfigError(f"{where} must be a table of numbers, e.g. "
                          "options = { population = 12 }")
    return tuple(sorted(value.items()))


def _stages(value: object, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(v in STAGES for v in value):
        raise ConfigError(f"{where} must be a list of stages from {', '.join(STAGES)}, "
                          'e.g. stages = ["pgo", "lto"] (or [] for none)')
    return tuple(dict.fromkeys(value))


def _paths(value: object, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        example = "out.bin" if where.startswith("[check]") else "data/input.bin"
        raise ConfigError(f'{where} must be a list of paths, e.g. ["{example}"]')
    return tuple(value)


PARSERS = {SHELL: _shell_command, ARGV_PARSER: _command, TABLE_OF_STRINGS: _table_of_strings,
           TABLE_OF_NUMBERS: _table_of_numbers, STAGE_LIST: _stages, PATTERNS: _patterns,
           PATHS: _paths}


def _bounds(section: str, item: Field, value: object) -> None:
    """The choices and bounds the key `item` declares (model.key), checked."""
    meta, where = item.metadata, f"[{section}].{item.name}"
    choices = meta.get("choices") or ()
    if choices and value not in choices:
        raise ConfigError(f"{where} = {value!r} is not one of {', '.join(choices)}")
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return
    for bound, fails, says in (("least", lambda v, b: v < b, "at least"),
                               ("most", lambda v, b: v > b, "at most"),
                               ("above", lambda v, b: v <= b, "above"),
                               ("below", lambda v, b: v >= b, "below")):
        limit = meta.get(bound)
        if limit is not None and fails(value, limit):
            why = f"; {meta['why']}" if meta.get("why") else ""
            raise ConfigError(f"{where} = {value:g} must be {says} {limit:g}"
                              + _bounds_hint(meta) + why)


def _bounds_hint(meta) -> str:
    """What the key allows, in one clause (`: give one in (0, 0.5)`)."""
    low = ("[", meta["least"]) if meta.get("least") is not None else \
        ("(", meta["above"]) if meta.get("above") is not None else None
    high = (meta["most"], "]") if meta.get("most") is not None else \
        (meta["below"], ")") if meta.get("below") is not None else None
    if low and high:
        return f": give one in {low[0]}{low[1]:g}, {high[0]:g}{high[1]}"
    return ""


def _section(name: str, cls: type, table: object) -> object:
    if not isinstance(table, dict):
        raise ConfigError(f"[{name}] must be a table")
    known = {f.name: f for f in fields(cls)}
    values = {}
    for key, value in table.items():
        if key not in known:
            raise ConfigError(f"unknown key [{name}].{key}{_suggest(key, list(known))}")
        values[key] = _coerce(name, key, known[key], value)
    if cls is CheckConfig and "command" in values and "mode" not in values:
        values["mode"] = "command"     # a checker given is a checker meant to run
    section = cls(**values)
    _validate(name, section)
    return section


def _validate(name: str, section: object) -> None:
    """Each key's declared choices and bounds, then what involves several keys."""
    for item in fields(section):     # type: ignore[arg-type]
        _bounds(name, item, getattr(section, item.name))
    if isinstance(section, MeasureConfig) and section.max_pairs < section.min_pairs:
        raise ConfigError("[measure] needs 2 <= min_pairs <= max_pairs")
    if isinstance(section, AgentConfig) and section.backend == "replay" and not section.transcript:
        raise ConfigError('[agent].backend = "replay" needs [agent].transcript, e.g. '
                          '".autopass/runs/<run>/transcript.jsonl"')
    if isinstance(section, TuneConfig) and section.time:
        from autopass_build.core.durations import DurationError, parse_duration
        try:
            parse_duration(section.time)
        except DurationError as error:
            raise ConfigError(f"[tune].time: {error}") from None
    if isinstance(section, CheckConfig):
        if section.mode == "command" and not section.command:
            raise ConfigError('[check].mode = "command" needs [check].command, e.g. '
                              '["./check.sh", "{outdir}"]')
        if section.mode != "command" and section.command:
            raise ConfigError(f'[check].command runs only with mode = "command", and mode '
                              f'is {section.mode!r}: set mode = "command", or remove the '
                              "command")
    if isinstance(section, RunConfig) and section.command and not any(
            "{exe}" in token for token in section.command):
        raise ConfigError('[run].command must contain "{exe}" where the binary under test '
                          'goes, e.g. command = "{exe} input.txt"')


def parse(text: str, path: str | None = None, project_dir: str = ".") -> Config:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        hint = ""
        if str(error).startswith("Cannot overwrite a value"):
            # tomllib's words for a key given twice: `autopass init` writes `env = {}`
            # and `target = ""`, and a second line of the same key is an easy edit
            hint = "; that line sets a key an earlier line of its table already set"
        raise ConfigError(f"{path or CONFIG_NAME}: not valid TOML: {error}{hint}")
    sections: dict[str, Any] = {}
    for name, table in data.items():
        if name not in SECTIONS:
            raise ConfigError(f"unknown section [{name}]{_suggest(name, list(SECTIONS))}")
        sections[name] = _section(name, SECTIONS[name], table)
    return Config(path=path, project_dir=os.path.abspath(project_dir), **sections)


def find(start: str) -> str | None:
    current = os.path.abspath(start)
    while True:
        candidate = os.path.join(current, CONFIG_NAME)
        if os.path.isfile(candidate):
            return candidate
        parent = os.path.dirname(current)
        if parent == current:
            return None
        current = parent


def load(path: str | None = None, start: str = ".") -> Config:
    """The config at `path`, or the nearest autopass.toml upwards, or the defaults."""
    path = path or find(start)
    if path is None:
        return Config(project_dir=os.path.abspath(start))
    try:
        _check_trusted(path)
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except OSError as error:
        raise ConfigError(f"cannot read {path}: {error.strerror}")
    except UnicodeDecodeError:
        raise ConfigError(f"{path} is not UTF-8 text")
    try:
        return parse(text, path, os.path.dirname(os.path.abspath(path)))
    except ConfigError as error:
        said = str(error)    # parse() names the file where it knows it; never twice
        raise ConfigError(said if said.startswith(f"{path}:") else f"{path}: {said}") from None


def _check_trusted(path: str) -> None:
    """The config names commands autopass runs: refuse one anybody could have edited."""
    why = refusal(path, os.stat(path), "commands autopass runs")
    if why:
        raise ConfigError(why)


def key_of(section: str, name: str) -> Field:
    """The model's record of [section].name (its doc, default, bounds)."""
    return next(f for f in fields(SECTIONS[section]) if f.name == name)


def check_given(section: str, name: str, value: object, given_as: str) -> None:
    """A command-line value of [section].name held to the bounds and choices the key
    declares, the error naming the option the user typed (`--budget: ...`)."""
    try:
        _bounds(section, key_of(section, name), value)
    except ConfigError as error:
        raise ConfigError(f"{given_as}: {error}") from None


def with_overrides(config: Config, **sections: dict) -> Config:
    """Command-line values (None = not given) on top of the file's."""
    updated = {}
    for name, values in sections.items():
        given = {k: v for k, v in values.items() if v is not None}
        if given:
            section = replace(getattr(config, name), **given)
            _validate(name, section)
            updated[name] = section
    return replace(config, **updated)
