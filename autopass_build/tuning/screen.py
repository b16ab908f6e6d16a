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

Labels per unit.  With `tune --attribute` every measured candidate also says how much
each changed unit's own cost moved (attribution), and each unit's code change is known
on its own, so the model learns unit -> unit: that unit's relative code features against
its attributed log ratio, several samples per measured candidate and none of them
blurred by the other units' changes.  A candidate is then predicted unit by unit and
composed by profile share: 1 + sum(share_u x (predicted_u - 1)).  Without unit labels
(no attribution) the model learns the program's ratio from share-weighted features.

Features are relative (candidate over baseline) and say what the code became, not which
flags made it, so what one program taught can apply to the next: measured evaluations
persist in the user's cache (`knowledge.json`, one file per compiler and CPU,
versioned).  Another program's evaluations weigh less as
this run's accumulate (`sample_weights`).  A file that cannot be read or has another
version is set aside and started afresh, never trusted and never a crash.  The model is
refitted from that data on use (well under a second at these sizes), so no pickled
model is ever loaded.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field

from autopass_build.core.errors import AutopassError
from autopass_build.core.files import hash_json
from autopass_build.core.flags import UnitFlags
from autopass_build.evidence.codeshape import CODE_FEATURES, code_shape, relative
from autopass_build.tuning.journal import Entry, Phase
from autopass_build.tuning.knowledge import Knowledge, Sample, knowledge_path
from autopass_build.tuning.run import RunContext


@dataclass
class Options:
    keep: float = 0.5          # measure candidates in this best fraction of predictions
    min_samples: int = 6       # measured evaluations before anything is screened out
    max_skips: int = 3         # consecutive screened-out candidates at most
    check_after: int = 4       # measured predictions before the model's ranking is judged
    min_tau: float = 0.0       # below this Kendall tau on them, nothing is screened out
    transfer_prior: float = 3.0  # see sample_weights
    unit_labels: bool = True   # learn per unit where attribution measured units
    min_unit_samples: int = 12  # per-unit samples before the per-unit model is used

UNIT = "unit"                  # a knowledge sample's "level" when it is one unit's


# -- the model ----------------------------------------------------------------------------
EXTRA = "pip install 'autopass[screen]'"


class ScreenUnavailable(AutopassError):
    """Screening asked for where its model's library is not installed."""


def require() -> None:
    """ScreenUnavailable, naming the extra to install, where scikit-learn is missing:
    screening is opt-in, and a plain install leaves its model's library out."""
    try:
        import scipy.stats  # noqa: F401
        import sklearn.ensemble  # noqa: F401
    except ImportError:
        raise ScreenUnavailable("screening (tune --screen, [tune].screen) needs scikit-learn, "
                                f"which a plain install leaves out: {EXTRA}") from None


class Model:
    """Gradient boosting (scikit-learn) from features to log(candidate/baseline)."""

    def __init__(self, samples: list[Sample], seed: int = 0,
                 weights: list[float] | None = None):
        from sklearn.ensemble import GradientBoostingRegressor

        self.names = sorted({k for s in samples for k in s.features})
        self.fitted = len(samples) >= 2
        self.regressor = GradientBoostingRegressor(
            n_estimators=150, max_depth=3, learning_rate=0.05, subsample=0.8,
            random_state=seed)
        if self.fitted:
            self.regressor.fit([self._row(s.features) for s in samples],
                               [s.target for s in samples], sample_weight=weights)

    def _row(self, features: dict[str, float]) -> list[float]:
        return [float(features.get(name, 0.0)) for name in self.names]

    def predict(self, features: list[dict[str, float]]) -> list[float]:
        if not self.fitted:
            return [0.0] * len(features)
        return [float(v) for v in self.regressor.predict([self._row(f) for f in features])]


def sample_weights(training: list[Sample], program: str, prior: float) -> list[float]:
    """This program's evaluations weigh 1; another program's weigh prior / (prior + n),
    n this program's count: all there is before a run measured anything, a third of one
    after 6 (prior 3).  What transfers gives way as this program's evidence grows."""
    own = sum(1 for s in training if s.program == program)
    other = prior / (prior + own)
    return [1.0 if s.program == program else other for s in training]


