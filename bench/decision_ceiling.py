#!/usr/bin/env python3
"""The ceiling of the decisions carried in the IR on one program (issue 61): every value
of every decision knob tune offers on the hottest units' loops and functions, each alone
on top of the whole-program stages, counted by callgrind; then the best value of each
knob together, added one at a time and kept where it counts fewer.  Instructions, not
time: they repeat exactly, so one run each decides, and an exhaustive look fits in
minutes where pairs of timed runs would take hours.  A decision whose program writes
other output than the build without it (the vectorizer reorders floating-point sums
when a loop is given a width) is left out, as tune's output check leaves it out.

Usage: python bench/decision_ceiling.py [--program lame] [--stages pgo,thinlto]
           [--units 1] [--seconds 4] [--megabytes 1] [--digits 800]
           [--time-pairs 0]
           [--out decision-ceiling-out]
(--seconds: LAME's and Opus's input, in seconds of audio; --megabytes: zstd's and brotli's,
in MB of text; --digits: bc's, pi to that many digits; other programs run their own
benchmark.)
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))
import tune_classical as tc  # noqa: E402

from autopass_build.candidates import pgo, stages  # noqa: E402
from autopass_build.candidates.evaluate import Evaluator  # noqa: E402
from autopass_build.evidence.hotspots import load as load_profile  # noqa: E402
from autopass_build.evidence.inventory import of_unit  # noqa: E402
from autopass_build.measuring.benchmark import run_once  # noqa: E402
from autopass_build.tuning.decision_knobs import knobs_for  # noqa: E402
from autopass_build.tuning.stage_choice import opt_level  # noqa: E402

GAIN = 0.001        # fewer instructions than this share is the baseline's count


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


class Counter:
    """Builds of the program on the stages, each counted and its output hashed."""

    def __init__(self, evaluator: Evaluator, unit_flags: tuple[str, ...],
                 link_flags: tuple[str, ...]):
        self.evaluator, self.unit_flags, self.link_flags = evaluator, unit_flags, link_flags
        self.base = {u.id: unit_flags for u in evaluator.units}

    def build(self, added: dict[str, tuple[str, ...]]):
        flags = {uid: self.unit_flags + added.get(uid, ()) for uid in self.base}
        return self.evaluator.replayer.build(self.evaluator.target.output, flags,
                                             self.link_flags)

    def count(self, built) -> tuple[float, str]:
        """(instructions, hash of the output) of one run of `built`."""
        bench = self.evaluator.bench
        counted = run_once(bench, built.binary, built.env, bench.run.timeout * 100,
                           metric="instructions")
        if counted.value is None:
            raise SystemExit(f"callgrind could not count a run: {counted.detail}")
        output = counted.stdout_cut or hashlib.sha256(counted.stdout).hexdigest()
        return counted.value, output


def in_time(store, config, program: str, work: Path, counter: Counter,
            together: dict[str, tuple[str, ...]], pairs: int) -> dict:
    """The best decisions together against the stages alone in user time, `pairs`
    interleaved pairs of the program's own benchmark (not the shorter input the counts
    ran): whether fewer instructions are less time.  A run is killed only at ten times
    the stages' own time: this is not a test of the time limit, and a busy machine once
    made a brotli run take three times its time."""
    from dataclasses import replace

    timed = replace(config, run=replace(config.run, command=tuple(tc.CASES[program].command(work))),
                    measure=replace(config.measure, metric="user", min_pairs=pairs,
                                    max_pairs=pairs, timeout_factor=10.0))
    evaluator = Evaluator(store, timed)
    evaluator.rebase(counter.base, counter.link_flags)
    evaluation = evaluator.evaluate(together)
    estimate = evaluation.comparison.estimate if evaluation.comparison else None
    if estimate is None:
        return {"text": f"not measured ({evaluation.outcome}: {evaluation.detail[:120]})"}
    return {"ratio": 1 / estimate.ratio, "low": 1 / estimate.high, "high": 1 / estimate.low,
            "pairs": estimate.pairs, "verdict": str(evaluation.comparison.verdict),
            "text": f"speedup {1 / estimate.ratio:.4f}x [{1 / estimate.high:.4f}, "
                    f"{1 / estimate.low:.4f}] in {estimate.pairs} pairs: "
                    f"{evaluation.comparison.verdict}"}


def compose(counter: Counter, best: dict[tuple[str, str], tuple[float, tuple[str, ...]]],
            base_count: float, base_output: str) -> tuple[dict[str, tuple[str, ...]], dict | None]:
    """The best values together, added one at a time from the best alone down, each kept
    only when the build with it counts fewer instructions than without it and writes the
    same output: two decisions can undo each other (brotli's three unroll counts on one
    function's nested loops, 1.6 % each alone, 0.2 % all three)."""
    together: dict[str, tuple[str, ...]] = {}
    count, kept = base_count, 0
    for (uid, name), (_, value) in sorted(best.items(), key=lambda item: item[1][0]):
        trial = {**together, uid: together.get(uid, ()) + value}
        trial_count, output = counter.count(counter.build(trial))
        log(f"  with {name}: {base_count / trial_count:.4f}x fewer"
            + ("" if trial_count < count * (1 - GAIN) and output == base_output
               else " (not kept)"))
        if trial_count < count * (1 - GAIN) and output == base_output:
            together, count, kept = trial, trial_count, kept + 1
    if not together:
        return together, None
    return together, {"ratio": count / base_count, "same_output": True, "decisions": kept}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0],
                                     epilog=__doc__.split("\n\n", 1)[1],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--program", default="lame", choices=sorted(tc.CASES))
    parser.add_argument("--stages", default="pgo,thinlto")
    parser.add_argument("--units", type=int, default=1, help="the hottest units searched")
    parser.add_argument("--seconds", type=int, default=4)
    parser.add_argument("--megabytes", type=float, default=1.0,
                        help="zstd's and brotli's input, in MB of text")
    parser.add_argument("--digits", type=int, default=800,
                        help="bc's input: pi to this many digits")
    parser.add_argument("--time-pairs", type=int, default=0,
                        help="then the best decisions together against the stages in "
                             "user time, this many pairs of the benchmark's own input")
    parser.add_argument("--out", type=Path, default=Path("decision-ceiling-out"))
    args = parser.parse_args()
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="autopass-ceiling-") as scratch:
        work = Path(scratch)
        command = {   # a shorter input than the timed benchmark's: callgrind is ~50x slower
            "lame": lambda w: ["{exe}", "--silent", "-V", "2",
                               str(tc.wav_input(w / "short.wav", args.seconds)), "-"],
            "libzstd": lambda w: ["{exe}", "-q", "-c", "-7",
                                  str(tc.text_input(w / "short.txt", args.megabytes))],
            "bc": lambda w: ["{exe}", "-l", str(tc.bc_pi(w / "short.bc", args.digits))],
            "brotli": lambda w: ["{exe}", "-q", "9", "-c",
                                 str(tc.text_input(w / "short.txt", args.megabytes))],
            "opus": lambda w: ["{exe}", "audio", "48000", "2", "96000",
                               str(tc.wav_input(w / "short.wav", args.seconds)), "decoded.raw"],
        }.get(args.program)
        store, config = tc.prepare(args.program, work, "instructions", command=command)
        evaluator = Evaluator(store, config)
        composition = stages.parse(args.stages.split(","))
        profile = pgo.train(evaluator) if stages.Stage.PGO in composition else None
        flags = stages.flags(composition, opt_level(evaluator),
                             profile.use_flag() if profile else "")
        counter = Counter(evaluator, flags.unit_flags, flags.link_flags)
        base_count, base_output = counter.count(counter.build({}))
        log(f"{args.program} on {stages.name(composition)}: {base_count:.0f} instructions")
        found = load_profile(store.dir)
        if found is None:
            raise SystemExit(f"no profile of {args.program}: `autopass profile` found none")
        shares = found.unit_shares()
        hottest = sorted(evaluator.units, key=lambda u: -shares.get(u.source_rel, 0.0))
        rows: list[dict] = []
        best: dict[tuple[str, str], tuple[float, tuple[str, ...]]] = {}
        for unit in hottest[:args.units]:
            functions = {f.symbol: f.share for f in found.functions
                         if unit.source_rel in f.units}
            knobs = knobs_for(of_unit(evaluator.replayer, unit), functions,
                              evaluator.out_of_line(unit), found.inlined())
            log(f"{unit.source_rel} ({shares.get(unit.source_rel, 0):.0f} % of the run): "
                f"{len(knobs)} knobs")
            for knob in knobs:
                for index, value in enumerate(knob.values[1:], 1):
                    built = counter.build({unit.id: value})
                    count, output = counter.count(built)
                    ratio = count / base_count
                    same = output == base_output
                    rows.append({"unit": unit.source_rel, "knob": knob.name,
                                 "value": knob.short(index), "ratio": ratio,
                                 "same_output": same})
                    log(f"  {knob.name}={knob.short(index)}: {ratio:.4f}"
                        + ("" if same else " (other output: left out)"))
                    if same and ratio < 1 - GAIN and ratio < best.get(
                            (unit.id, knob.name), (1.0, ()))[0]:
                        best[(unit.id, knob.name)] = (ratio, value)
        together, combined = compose(counter, best, base_count, base_output)
        timed = None
        if together and args.time_pairs:
            timed = in_time(store, config, args.program, work, counter, together,
                            args.time_pairs)
            log(f"together, in user time on the benchmark's own input: {timed['text']}")
        result = {"program": args.program, "stages": stages.name(composition),
                  "baseline_instructions": base_count, "candidates": rows,
                  "best": [{"knob": k, "ratio": r} for (_, k), (r, _) in best.items()],
                  "together": combined, "in_time": timed,
                  "minutes": round((time.monotonic() - started) / 60)}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "decision_ceiling.json").write_text(json.dumps(result, indent=1))
    log(f"{len(rows)} candidates; {len(best)} knobs with a value that runs "
        f"{GAIN:.1%} fewer instructions or more")
    for (_, name), (ratio, _) in sorted(best.items(), key=lambda item: item[1][0]):
        log(f"  {name}: {1 / ratio:.4f}x fewer")
    if combined:
        log(f"together: {1 / combined['ratio']:.4f}x fewer instructions than "
            f"{stages.name(composition)}" + ("" if combined["same_output"]
                                              else " (but other output)"))
    log(f"{result['minutes']} min; wrote {args.out / 'decision_ceiling.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
