"""Screening: rank a candidate by the code it compiles to, before paying to run it.

    candidate flags ──replay the hot units' objects (cached: measuring reuses them)──▶
    code shape of the hot functions (llvm-objdump: instruction mix; innermost loops and
    their cycles per iteration from llvm-mca) relative to the baseline's ──gradient
    boosting over every measured evaluation (this run and earlier programs')──▶
    predicted log(candidate/baseline) ──▶ measure or screen out

A compile costs seconds; a measurement costs many benchmark runs.  A candidate whose
prediction falls outside the best `keep` fraction of this run's predictions is
screened out: journaled with its prediction, told to the strategy as no gain, and not
counted against the budget.  At most `max_skips` in a row are screened out, and
nothing is screened until the model has `min_samples` measured evaluations to learn
from, so a poor model costs a few compiles, never the search.  The run also checks the
model against itself: once `check_after` candidates it predicted were measured, a
Kendall tau below `min_tau` between predictions and measurements stops all screening
until the model ranks this program's candidates better.

Features are relative (candidate over baseline, weighted by each unit's profile share)
and say what the code became, not which flags made it, so what one program taught can
apply to the next: measured evaluations persist in the user's cache (`knowledge.json`,
one file per compiler and CPU, versioned).  Another program's evaluations weigh less as
this run's accumulate (`sample_weights`).  A file that cannot be read or has another
version is set aside and started afresh, never trusted and never a crash.  The model is
refitted from that data on use (well under a second at these sizes), so no pickled
model is ever loaded.
"""

from __future__ import annotations

import bisect
import json
import math
import os
import platform
import re
import tempfile
from dataclasses import dataclass, field

from autopass_build.core import proc, toolchain
from autopass_build.core.files import hash_json, user_cache_dir, write_atomic

KNOWLEDGE_VERSION = 2     # 2: loop features, no knob values
CODE_FEATURES = ("size", "instructions", "branches", "calls", "vector", "memory",
                 "loops", "loop_instructions", "loop_cycles")
MAX_SAMPLES = 5000         # the knowledge file keeps the newest this many
_INSTRUCTION = re.compile(r"^\s+([0-9a-f]+):\s+([a-z][a-z0-9.]*)\s*(.*)$")
_FUNCTION = re.compile(r"^[0-9a-f]+ <(.+)>:$")
_TARGET = re.compile(r"^0x([0-9a-f]+)\b")
_THROUGHPUT = re.compile(r"Block RThroughput:\s+([0-9.]+)")
_MCA_ERROR = re.compile(r"loops\.s:(\d+):\d+: error")
_MCA_RETRIES = 5
_DISASSEMBLY_CAP = 256 << 20  # room for an amalgamation (sqlite3.c), not the default 1 MB


class ScreenError(Exception):
    pass


@dataclass
class Options:
    keep: float = 0.5          # measure candidates in this best fraction of predictions
    min_samples: int = 6       # measured evaluations before anything is screened out
    max_skips: int = 3         # consecutive screened-out candidates at most
    check_after: int = 4       # measured predictions before the model's ranking is judged
    min_tau: float = 0.0       # below this Kendall tau on them, nothing is screened out
    transfer_prior: float = 3.0  # see sample_weights


# -- code shape ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Instruction:
    address: int
    mnemonic: str
    operands: str          # AT&T, without objdump's trailing comment


def code_shape(object_path: str, functions: set[str]) -> dict[str, float]:
    """What `functions` of an object compiled to (all of .text when none is found): the
    instruction mix (bytes, instructions, branches, calls, vector instructions, memory
    operands) and their innermost loops (how many, their instructions, and llvm-mca's
    cycles per iteration summed over them)."""
    per_function = disassemble(object_path)
    chosen = [body for name, body in per_function.items() if name in functions] or list(
        per_function.values())
    shape = dict.fromkeys(CODE_FEATURES, 0.0)
    for body in chosen:
        for instruction in body:
            _count(shape, instruction.mnemonic, instruction.operands)
    loops = [loop for body in chosen for loop in innermost_loops(body)]
    shape["loops"] = float(len(loops))
    shape["loop_instructions"] = float(sum(len(loop) for loop in loops))
    shape["loop_cycles"] = sum(loop_cycles(loops))
    return shape


def disassemble(object_path: str) -> dict[str, list[Instruction]]:
    objdump = _tool("llvm-objdump")
    done = proc.run_captured([objdump, "-d", "--no-show-raw-insn", object_path],
                             os.path.dirname(object_path), proc.clean_env(dict(os.environ)), 120,
                             output_cap=_DISASSEMBLY_CAP)
    if done.status != 0:
        raise ScreenError(f"llvm-objdump failed on {object_path}")
    per_function: dict[str, list[Instruction]] = {}
    current = None
    for line in done.stdout.decode("utf-8", "replace").splitlines():
        header = _FUNCTION.match(line)
        if header:
            current = per_function.setdefault(header.group(1), [])
            continue
        found = _INSTRUCTION.match(line)
        if found and current is not None:
            current.append(Instruction(int(found.group(1), 16), found.group(2),
                                       found.group(3).split("#", 1)[0].strip()))
    return per_function