def sample_of(evaluation: Entry, program: str) -> Sample | None:
    """What the model learns from a measured evaluation (a journal entry, or one a
    benchmark recorded): its features and log ratio; None for one that was not compiled
    or whose measurement failed."""
    if not evaluation.features or not evaluation.ratio:
        return None
    return Sample(evaluation.features, math.log(evaluation.ratio), program,
                  f"{evaluation.phase}:{evaluation.config}")


def unit_samples_of(evaluation: Entry, program: str) -> list[Sample]:
    """What the per-unit model learns from a measured evaluation: for each changed unit
    attribution measured, that unit's code features and its own log ratio."""
    shapes = evaluation.unit_features or {}
    return [Sample(shapes[e.source], math.log(e.ratio), program,
                   f"{evaluation.phase}:{evaluation.config}:{e.source}", UNIT)
            for e in evaluation.effects if e.source in shapes and e.ratio > 0]


def composed(unit_ratios: dict[str, float], shares: dict[str, float]) -> float:
    """The program's ratio from its units' ratios and their shares (fractions) of it."""
    return 1.0 + sum(shares.get(u, 0.0) * (r - 1.0) for u, r in unit_ratios.items())


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
    unit_features: dict[str, dict[str, float]] = field(default_factory=dict)


class Ranker:
    """Whether to measure a candidate, from its features alone: the model over the shared
    knowledge and this run's measured samples, the run's predictions so far (a rank is
    among them), its self-check and its run of skips.  Knows nothing of compilers, so a
    benchmark can replay recorded candidates through it."""

    def __init__(self, known: list[Sample], program: str, options: Options, seed: int = 0):
        self.known = [s for s in known if s.level != UNIT]
        self.known_units = [s for s in known if s.level == UNIT]
        self.program = program
        self.options = options
        self.seed = seed
        self.samples: list[Sample] = []                # this run's measured evaluations
        self.unit_samples: list[Sample] = []           # ... and their units' (attribution)
        self.checked: list[tuple[float, float]] = []   # (predicted, measured) ratios
        self.predictions: list[float] = []
        self.skips = 0
        self._models: dict[str, tuple[int, Model]] = {}   # "program"/"unit" -> (size, fit)

    def decide(self, features: dict[str, float],
               units: dict[str, dict[str, float]] | None = None,
               shares: dict[str, float] | None = None) -> Judgement:
        """`features`: the candidate's share-weighted code change; `units`: each changed
        unit's own, with `shares` (fractions of the program) for the per-unit model."""
        predicted, basis = self._predicted(features, units or {}, shares or {})
        if predicted is None:
            return Judgement(features, None, True, f"learning ({basis})", units or {})
        judgement = self._ranked(features, predicted, basis)
        judgement.unit_features = units or {}
        return judgement

    def _predicted(self, features: dict[str, float], units: dict[str, dict[str, float]],
                   shares: dict[str, float]) -> tuple[float | None, str]:
        unit_training = self.known_units + self.unit_samples
        if (self.options.unit_labels and units
                and len(unit_training) >= self.options.min_unit_samples):
            model = self._fitted("unit", unit_training)
            names = sorted(units)
            ratios = [math.exp(v) for v in model.predict([units[n] for n in names])]
            return composed(dict(zip(names, ratios)), shares), "per unit"
        training = self.known + self.samples
        if len(training) < self.options.min_samples:
            return None, f"{len(training)} samples"
        return math.exp(self._fitted("program", training).predict([features])[0]), ""

    def _ranked(self, features: dict[str, float], predicted: float, basis: str) -> Judgement:
        better = sum(1 for p in self.predictions if p < predicted)
        self.predictions.append(predicted)
        rank = better / len(self.predictions)
        said = f"predicted {predicted:.4f}x{' ' + basis if basis else ''}, rank {rank:.0%}"
        distrust = misranking(self.checked, self.options)
        if distrust:
            return Judgement(features, predicted, True, f"{said}; {distrust}")
        if rank < self.options.keep or self.skips >= self.options.max_skips:
            self.skips = 0
            return Judgement(features, predicted, True, said)
        self.skips += 1
        return Judgement(features, predicted, False, f"{said} of this run's predictions "
                         f"(keeps the best {self.options.keep:.0%})")

    def learn(self, sample: Sample, predicted: float | None,
              unit_samples: list[Sample] | None = None) -> None:
        """A measured evaluation (features, log ratio) and its units' (unit_samples_of);
        `predicted` the ratio the model gave it before, if any."""
        self.samples.append(sample)
        self.unit_samples.extend(unit_samples or [])
        if predicted is not None:
            self.checked.append((predicted, math.exp(sample.target)))

    def _fitted(self, level: str, training: list[Sample]) -> Model:
        size, model = self._models.get(level, (-1, None))
        if model is None or size != len(training):
            weights = sample_weights(training, self.program, self.options.transfer_prior)
            model = Model(training, self.seed, weights)
            self._models[level] = (len(training), model)
        return model


