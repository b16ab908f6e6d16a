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
from dataclasses import fields, replace
from typing import Any

from autopass_build.config.model import (
    CHECK_MODES,
    SECTIONS,
    AgentConfig,
    CheckConfig,
    ClusterConfig,
    Config,
    ConfigError,
    MeasureConfig,
    RunConfig,
    TuneConfig,
)
from autopass_build.core.names import AGENT_BACKENDS, CONFIG_NAME, METRICS, STAGES
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


MAX_PATTERNS, MAX_PATTERN = 32, 200


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


def _coerce(section: str, name: str, kind: str, value: object) -> object:
    """`kind` is the field's annotation as text (this module uses postponed annotations)."""
    where = f"[{section}].{name}"
    if _holds_nul(value):   # TOML's "\u0000": no argument, path or variable can hold one
        raise ConfigError(f"{where} holds a NUL character (\\u0000), which no program "
                          "argument, path or environment variable can carry; remove it")
    if section == "build" and name in ("command", "clean"):
        return _shell_command(value, where)
    if name in ("command", "clean", "train"):
        return _command(value, where)
    if name == "env":
        if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
            raise ConfigError(f"{where} must be a table of strings, e.g. env = {{ LC_ALL = \"C\" }}")
        return tuple(sorted(value.items()))
    if name == "options":
        if not isinstance(value, dict) or not all(
                isinstance(v, (int, float)) and not isinstance(v, bool) for v in value.values()):
            raise ConfigError(f"{where} must be a table of numbers, e.g. "
                              "options = { population = 12 }")
        return tuple(sorted(value.items()))
    if name == "stages":
        if not isinstance(value, list) or not all(v in STAGES for v in value):
            raise ConfigError(f"{where} must be a list of stages from {', '.join(STAGES)}, "
                              'e.g. stages = ["pgo", "lto"] (or [] for none)')
        return tuple(dict.fromkeys(value))
    if name == "ignore":
        return _patterns(value, where)
    if name in ("inputs", "files"):
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            example = "out.bin" if name == "files" else "data/input.bin"
            raise ConfigError(f'{where} must be a list of paths, e.g. ["{example}"]')
        return tuple(value)
    if kind == "int":
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise ConfigError(f"{where} must be a non-negative integer, not {value!r}")
        return value
    if kind == "float":
        if not isinstance(value, (int, float)) or isinstance(value, bool) or value <= 0:
            raise ConfigError(f"{where} must be a positive number, not {value!r}")
        return float(value)
    if kind == "bool":
        if not isinstance(value, bool):
            raise ConfigError(f"{where} must be true or false, not {value!r}")
        return value
    if not isinstance(value, str):
        raise ConfigError(f"{where} must be a string, not {value!r}")
    return value


def _section(name: str, cls: type, table: object) -> object:
    if not isinstance(table, dict):
        raise ConfigError(f"[{name}] must be a table")
    known = {f.name: str(f.type) for f in fields(cls)}   # annotations are text here
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
    if isinstance(section, MeasureConfig):
        if section.metric not in METRICS:
            raise ConfigError(f"[measure].metric = {section.metric!r} is not one of "
                              f"{', '.join(METRICS)}")
        if section.min_pairs < 2 or section.max_pairs < section.min_pairs:
            raise ConfigError("[measure] needs 2 <= min_pairs <= max_pairs")
    if isinstance(section, AgentConfig) and section.backend not in AGENT_BACKENDS:
        raise ConfigError(f"[agent].backend = {section.backend!r} is not one of "
                          f"{', '.join(AGENT_BACKENDS)}")
    if isinstance(section, AgentConfig) and section.backend == "replay" and not section.transcript:
        raise ConfigError('[agent].backend = "replay" needs [agent].transcript, e.g. '
                          '".autopass/runs/<run>/transcript.jsonl"')
    if isinstance(section, TuneConfig) and (section.budget < 1 or section.max_units < 1):
        raise ConfigError("[tune] needs budget >= 1 and max_units >= 1")
    if isinstance(section, TuneConfig) and section.time:
        from autopass_build.core.durations import DurationError, parse_duration
        try:
            parse_duration(section.time)
        except DurationError as error:
            raise ConfigError(f"[tune].time: {error}") from None
    if isinstance(section, TuneConfig) and not 0 < section.coverage <= 100:
        raise ConfigError(f"[tune].coverage = {section.coverage:g} is a percentage of the "
                          "profile: give one in (0, 100], e.g. 90")
    if isinstance(section, MeasureConfig) and not section.precision < 0.5:
        raise ConfigError(f"[measure].precision = {section.precision:g} is the interval's "
                          "half-width as a fraction of the time: give one below 0.5, e.g. 0.01")
    if isinstance(section, MeasureConfig) and section.timeout_factor < 1:
        raise ConfigError(f"[measure].timeout_factor = {section.timeout_factor:g} would kill a "
                          "candidate before the baseline's own time: give one >= 1, e.g. 3")
    if isinstance(section, CheckConfig):
        if section.mode not in CHECK_MODES:
            raise ConfigError(f"[check].mode = {section.mode!r} is not one of "
                              f"{', '.join(CHECK_MODES)}")
        if section.mode == "command" and not section.command:
            raise ConfigError('[check].mode = "command" needs [check].command, e.g. '
                              '["./check.sh", "{outdir}"]')
        if section.mode != "command" and section.command:
            raise ConfigError(f'[check].command runs only with mode = "command", and mode '
                              f'is {section.mode!r}: set mode = "command", or remove the '
                              "command")
    if isinstance(section, ClusterConfig) and not 0 < section.aa_noise < 0.5:
        raise ConfigError(f"[cluster].aa_noise = {section.aa_noise:g} is a fraction of the "
                          "baseline's time: give one in (0, 0.5), e.g. 0.05")
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