def innermost_loops(body: list[Instruction]) -> list[list[Instruction]]:
    """Loops as their backward jumps show them (target to jump), keeping those that
    contain no other: where a hot function spends its iterations."""
    spans = []
    for instruction in body:
        target = _TARGET.match(instruction.operands)
        if instruction.mnemonic.startswith("j") and target:
            start = int(target.group(1), 16)
            if start <= instruction.address:
                spans.append((start, instruction.address))
    inner = [(s, e) for s, e in spans
             if not any((s2, e2) != (s, e) and s <= s2 and e2 <= e for s2, e2 in spans)]
    addresses = [i.address for i in body]            # ascending, as disassembled
    return [body[bisect.bisect_left(addresses, s):bisect.bisect_right(addresses, e)]
            for s, e in inner]


def loop_cycles(loops: list[list[Instruction]]) -> list[float]:
    """llvm-mca's block reciprocal throughput (cycles per iteration on this CPU) of each
    loop body, jumps and calls left out, in one llvm-mca run.  A line it cannot parse
    (objdump's text is not always valid assembly) is dropped and the run repeated."""
    lines: list[str] = []
    for loop in loops:
        body = [f"{i.mnemonic} {i.operands}" for i in loop
                if not i.mnemonic.startswith(("j", "call", "ret"))]
        if body:
            lines += ["# LLVM-MCA-BEGIN", *body, "# LLVM-MCA-END"]
    if not lines:
        return []
    mca = _tool("llvm-mca")
    with tempfile.TemporaryDirectory(prefix="autopass-mca-") as folder:
        source = os.path.join(folder, "loops.s")
        for _ in range(_MCA_RETRIES):
            with open(source, "w") as handle:
                handle.write("\n".join(lines) + "\n")
            done = proc.run_captured([mca, "-mcpu=native", "-iterations=100",
                                      "-all-views=false", "-summary-view", source], folder,
                                     proc.clean_env(dict(os.environ)), 120)
            if done.status == 0:
                return [float(v) for v in _THROUGHPUT.findall(done.stdout.decode())]
            said = done.stderr.decode("utf-8", "replace")
            bad = {int(n) - 1 for n in _MCA_ERROR.findall(said)}
            if not bad:
                break
            lines = [line for n, line in enumerate(lines) if n not in bad]
    raise ScreenError(f"llvm-mca could not analyze the loops: {said[-300:]}")


def _tool(name: str) -> str:
    path = toolchain.find_tool(name)
    if path is None:
        raise ScreenError(f"{name} not found: " + toolchain.INSTALL_HINT.format(
            v=toolchain.DEFAULT_LLVM_VERSION))
    return path


def _count(shape: dict[str, float], mnemonic: str, operands: str) -> None:
    shape["instructions"] += 1
    shape["size"] += 1 + len(operands) / 8      # a length proxy without raw bytes
    if mnemonic.startswith("j"):
        shape["branches"] += 1
    elif mnemonic.startswith("call"):
        shape["calls"] += 1
    if "mm" in operands and (mnemonic.startswith("v") or mnemonic.startswith("p")
                             or mnemonic.endswith("ps") or mnemonic.endswith("pd")):
        shape["vector"] += 1
    if "(" in operands or "[" in operands:
        shape["memory"] += 1


def relative(candidate: dict[str, float], baseline: dict[str, float]) -> dict[str, float]:
    """log(candidate / baseline) per feature, +1 smoothed (a count may be zero)."""
    return {k: math.log((candidate[k] + 1) / (baseline[k] + 1)) for k in CODE_FEATURES}


# -- the shared knowledge -----------------------------------------------------------------

def knowledge_path(compiler_id: str) -> str:
    """One file per compiler and CPU: what -O3 does differs between them."""
    cpu = _cpu_model()
    key = hash_json([KNOWLEDGE_VERSION, compiler_id, cpu])[:16]
    return user_cache_dir("screen", f"knowledge-{key}.json")


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.machine()


