"""The model of `autopass.toml`: its sections and keys, each with its default and what it
means.  The configuration reference (docs/configuration.md) and the starter file that
`autopass init` writes are generated from these records (config/starter.py), so a key
cannot land undocumented and the two cannot drift from the code."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from autopass_build.core.errors import AutopassError
from autopass_build.core.names import (
    AGENT_BACKENDS,
    DEFAULT_STRATEGY,
    FLAGS_DB_NAME,
    METRICS,
    STAGES,
    STRATEGY_NAMES,
)

CHECK_MODES = ("output", "numbers", "exit-code", "command")
SHIP_MODES = ("auto", "always", "never")   # [cluster].ship


class ConfigError(AutopassError):
    pass


# How a key's TOML value becomes its value, where its Python type does not say it (a
# string or a list for a command; a table; stages; regular expressions): named on the key
# itself (loading._coerce), never guessed from its name.
SHELL, ARGV_PARSER, TABLE_OF_STRINGS, TABLE_OF_NUMBERS, STAGE_LIST, PATTERNS, PATHS = (
    "shell", "argv", "strings", "numbers", "stages", "patterns", "paths")
# [check].ignore: how many regular expressions, how long each (a typo'd pattern that
# backtracks is a slow run, not a result)
MAX_PATTERNS, MAX_PATTERN = 32, 200


def key(default: Any, doc: str, *, kind: str = "", example: str = "",
        shown: str = "", choices: tuple[str, ...] = (), least: float | None = None,
        most: float | None = None, above: float | None = None,
        below: float | None = None, parser: str = "", why: str = "") -> Any:
    """A key of autopass.toml.  `doc`: what it means (the reference and the starter file
    say it); `kind`: its TOML type in a user's words where the Python type does not say
    it; `example`: TOML text the starter file shows commented out (the key then stays
    unset there); `shown`: TOML text the starter file sets instead of the default.
    What a value may be is declared here, once, and loading.py checks it, the reference
    and the JSON schema say it: `choices` (a string among these), `least`/`most`
    (bounds, included), `above`/`below` (bounds, excluded), `parser` (see SHELL ...);
    `why`: what a value out of bounds means, said after the bound it broke."""
    meta = {"doc": doc, "kind": kind, "example": example, "shown": shown,
            "choices": tuple(choices), "least": least, "most": most, "above": above,
            "below": below, "parser": parser, "why": why}
    if isinstance(default, tuple):
        return field(default_factory=lambda: default, metadata=meta)
    return field(default=default, metadata=meta)


COMMAND = "string (run by sh -c) or list of strings"
ARGV = "string (split like a shell) or list of strings"


@dataclass(frozen=True)
class BuildConfig:
    """The build to record (`autopass record` with no command runs it) and how to get back
    to a clean tree (`autopass verify` builds from scratch three times)."""
    command: tuple[str, ...] = key(
        (), "The build command. A string runs as your shell runs it (sh -c: `&&`, "
        "`>/dev/null` and variables work); a list of strings is one argument vector, run "
        "without a shell.", kind=COMMAND, parser=SHELL)
    root: str = key(".", "The folder the build runs in, relative to this file (`autopass "
                    "record` and `verify`).", example='"."')
    clean: tuple[str, ...] = key(
        (), "The command that brings the tree back to clean (`make clean`, `ninja -t "
        "clean`); `autopass verify` needs it to build from scratch.", kind=COMMAND,
        parser=SHELL)


@dataclass(frozen=True)
class RunConfig:
    """The benchmark: what `try`, `tune` and `verify` run to time a build."""
    command: tuple[str, ...] = key(
        (), 'The benchmark (required for try and tune). "{exe}" is replaced by the binary '
        'under test. A list of strings avoids any quoting question: ["{exe}", "--size", '
        '"4"]. Never run by a shell.', kind=ARGV, shown='"{exe}"', parser=ARGV_PARSER)
    target: str = key("", "Which recorded binary to tune (see `autopass targets`); default: "
                      "the only executable.")
    cwd: str = key(".", "The folder the benchmark runs in, relative to this file.")
    env: tuple[tuple[str, str], ...] = key(
        (), 'Environment added to the benchmark\'s, e.g. { LC_ALL = "C" }.',
        kind="table of strings", parser=TABLE_OF_STRINGS)
    timeout: float = key(120.0, "Seconds the baseline may take; a candidate is killed at "
                         "[measure].timeout_factor times the baseline's time.", above=0,
                         why="it is a time limit in seconds, e.g. 120")
    inputs: tuple[str, ...] = key(
        (), "Files the benchmark reads (relative to cwd), checked to exist before anything "
        "runs.", kind="list of paths", example='["data/input.bin"]', parser=PATHS)
    stdin: str = key("", "A file fed to the benchmark's standard input on every run (else "
                     "/dev/null).", example='"input.txt"')
    train: tuple[str, ...] = key(
        (), "A training run for profile-guided optimization, when it should differ from "
        "the benchmark (other inputs); default: the benchmark. When set, `autopass tune` "
        "tunes on top of the PGO build.", kind=ARGV,
        example='["{exe}", "training-input.txt"]', parser=ARGV_PARSER)


@dataclass(frozen=True)
class CheckConfig:
    """How a candidate's output is judged correct before its time counts."""
    mode: str = key(
        "output", '"output": exit code and stdout equal the baseline\'s. "numbers": the '
        "same, but numbers in stdout may differ by the relative `tolerance` (a program "
        'built with -ffast-math rounds differently under other flags). "exit-code": only '
        'the exit code must match. "command": a checker that gets "{outdir}" (holding '
        "stdout, stderr, exit_code) must exit 0.", kind=" | ".join(CHECK_MODES),
        choices=CHECK_MODES)
    command: tuple[str, ...] = key(
        (), 'mode = "command": the checker, e.g. ["./check.sh", "{outdir}"] (giving one '
        "alone sets the mode).", kind=ARGV, example='["./check.sh", "{outdir}"]',
        parser=ARGV_PARSER)
    tolerance: float = key(1e-6, 'mode = "numbers": how far (relative) a number may be from '
                           "the baseline's.", example="1e-6", above=0,
                           why="it is a relative difference, e.g. 1e-6")
    files: tuple[str, ...] = key(
        (), "Files the benchmark writes (relative to [run].cwd), in any mode: each run must "
        "write them anew, byte for byte the baseline's.", kind="list of paths",
        example='["out.bin"]', parser=PATHS)
    ignore: tuple[str, ...] = key(
        (), 'Regular expressions for stdout lines not compared (modes "output" and '
        '"numbers"): what a program prints that changes every run, its own timing or a '
        "date.", kind="list of regular expressions", example='["^Time used:", "elapsed"]',
        parser=PATTERNS)