class Screener:
    """Judges candidates for one tuning run by the code they compile to.  `blocks` is the
    joint space's [(source, space)], `shares` each source's profile share, `functions`
    its hot functions; `entries` the run's journal so far (a resumed run relearns from
    it)."""

    def __init__(self, evaluator, blocks: list, shares: dict[str, float],
                 functions: dict[str, set[str]], knowledge: Knowledge, program: str,
                 options: Options, entries: list[Entry], seed: int = 0):
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
        self.ranker.predictions = [e.predicted for e in entries if e.predicted is not None]

    @classmethod
    def for_run(cls, run: RunContext, options: Options, knowledge_file: str = "") -> "Screener":
        """The screener of a tuning run, with the shared knowledge of this compiler and
        CPU (or `knowledge_file`), relearning from the run's journal on a resume."""
        knowledge = Knowledge.load(knowledge_file
                                   or knowledge_path(run.evaluator.units[0].compiler_id))
        if knowledge.note:
            run.show(knowledge.note)
        run.show(f"screening candidates: {len(knowledge.samples)} evaluations known from "
                 f"{len(knowledge.programs())} earlier program(s)")
        program = hash_json([os.path.abspath(run.store.dir),
                             run.evaluator.target.output_rel])[:16]
        functions = {source: set(names) for source, names in run.hot_functions().items()}
        return cls(run.evaluator, run.space.blocks, run.shares(), functions, knowledge,
                   program, options, run.journal.entries, run.seed)

    def _shape(self, source: str, flags: tuple[str, ...]) -> dict[str, float]:
        unit = self.units[source]
        base = self.evaluator.base_flags.get(unit.id, ())
        path = self.evaluator.replayer.code_object_for(unit, base + tuple(flags))
        return code_shape(path, self.functions.get(source, set()))

    def unit_features(self, flags: UnitFlags) -> dict[str, dict[str, float]]:
        """Each changed unit's hot code relative to the baseline's.  The knob values
        themselves are left out: what a knob does differs between programs (and on
        tune-mini they ranked worse next to the loop features); the code it produces is
        what can transfer."""
        changes = {}
        for source, _ in self.blocks:
            if source not in flags:
                continue
            if source not in self._baseline:
                self._baseline[source] = self._shape(source, ())
            change = relative(self._shape(source, flags[source]), self._baseline[source])
            changes[source] = {"code:" + k: v for k, v in change.items()}
        return changes

    def features(self, units: dict[str, dict[str, float]]) -> dict[str, float]:
        """The units' code changes weighted by each unit's profile share."""
        total = sum(self.shares.get(s, 0.0) for s, _ in self.blocks) or 1.0
        result = dict.fromkeys(("code:" + k for k in CODE_FEATURES), 0.0)
        for source, change in units.items():
            for k, v in change.items():
                result[k] += self.shares.get(source, 0.0) / total * v
        return result

    def judge(self, flags: UnitFlags) -> Judgement:
        try:
            units = self.unit_features(flags)
        except Exception as error:   # screening is an optimization: never the search's end
            return Judgement({}, None, True, f"not screened ({error})")
        shares = {source: share / 100.0 for source, share in self.shares.items()}
        return self.ranker.decide(self.features(units), units, shares)

    def learn(self, entry: Entry) -> None:
        sample = sample_of(entry, self.program) if entry.phase == Phase.SEARCH else None
        if sample:
            self.ranker.learn(sample, entry.predicted, unit_samples_of(entry, self.program))

    def persist(self) -> None:
        """This run's measured evaluations, and their units', join the shared knowledge."""
        self.knowledge.add(self.ranker.samples + self.ranker.unit_samples)
        self.knowledge.save()