@dataclass
class Knowledge:
    """Measured evaluations as (features, log ratio, program); `note` says why an
    unusable file was set aside."""
    path: str
    samples: list[dict] = field(default_factory=list)
    note: str = ""

    @classmethod
    def load(cls, path: str) -> "Knowledge":
        try:
            with open(path, encoding="utf-8") as handle:
                data = json.load(handle)
        except FileNotFoundError:
            return cls(path)
        except (OSError, ValueError) as error:
            return cls._set_aside(path, f"unreadable ({error})")
        if not isinstance(data, dict) or data.get("version") != KNOWLEDGE_VERSION:
            found = data.get("version") if isinstance(data, dict) else None
            return cls._set_aside(path, f"version {found!r}, this autopass uses "
                                        f"{KNOWLEDGE_VERSION}")
        samples = [s for s in data.get("samples", []) if _valid_sample(s)]
        return cls(path, samples)

    @classmethod
    def _set_aside(cls, path: str, why: str) -> "Knowledge":
        try:
            os.replace(path, path + ".bad")
        except OSError:
            pass
        return cls(path, note=f"screening knowledge {path} {why}: set aside as .bad, "
                              "starting afresh")

    def add(self, samples: list[dict]) -> None:
        known = {(s["program"], s["key"]) for s in self.samples}
        for sample in samples:
            if (sample["program"], sample["key"]) not in known:
                known.add((sample["program"], sample["key"]))
                self.samples.append(sample)
        self.samples = self.samples[-MAX_SAMPLES:]

    def save(self) -> None:
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        data = {"version": KNOWLEDGE_VERSION, "samples": self.samples}
        write_atomic(self.path, json.dumps(data).encode(), durable=False)

    def programs(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for s in self.samples:
            counts[s["program"]] = counts.get(s["program"], 0) + 1
        return counts


def _valid_sample(sample: object) -> bool:
    return (isinstance(sample, dict) and isinstance(sample.get("features"), dict)
            and isinstance(sample.get("target"), (int, float))
            and math.isfinite(sample["target"])
            and all(isinstance(v, (int, float)) for v in sample["features"].values())
            and isinstance(sample.get("program"), str) and isinstance(sample.get("key"), str))


# -- the model ----------------------------------------------------------------------------

class Model:
    """Gradient boosting (scikit-learn) from features to log(candidate/baseline)."""

    def __init__(self, samples: list[dict], seed: int = 0,
                 weights: list[float] | None = None):
        from sklearn.ensemble import GradientBoostingRegressor

        self.names = sorted({k for s in samples for k in s["features"]})
        self.fitted = len(samples) >= 2
        self.regressor = GradientBoostingRegressor(
            n_estimators=150, max_depth=3, learning_rate=0.05, subsample=0.8,
            random_state=seed)
        if self.fitted:
            self.regressor.fit([self._row(s["features"]) for s in samples],
                               [s["target"] for s in samples], sample_weight=weights)

    def _row(self, features: dict[str, float]) -> list[float]:
        return [float(features.get(name, 0.0)) for name in self.names]

    def predict(self, features: list[dict[str, float]]) -> list[float]:
        if not self.fitted:
            return [0.0] * len(features)
        return [float(v) for v in self.regressor.predict([self._row(f) for f in features])]


def sample_weights(training: list[dict], program: str, prior: float) -> list[float]:
    """This program's evaluations weigh 1; another program's weigh prior / (prior + n),
    n this program's count: all there is before a run measured anything, a third of one
    after 6 (prior 3).  What transfers gives way as this program's evidence grows."""
    own = sum(1 for s in training if s["program"] == program)
    other = prior / (prior + own)
    return [1.0 if s["program"] == program else other for s in training]


def sample_of(evaluation: dict, program: str) -> dict | None:
    """What the model learns from a measured evaluation (a journal entry, or one a
    benchmark recorded): its features and log ratio; None for one that was not compiled
    or whose measurement failed."""
    if not evaluation.get("features") or not evaluation.get("ratio"):
        return None
    return {"features": evaluation["features"], "target": math.log(evaluation["ratio"]),
            "program": program, "key": evaluation["key"]}


def misranking(checked: list[tuple[float, float]], options: Options) -> str:
    """Why the model's ranking is not to be acted on now ('' when it is), from
    (predicted, measured) ratios of a run's measured candidates.  Knowledge from other
    programs can misrank this one; this is how a run notices."""
    if len(checked) < options.check_after:
        return ""
    from scipy.stats import kendalltau  # scikit-learn's own dependency

    tau = kendalltau(*zip(*checked)).statistic
    if math.isnan(tau) or tau >= options.min_tau:
        return ""
    return (f"not screening: the model misranked this run's measured candidates "
            f"(Kendall tau {tau:.2f} over {len(checked)})")


# -- in the tuning loop -------------------------------------------------------------------

@dataclass
class Judgement:
    features: dict[str, float]
    predicted: float | None       # candidate/baseline ratio; None: not enough to go on
    measure: bool
    why: str


class Ranker:
    """Whether to measure a candidate, from its features alone: the model over the shared
    knowledge and this run's measured samples, the run's predictions so far (a rank is
    among them), its self-check and its run of skips.  Knows nothing of compilers, so a
    benchmark can replay recorded candidates through it."""

    def __init__(self, known: list[dict], program: str, options: Options, seed: int = 0):
        self.known = known
        self.program = program
        self.options = options
        self.seed = seed
        self.samples: list[dict] = []                  # this run's measured evaluations
        self.checked: list[tuple[float, float]] = []   # (predicted, measured) ratios
        self.predictions: list[float] = []
        self.skips = 0
        self._model: Model | None = None
        self._model_size = -1

    def decide(self, features: dict[str, float]) -> Judgement:
        training = self.known + self.samples
        if len(training) < self.options.min_samples:
            return Judgement(features, None, True, f"learning ({len(training)} samples)")
        predicted = math.exp(self._fitted(training).predict([features])[0])
        better = sum(1 for p in self.predictions if p < predicted)
        self.predictions.append(predicted)
        rank = better / len(self.predictions)
        said = f"predicted {predicted:.4f}x, rank {rank:.0%}"
        distrust = misranking(self.checked, self.options)
        if distrust:
            return Judgement(features, predicted, True, f"{said}; {distrust}")
        if rank < self.options.keep or self.skips >= self.options.max_skips:
            self.skips = 0
            return Judgement(features, predicted, True, said)
        self.skips += 1
        return Judgement(features, predicted, False, f"{said} of this run's predictions "
                         f"(keeps the best {self.options.keep:.0%})")

    def learn(self, sample: dict, predicted: float | None) -> None:
        """A measured evaluation (features, log ratio); `predicted` the ratio the model
        gave it before, if any."""
        self.samples.append(sample)
        if predicted is not None:
            self.checked.append((predicted, math.exp(sample["target"])))

    def _fitted(self, training: list[dict]) -> Model:
        if self._model is None or self._model_size != len(training):
            weights = sample_weights(training, self.program, self.options.transfer_prior)
            self._model = Model(training, self.seed, weights)
            self._model_size = len(training)
        return self._model


class Screener:
    """Judges candidates for one tuning run by the code they compile to.  `blocks` is the
    joint space's [(source, space)], `shares` each source's profile share, `functions`
    its hot functions; `entries` the run's journal so far (a resumed run relearns from
    it)."""

    def __init__(self, evaluator, blocks: list, shares: dict[str, float],
                 functions: dict[str, set[str]], knowledge: Knowledge, program: str,
                 options: Options, entries: list[dict], seed: int = 0):
        self.evaluator = evaluator
        self.blocks = blocks
        self.shares = shares
        self.functions = functions
        self.knowledge = knowledge
        self.program = program
        self.units = {source: next(u for u in evaluator.units if u.source_rel == source)
                      for source, _ in blocks}
        self._baseline: dict[str, dict[str, float]] = {}
        self.ranker = Ranker(knowledge.samples, program, options, seed)
        for entry in entries:
            self.learn(entry)
        self.ranker.predictions = [e["predicted"] for e in entries
                                   if e.get("predicted") is not None]

    def _shape(self, source: str, flags: tuple[str, ...]) -> dict[str, float]:
        unit = self.units[source]
        base = self.evaluator.base_flags.get(unit.id, ())
        path = self.evaluator.replayer.object_for(unit, base + tuple(flags))
        return code_shape(path, self.functions.get(source, set()))

    def features(self, flags: dict[str, tuple[str, ...]]) -> dict[str, float]:
        """The code of the candidate's hot functions relative to the baseline's, weighted
        by each unit's profile share.  The knob values themselves are left out: what a
        knob does differs between programs (and on tune-mini they ranked worse next to
        the loop features); the code it produces is what can transfer."""
        total = sum(self.shares.get(s, 0.0) for s, _ in self.blocks) or 1.0
        result = dict.fromkeys(("code:" + k for k in CODE_FEATURES), 0.0)
        for source, _ in self.blocks:
            if source not in flags:
                continue
            if source not in self._baseline:
                self._baseline[source] = self._shape(source, ())
            change = relative(self._shape(source, flags[source]), self._baseline[source])
            for k, v in change.items():
                result["code:" + k] += self.shares.get(source, 0.0) / total * v
        return result

    def judge(self, flags: dict[str, tuple[str, ...]]) -> Judgement:
        try:
            features = self.features(flags)
        except Exception as error:   # screening is an optimization: never the search's end
            return Judgement({}, None, True, f"not screened ({error})")
        return self.ranker.decide(features)

    def learn(self, entry: dict) -> None:
        sample = self._sample(entry)
        if sample:
            self.ranker.learn(sample, entry.get("predicted"))

    def _sample(self, entry: dict) -> dict | None:
        return sample_of(entry, self.program) if entry.get("phase") == "search" else None

    def persist(self) -> None:
        """This run's measured evaluations join the shared knowledge."""
        self.knowledge.add(self.ranker.samples)
        self.knowledge.save()