@dataclass(frozen=True)
class MeasureConfig:
    """How a candidate is timed against the baseline: interleaved pairs until the 95 %
    interval of their ratio is narrow enough."""
    metric: str = key(
        "wall", "wall | cpu (user+sys of the whole process tree) | user (its user time: "
        "leaves out the kernel's page faults and I/O, which flags do not change and which "
        "vary most between runs; for runs of 0.5 s or more) | instructions (callgrind: "
        "slow but deterministic) | cycles (perf stat, where the host has counters).",
        kind=" | ".join(METRICS), choices=METRICS)
    min_pairs: int = key(5, "Baseline/candidate pairs run before any verdict.", least=2)
    max_pairs: int = key(30, "Pairs after which the verdict is given as it stands (at "
                         "least min_pairs).", least=2)
    precision: float = key(0.01, "Stop once the interval's half-width is below this "
                           "fraction of the time.", above=0, below=0.5,
                           why="it is the interval's half-width as a fraction of the time, "
                           "e.g. 0.01")
    timeout_factor: float = key(3.0, "A candidate is killed at this many times the "
                                "baseline's time.", least=1,
                                why="a smaller one would kill a candidate before the "
                                "baseline's own time, e.g. 3")
    warmup: int = key(1, "Unmeasured runs of each side first.", least=0)
    pin_cpu: bool = key(True, "Hold single-threaded runs to one CPU away from CPU 0; a "
                        "program that keeps several CPUs busy is seen once and run "
                        "unpinned.")
    layout_check: bool = key(True, "Under metric = instructions, first count the baseline "
                             "linked in other orders of the same code (lld): where the "
                             "count moves with the layout alone (a program that hashes "
                             "addresses), verdicts ignore changes within twice that "
                             "spread (docs/guide.md). Costs two to four links and counted "
                             "runs, once.")
    duet: bool = key(False, "Run each pair's baseline and candidate at once, each on a "
                     "CPU of its own (swapped every pair), so that a burst of noise on a "
                     "shared machine slows both alike (measuring/duet.py). Needs two "
                     "CPUs, a timed metric and a benchmark that writes no files; "
                     "otherwise the pairs run one after the other, with a note. Off: on "
                     "a 2-CPU VM its intervals were 3x wider (docs/results.md); measure "
                     "it on your machine with bench/measure_calibration.py --duet.")


