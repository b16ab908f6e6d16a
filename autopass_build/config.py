"""`autopass.toml`: one typed model, defaults, validation with errors that name the fix.

Layers, lowest first: defaults, the file, then command-line options (the CLI passes
them to `with_overrides`).  Unknown keys are errors ("did you mean ...?"), so a typo
never silently falls back to a default.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import shlex
from dataclasses import dataclass, field, fields, replace
from typing import Any

from autopass_build.core.names import (
    AGENT_BACKENDS,
    CONFIG_NAME,
    DEFAULT_STRATEGY,
    FLAGS_DB_NAME,
    METRICS,
    STAGES,
)

try:
    import tomllib
except ImportError:  # pragma: no cover - Python < 3.11
    import tomli as tomllib  # type: ignore[no-redef]

CHECK_MODES = ("output", "numbers", "exit-code", "command")


class ConfigError(Exception):
    pass


@dataclass(frozen=True)
class BuildConfig:
    command: tuple[str, ...] = ()   # the build to record: `autopass record` with no command
    root: str = "."
    clean: tuple[str, ...] = ()     # back to a clean tree (`autopass verify` builds from scratch)


@dataclass(frozen=True)
class RunConfig:
    command: tuple[str, ...] = ()   # the benchmark; "{exe}" is the binary under test
    target: str = ""                # which recorded binary (default: the only executable)
    cwd: str = "."
    env: tuple[tuple[str, str], ...] = ()
    timeout: float = 120.0          # seconds, for the baseline; candidates get k x baseline
    inputs: tuple[str, ...] = ()    # files the benchmark reads (checked to exist)
    stdin: str = ""                 # a file fed to the benchmark's standard input
    train: tuple[str, ...] = ()     # PGO training run ("{exe}"), default: the benchmark;
                                    # when set, `autopass tune` tunes on top of PGO


@dataclass(frozen=True)
class CheckConfig:
    mode: str = "output"            # output: exit code and stdout equal the baseline's
    command: tuple[str, ...] = ()   # mode=command: gets "{outdir}" holding stdout/stderr/code
    tolerance: float = 1e-6         # mode=numbers: the relative difference a number may have
    files: tuple[str, ...] = ()     # files the benchmark writes, equal to the baseline's (any mode)
    ignore: tuple[str, ...] = ()    # regular expressions: stdout lines not compared (a time)


@dataclass(frozen=True)
class MeasureConfig:
    metric: str = "wall"
    min_pairs: int = 5              # interleaved baseline/candidate pairs before a verdict
    max_pairs: int = 30
    precision: float = 0.01         # stop when the interval's half-width is below this
    timeout_factor: float = 3.0     # a candidate is killed at k x the baseline's time
    warmup: int = 1
    pin_cpu: bool = True            # single-threaded runs on one CPU (cpu_pinning.py)


@dataclass(frozen=True)
class TuneConfig:
    strategy: str = DEFAULT_STRATEGY         # agent | random | greedy | ga | de | pso (`--list-strategies`)
    budget: int = 40                # candidate evaluations (each one a rebuild and an A/B)
    seed: int = 0
    max_units: int = 4              # tune at most this many of the hottest units...
    coverage: float = 90.0          # ...stopping once they hold this % of the profile
    native: bool = False            # allow -march=native (the build then runs on this CPU only)
    screen: bool = False            # rank candidates by their compiled code, measure the best
    attribute: bool = False         # per-unit attribution and composite candidates
    flags_db: str = FLAGS_DB_NAME
    options: tuple[tuple[str, float], ...] = ()   # the strategy's options, e.g. population
    stages: tuple[str, ...] = STAGES     # whole-program stages to try first ([]: none)
    time: str = ""                  # a time budget ("45m", "2h"; "": none), besides `budget`
    stage_budget: int = 0           # evaluations for the stages (0: half the budget)


@dataclass(frozen=True)
class AgentConfig:
    backend: str = "rules"          # rules (offline) | openai (any compatible endpoint) | replay
    model: str = ""                 # default: $AUTOPASS_MODEL
    base_url: str = ""              # default: $OPENAI_BASE_URL, else the openai default
    api_key_env: str = "OPENAI_API_KEY"   # the variable holding the key (never the key)
    max_calls: int = 60             # LLM calls per tuning run, then the rules agent takes over
    max_tokens: int = 400000        # tokens per tuning run, likewise
    timeout: float = 120.0          # seconds per call
    retries: int = 3                # per call, with backoff, on 429/5xx/timeouts
    transcript: str = ""            # backend = "replay": the transcript.jsonl to replay


@dataclass(frozen=True)
class Config:
    path: str | None = None         # the file it came from, for messages
    project_dir: str = "."          # folder holding autopass.toml
    build: BuildConfig = field(default_factory=BuildConfig)
    run: RunConfig = field(default_factory=RunConfig)
    check: CheckConfig = field(default_factory=CheckConfig)
    measure: MeasureConfig = field(default_factory=MeasureConfig)
    tune: TuneConfig = field(default_factory=TuneConfig)
    agent: AgentConfig = field(default_factory=AgentConfig)

    def resolve(self, path: str) -> str:
        return os.path.normpath(os.path.join(self.project_dir, path))


SECTIONS = {"build": BuildConfig, "run": RunConfig, "check": CheckConfig,
            "measure": MeasureConfig, "tune": TuneConfig, "agent": AgentConfig}


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
    import stat

    st = os.stat(path)
    if stat.S_ISREG(st.st_mode) and st.st_mode & stat.S_IWOTH:
        raise ConfigError(f"{path} is writable by every user, and it names commands autopass "
                          f"runs: refused (chmod o-w {path})")
    if stat.S_ISREG(st.st_mode) and st.st_uid not in (os.getuid(), 0):
        raise ConfigError(f"{path} belongs to another user (uid {st.st_uid}) and names "
                          "commands autopass runs: refused")


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


STARTER = '''\
# autopass.toml -- what to build, what to run, how to judge it.
# Written by `autopass init`; every key is optional unless marked.

[build]
# The build to record (`autopass record` with no command runs this), and how to get back
# to a clean tree (`autopass verify` builds from scratch three times). A string runs as
# your shell runs it (sh -c: `&&`, `>/dev/null` and variables work); a list of strings
# is one argument vector, run without a shell.
command = {build}
{clean_line}
# The folder the build runs in, relative to this file (`autopass record` and `verify`).
# root = "."

[run]
# The benchmark (required for try/tune). "{{exe}}" is replaced by the binary under test.
# A list of strings avoids any quoting questions: ["{{exe}}", "--size", "4"]. Never a shell.
command = "{{exe}}"
# Which recorded binary to tune (see `autopass targets`); default: the only executable.
target = {target}
# Folder the benchmark runs in, relative to this file; environment added to it.
cwd = "."
env = {{}}
# Seconds the baseline may take; candidates are killed at timeout_factor x the baseline.
timeout = 120
# A training run for profile-guided optimization, if it should differ from the benchmark
# (other inputs). When set, `autopass tune` tunes on top of the PGO build.
# train = ["{{exe}}", "training-input.txt"]
# Files the benchmark reads (relative to cwd), checked to exist before anything runs.
# inputs = ["data/input.bin"]
# A file fed to the benchmark's standard input on every run (else /dev/null).
# stdin = "input.txt"

[check]
# "output": exit code and stdout must equal the baseline's (the default).
# "numbers": the same, but the numbers in stdout may differ by the relative `tolerance`
#            (a program built with -ffast-math rounds differently under other flags).
# "exit-code": only the exit code must match.
# "command": run a checker that gets "{{outdir}}" (holding stdout, stderr, exit_code);
#            it must exit 0 for a correct result, e.g. command = ["./check.sh", "{{outdir}}"]
mode = "output"
# tolerance = 1e-6   # mode = "numbers": how far (relative) a number may be from the baseline's
# command = ["./check.sh", "{{outdir}}"]   # mode = "command": the checker
# Files the benchmark writes (relative to [run].cwd), in any mode: each run must write
# them anew, byte for byte the baseline's, e.g. files = ["out.j2k"]
# files = []
# Regular expressions for stdout lines that are not compared, in modes "output" and
# "numbers": what a program prints that changes every run (its own timing, a date).
# ignore = ["^Time used:", "elapsed"]

[measure]
# wall | cpu (user+sys of the whole process tree) | user (its user time: leaves out the
# kernel's page faults and I/O, which flags do not change and which vary most between
# runs; for runs of 0.5 s or more) | instructions (callgrind: slow but deterministic) |
# cycles (perf stat, where the host supports it)
metric = "wall"
# Baseline and candidate run interleaved in pairs; at least min_pairs, at most max_pairs,
# stopping once the 95 % interval of the ratio is narrower than +-precision.
min_pairs = 5
max_pairs = 30
precision = 0.01
timeout_factor = 3.0
warmup = 1
# Runs are held to one CPU, away from CPU 0; a program that keeps several CPUs busy is
# seen once and measured unpinned.
pin_cpu = true

[tune]
# Strategy and budget for `autopass tune` (command-line options override these).
strategy = "agent"
budget = 40
seed = 0
# A time budget besides the evaluations ("45m", "2h"; "" for none): the stages take up to
# half of it, and the search stops in time for the steps after it.
time = ""
# Evaluations for the whole-program stages (0: half the budget).
stage_budget = 0
# Whole-program stages tried first, each measured against the recorded build: PGO,
# full LTO and ThinLTO (with lld), and their compositions. The best verified one becomes
# the baseline that per-file flags are tuned on; BOLT (bolt-19) is tried last, on the
# result; [] tunes per-file flags only.
stages = ["pgo", "lto", "thinlto", "bolt"]
# Tune the hottest units: at most max_units, stopping once they hold coverage % of the profile.
max_units = 4
coverage = 90.0
# -march=native makes the tuned build run on this CPU family only: opt in.  With it, tune
# measures -march=native on every unit on top of the stages it chose (kept when verified
# faster), and per file in the search.
native = false
# Compile each candidate first and measure only those a model (trained on what was
# measured here and on earlier programs) ranks best; `autopass screen` shows what it knows.
screen = false
# Measure each changed unit's own cost too (perf samples per unit, 8 extra runs of each
# side), and compose the units that attribution finds faster into one candidate that the
# whole-program A/B then verifies.
attribute = false
flags_db = "autopass.flags.json"
# The strategy's own options (`autopass tune --list-strategies` lists each one's).
# options = {{ population = 12 }}

[agent]
# Who plays analyst, planner and diagnoser for --strategy agent:
# "rules" (offline, built in), "openai" (any OpenAI-compatible endpoint: a hosted API,
# vLLM, llama.cpp server, Ollama), or "replay" (a saved transcript, for demos and tests).
backend = "rules"
# For openai: model and endpoint (default: $AUTOPASS_MODEL, $OPENAI_BASE_URL); the key is
# read from the variable named here, never from this file.
model = ""
base_url = ""
api_key_env = "OPENAI_API_KEY"
max_calls = 60
max_tokens = 400000
# Seconds per call, and retries (with backoff) on 429, 5xx and timeouts.
# timeout = 120
# retries = 3
# For replay: the transcript to replay, e.g. ".autopass/runs/<run>/transcript.jsonl"
# transcript = ""
'''


def starter_text(build: str | list[str] = "make -j2", target: str = "",
                 clean: str | None = "make clean") -> str:
    """`build`: a string (run by the shell) or an argument vector.  A JSON string or
    array of strings is TOML too, escapes included.  `clean` None: left for the user."""
    clean_line = (f"clean = {json.dumps(clean)}" if clean is not None else
                  '# clean = "..."    # set it: autopass could not tell how to clean this build')
    return STARTER.format(build=json.dumps(build), target=json.dumps(target),
                          clean_line=clean_line)