@dataclass(frozen=True)
class TuneConfig:
    """`autopass tune`: its strategy, budget and what it may change (its command-line
    options override these)."""
    strategy: str = key(DEFAULT_STRATEGY, "The search (`autopass tune --list-strategies` "
                        "says what each does).", kind=" | ".join(STRATEGY_NAMES),
                        choices=STRATEGY_NAMES)
    budget: int = key(40, "Candidate evaluations, each a rebuild and an A/B.", least=1)
    seed: int = key(0, "The random seed of the strategies that draw.", least=0)
    max_units: int = key(4, "Tune at most this many of the hottest units ...", least=1)
    coverage: float = key(90.0, "... stopping once they hold this % of the profile.",
                          above=0, most=100, why="it is a percentage of the profile, e.g. 90")
    native: bool = key(False, "Allow -march=native: tune measures it on top of the stages "
                       "it chose and per file. The tuned build then runs on this CPU "
                       "family only: opt in.")
    screen: bool = key(False, "Compile each candidate first and measure only those a model "
                       "(trained on what was measured here and on earlier programs) ranks "
                       "best; `autopass screen` shows what it knows.")
    attribute: bool = key(False, "Measure each changed unit's own cost too (perf samples "
                          "per unit, 8 extra runs of each side) and compose the units found "
                          "faster into one candidate the whole-program A/B verifies.")
    flags_db: str = key(FLAGS_DB_NAME, "Where the result is written (the flags database "
                        "`autopass apply` reads).")
    options: tuple[tuple[str, float], ...] = key(
        (), "The strategy's own options (`autopass tune --list-strategies` lists each "
        "one's).", kind="table of numbers", example="{ population = 12 }",
        parser=TABLE_OF_NUMBERS)
    stages: tuple[str, ...] = key(
        STAGES, "Whole-program stages tried first, each measured against the recorded "
        "build: PGO, full LTO and ThinLTO (with lld) and their compositions; the best "
        "verified one becomes the baseline per-file flags are tuned on; on top of the "
        "result, direct calls, CS-PGO, layout (machine-function splitting, hot/cold text), "
        "the link-level knobs under LTO (exttsp: ext-TSP block order, inline: the link's "
        "inliner at 500, bandwidth: its vectorizer by bandwidth) and BOLT are tried last. "
        "[] tunes per-file flags only.",
        kind="list of " + " | ".join(STAGES), parser=STAGE_LIST)
    time: str = key("", 'A time budget besides the evaluations ("45m", "2h"; "" for none): '
                    "the stages take up to half of it, and the search stops in time for "
                    "the steps after it.")
    stage_budget: int = key(0, "Evaluations for the whole-program stages (0: half the "
                            "budget).", least=0)
    decisions: bool = key(True, "Besides flags, tune decisions carried in the IR on the hot "
                          "units: each hot loop's vectorization, interleaving and unrolling, "
                          "each hot function's inlining. Unlike a unit's flags they reach "
                          "the code under LTO and ThinLTO (applying them needs autopass's "
                          "pass plugin, built with LLVM's headers).")
    layout_min_kib: int = key(4, "The layout steps (layout, BOLT) are skipped, with a line "
                              "that says why, where the hottest functions (90 % of the "
                              "recorded code's samples) take fewer KiB than this: code that "
                              "small is cached whole whatever its order. 0 tries them "
                              "always.", least=0)


@dataclass(frozen=True)
class AgentConfig:
    """Who plays analyst, planner and diagnoser for `--strategy agent`."""
    backend: str = key(
        "rules", '"rules" (offline, built in), "openai" (any OpenAI-compatible endpoint: a '
        'hosted API, vLLM, llama.cpp server, Ollama) or "replay" (a saved transcript, for '
        "demos and tests).", kind=" | ".join(AGENT_BACKENDS), choices=AGENT_BACKENDS)
    model: str = key("", "openai: the model (default: $AUTOPASS_MODEL).")
    base_url: str = key("", "openai: the endpoint (default: $OPENAI_BASE_URL, else the "
                        "openai client's default).")
    api_key_env: str = key("OPENAI_API_KEY", "The variable holding the key; the key itself "
                           "is never read from this file.")
    max_calls: int = key(60, "LLM calls per tuning run; then the rules agent takes over.",
                         least=0)
    max_tokens: int = key(400000, "Tokens per tuning run, likewise.", least=0)
    timeout: float = key(120.0, "Seconds an LLM call may take before it is retried.",
                        example="120", above=0)
    retries: int = key(3, "Retries per call, with backoff, on 429, 5xx and timeouts.",
                       example="3", least=0)
    transcript: str = key("", 'backend = "replay": the transcript.jsonl to replay, e.g. '
                          '".autopass/runs/<run>/transcript.jsonl".', example='""')


@dataclass(frozen=True)
class ClusterConfig:
    """Tuning on a Ray cluster (`pip install 'autopass[cluster]'`; docs/cluster.md): the
    stage compositions and the search's candidates are built and measured on the
    target group's machines, several candidates at once."""
    address: str = key("", 'The cluster to join ("ray://head:10001", "head:6379", or "auto" '
                       "for the one this machine belongs to); empty: tune on this machine "
                       "alone. autopass joins only an address given here or by `tune "
                       "--cluster`, and never starts a cluster.", example='"ray://head:10001"')
    target: str = key("", "The group of nodes whose verdicts count (a node's `autopass-cpu` "
                      "label, else its CPU model); default: this machine's CPU model.",
                      example='"Intel(R) Xeon(R) Gold 6338"')
    aa_noise: float = key(0.05, "A node measures the baseline against itself once, with a "
                          "final re-measurement's pairs; one whose interval's half-width is "
                          "wider than this (a fraction: 0.05 = ±5 %), or that calls it "
                          "faster or slower, gives no verdicts.", above=0, below=0.5,
                          why="it is a fraction of the baseline's time, e.g. 0.05")
    ship: str = key("auto", "Ship the project to the nodes (packed once, named and checked by "
                    "its SHA-256, cached on each node): \"auto\" when a node cannot see the "
                    "store at this machine's path, \"always\", or \"never\" (every node "
                    "needs the project at the same path: a shared filesystem).",
                    kind=" | ".join(SHIP_MODES), choices=SHIP_MODES)


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
    cluster: ClusterConfig = field(default_factory=ClusterConfig)

    def resolve(self, path: str) -> str:
        import os

        return os.path.normpath(os.path.join(self.project_dir, path))

    def moved(self, root: str, here: str) -> Config:
        """This configuration read in a copy of the project tree `root` at `here` (a
        cluster node's): its folder and file there."""
        from dataclasses import replace

        from autopass_build.core.files import moved

        return replace(self, project_dir=moved(self.project_dir, root, here),
                       path=moved(self.path, root, here) if self.path else None)


SECTIONS = {"build": BuildConfig, "run": RunConfig, "check": CheckConfig,
            "measure": MeasureConfig, "tune": TuneConfig, "agent": AgentConfig,
            "cluster": ClusterConfig}
