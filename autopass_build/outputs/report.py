"""`autopass report`: what one tuning run did, for a terminal or as one HTML file.

From the run's journal (nothing is re-measured): what it shipped against the recorded
build first, each stage composition, the search's progress (best clear gain after each
candidate), the final per-file flags with their measured gains and why, and the
rejected candidates by outcome.  The HTML report is self-contained: the figures
(outputs/figures.py) are drawn by matplotlib and embedded as PNGs, so the file can be
mailed or attached to a pull request.
"""

from __future__ import annotations

import base64
import html
import io
import json
from collections import Counter
from dataclasses import dataclass

from autopass_build.candidates.stages import ON_TOP, link_time, step_on_top
from autopass_build.candidates.stages import name as composition_name
from autopass_build.core.outcome import Outcome
from autopass_build.core.plural import counted
from autopass_build.measuring.stats import FASTER, SAME, SLOWER, UNCLEAR
from autopass_build.outputs.figures import (
    BarKind,
    chosen_stages,
    last_stage_looks,
    run_png,
    shipped_bars,
)
from autopass_build.tuning.journal import STAGE_PHASES, VERSUS_RECORDED, Entry, Journal, Phase
from autopass_build.tuning.rivals import close_rival
from autopass_build.tuning.settings import RunSettings


@dataclass
class ShippedFlags:
    """A source's flags in the final result, with the measurement that showed its gain."""
    flags: str
    measured: Entry        # the unit alone (attribute/search), or the final combination


@dataclass
class RunSummary:
    run_id: str
    settings: RunSettings
    curve: list[float]                 # best clear gain (1 - ratio) after each measured evaluation
    final: Entry | None
    winners: dict[str, ShippedFlags]
    outcomes: Counter                  # search evaluations by outcome
    evaluations: int
    versus_recorded: dict[Phase, Entry]   # on PGO runs, against the recorded build
    entries: list[Entry]
    identical: int = 0                 # candidates that were the baseline: not measured
    baseline: str | None = None        # the composition the search ran on (Journal.baseline)


def summarize(journal: Journal) -> RunSummary:
    entries = journal.entries
    clear_phase = Phase.CONFIRM if journal.of_phase(Phase.CONFIRM) else Phase.SEARCH
    curve: list[float] = []
    best = 0.0
    for e in entries:
        if e.phase == clear_phase and e.verdict == FASTER and e.ratio is not None:
            best = max(best, 1 - e.ratio)
            if e.phase == Phase.CONFIRM and curve:
                curve[-1] = best
        if e.phase == Phase.SEARCH and not e.identical:
            curve.append(best)
    finals = journal.of_phase(Phase.FINAL)
    final = finals[-1] if finals else None
    outcomes = Counter(str(e.outcome) for e in journal.of_phase(Phase.SEARCH))
    versus = {e.phase: e for e in journal.of_phase(*VERSUS_RECORDED)}
    identical = sum(1 for e in journal.of_phase(Phase.SEARCH) if e.identical)
    return RunSummary(journal.run_id, journal.settings, curve, final,
                      _winners(entries, final), outcomes, len(curve), versus, entries,
                      identical, journal.baseline)


def versus_lines(entries: dict[Phase, Entry]) -> list[str]:
    """'PGO alone against the recorded build: 0.9512x [...] -> faster' and the like."""
    lines = []
    for phase, label in VERSUS_RECORDED.items():
        e = entries.get(phase)
        if e is not None:
            verdict = f" -> {e.verdict}" if e.measured else ""
            lines.append(f"{label} against the recorded build: {e.interval_text()}{verdict}")
    return lines


def stage_lines(entries: list[Entry], baseline: str | None = None) -> list[str]:
    """Each whole-program composition measured: its gain against the recorded build and
    against each composition it extends ('pgo+lto: ...; 0.93x of pgo'); native and BOLT,
    each against the build without it; and which build the per-file search ran on."""
    measured = last_stage_looks(entries)    # a confirmation replaces the first look
    lines = [_stage_line(name, e, measured) for name, e in measured.items()]
    for e in measured.values():
        step = step_on_top(e.composition)
        if step is not None:
            kept = e.verdict == FASTER and e.measured
            lines.append(f"{ON_TOP[step]} on top: {'kept' if kept else 'not kept'}")
    lines += [_head_to_head_line(e, entries) for e in entries if e.phase == Phase.STAGE_RIVAL]
    chosen = chosen_stages(measured, baseline)
    if chosen:
        lines.append(f"baseline of the per-file search: {chosen}")
    elif any(link_time(e.composition) for e in measured.values()):
        lines.append("no composition verified faster: per-file flags on the recorded build")
    return lines


def _head_to_head_line(e: Entry, entries: list[Entry]) -> str:
    """Two close compositions measured against each other (tuning/rivals.py): `e`, the
    one measured on top of the other, which is the close rival of its first look."""
    looks = [x for x in entries if x.phase == Phase.STAGE]
    own = next((x for x in looks if x.stages == e.stages), None)
    other = close_rival(looks, e.stages, own, [x.stages for x in looks]) if own else None
    where = f" [on {e.node}]" if e.node else ""
    return (f"head to head: {e.stages} against {other.stages if other else 'its close rival'}"
            f": {e.interval_text()}" + (f" -> {e.verdict}" if e.measured else "") + where)


def _stage_line(label: str, e: Entry, measured: dict[str, Entry]) -> str:
    step, parts = step_on_top(e.composition), e.composition
    where = f" [on {e.node}]" if e.node else ""      # a cluster's node measured it
    if step is not None:      # measured against the same build without it
        return (f"stage {label}: {e.interval_text()} over the build without "
                f"{ON_TOP[step]}" + (f" -> {e.verdict}" if e.measured else "") + where)
    line = f"stage {label}: {e.interval_text()} over the recorded build{where}"
    if e.measured and e.ratio is not None:
        line += f" -> {e.verdict}"
        for left in parts if len(parts) > 1 else ():
            sub = composition_name(tuple(p for p in parts if p != left))
            base = measured.get(sub)
            if base is not None and base.ratio:
                line += f"; {base.ratio / e.ratio:.4f}x over {sub}"
    return line


def _winners(entries: list[Entry], final: Entry | None) -> dict[str, ShippedFlags]:
    if not final or final.verdict != FASTER or not final.measured:
        return {}
    alone = {next(iter(e.flags)): e for e in entries
             if e.phase in (Phase.ALONE, Phase.SEARCH) and len(e.flags) == 1}
    result = {}
    for source, flags in final.flags.items():
        measured = alone.get(source) if len(final.flags) > 1 else final
        if measured is None or measured.flags.get(source) != flags or not measured.measured:
            measured = final
        result[source] = ShippedFlags(flags, measured)
    return result


def text(summary: RunSummary) -> str:
    h = summary.settings
    lines = [f"run {summary.run_id}: {h.strategy} (seed {h.seed}), "
             f"{counted(summary.evaluations, 'evaluation')}"
             + (f" (and {counted(summary.identical, 'candidate')} identical to the baseline, "
                "not measured)" if summary.identical else "")
             + f" of {', '.join(h.sources)}, metric {h.metric}, target {h.target}"]
    lines.append(shipped_line(summary.entries, summary.baseline))
    marks = [(i + 1, g) for i, g in enumerate(summary.curve)
             if g > 0 and (i == 0 or g > summary.curve[i - 1])]
    # numbered by search candidate, as the plot's x axis, not by the journal's # below
    lines.append("best clear gain, after search candidate: "
                 + (", ".join(f"{i}: {g:.1%}" for i, g in marks) or "none"))
    f = summary.final
    if f and f.measured:
        against = " (against PGO alone)" if h.pgo else ""
        lines.append(f"final re-measurement{against}: {f.interval_text()} -> {f.verdict}")
    lines += stage_lines(summary.entries, summary.baseline)
    lines += versus_lines(summary.versus_recorded)
    for source, w in sorted(summary.winners.items()):
        lines.append(f"  {source}: {w.flags}  {w.measured.interval_text()} "
                     f"({w.measured.phase})")
    if not summary.winners:
        lines.append("no per-file flags written: no candidate held up as clearly faster")
    screened = sum(1 for e in summary.entries if e.phase == Phase.SCREENED) \
        if summary.settings.screen else 0
    if screened:
        lines.append(f"screened out before measuring: {screened} (predicted no gain)")
    rejected = {o: n for o, n in summary.outcomes.items() if o != Outcome.OK.value}
    lines.append("rejected: " + (", ".join(f"{n} {o}" for o, n in sorted(rejected.items()))
                                 or "none"))
    lines.append(verdict_words(summary.entries))
    lines.append("every evaluation, against its baseline (speedup: above 1 is faster):")
    lines += ["  " + line for line in evaluation_lines(summary.entries)]
    return "\n".join(lines)


def shipped_line(entries: list[Entry], baseline: str | None = None) -> str:
    """What the run wrote, against the recorded build, first: the figure a user wants."""
    bars = shipped_bars(entries, baseline)
    shipped = [b for b in bars if b.kind == BarKind.SHIPPED]
    if shipped:
        b = shipped[-1]
        return (f"shipped {b.label[len('shipped: '):]}: {b.speedup:.3f}x [{b.low:.3f}, "
                f"{b.high:.3f}] over the recorded build -> {b.verdict}")
    return "shipped: nothing measured against the recorded build (see below)"


def verdict_words(entries: list[Entry]) -> str:
    """What the search's measurements said, in words: how many candidates were clearly
    faster, clearly slower, or within the noise."""
    searched = [e for e in entries if e.phase == Phase.SEARCH]
    measured = [e for e in searched if e.measured and not e.identical]
    identical = sum(1 for e in searched if e.identical)
    also = (f" ({identical} more identical to the baseline, not measured)" if identical
            else "")
    if not measured:
        staged = sum(1 for e in entries if e.phase in STAGE_PHASES)
        why = (f": {counted(identical, 'candidate')} identical to the baseline" if identical
               else f": the stages took the budget ({counted(staged, 'stage evaluation')}"
                    "); a larger --budget leaves some for per-file flags"
               if staged and not searched else "")
        return "no search candidate was measured" + why
    counts = Counter(e.verdict or UNCLEAR for e in measured)
    parts = ", ".join(f"{counts[v]} {v}" for v in (FASTER, SLOWER, SAME, UNCLEAR)
                      if counts[v])
    best = min(measured, key=lambda e: e.ratio or 1.0)
    return (f"{counted(len(measured), 'search candidate')} measured: {parts}; the lowest "
            f"estimate was #{best.n}, {best.interval_text()}" + also
            + _not_confirmed(measured, entries))


def _not_confirmed(measured: list[Entry], entries: list[Entry]) -> str:
    """The candidates that read faster and then not in fresh pairs: why a run with a
    "faster" candidate can write nothing."""
    confirms = {e.config: e for e in entries if e.phase == Phase.CONFIRM}
    lost = [(e, confirms[e.config]) for e in measured
            if e.verdict == FASTER and e.config in confirms
            and confirms[e.config].verdict != FASTER]
    if not lost:
        return ""
    return (f"; {counted(len(lost), 'faster candidate')} not confirmed by fresh pairs ("
            + ", ".join(f"#{e.n}: {again.interval_text()}" for e, again in lost) + ")")


def evaluation_lines(entries: list[Entry]) -> list[str]:
    """One line per journal entry: number, phase, estimate with its interval (or the
    outcome), verdict and the flags or stages it measured."""
    lines = []
    for e in entries:
        what = "; ".join(f"{s}: {f}" for s, f in sorted(e.flags.items())) or "(no flags)"
        if e.stages:
            what = f"stages {e.stages}" + (f" + {what}" if e.flags else "")
        verdict = f" {e.verdict}" if e.measured and e.verdict else ""
        where = f" [on {e.node}]" if e.node else ""
        lines.append(f"#{e.n:<3} {e.phase.value:<13} {e.interval_text()}{verdict}{where}  "
                     f"{what}"[:240])
        lines += [f"       attributed {effect.text()}" for effect in e.effects]
    return lines


def _convergence_png(runs: list[RunSummary]) -> bytes:
    """The search's progress across runs (`report --all`): best clear gain of the
    per-file flags after each search candidate, one line per run."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(8, 3.2), dpi=100)
    for run in runs:
        label = f"{run.settings.strategy} ({run.run_id[-18:]})"
        axes.step(range(1, len(run.curve) + 1), [100 * g for g in run.curve], where="post",
                  label=label)
    axes.set_xlabel("search candidates")
    axes.set_ylabel("best clear gain of per-file flags (%)")
    axes.set_title("the per-file search on top of each run's chosen baseline", fontsize=10)
    axes.grid(alpha=0.3)
    axes.legend(fontsize=8)
    buffer = io.BytesIO()
    figure.tight_layout()
    figure.savefig(buffer, format="png")
    plt.close(figure)
    return buffer.getvalue()


def _img(png: bytes, alt: str) -> str:
    return f"<img alt='{alt}' src='data:image/png;base64,{base64.b64encode(png).decode()}'>"


def html_report(runs: list[RunSummary]) -> str:
    parts = ["<!doctype html><meta charset='utf-8'><title>autopass report</title>",
             "<style>body{font-family:sans-serif;max-width:60em;margin:2em auto}"
             "td,th{padding:.2em .8em;text-align:left}pre{background:#f4f4f4;padding:1em;"
             "white-space:pre-wrap;overflow-wrap:anywhere}"
             "</style><h1>autopass tuning report</h1>"]
    if len(runs) > 1 and any(run.curve for run in runs):
        parts.append(_img(_convergence_png(runs), "the search of each run"))
    for run in runs:
        title = f"{run.settings.target} ({run.settings.metric})"
        parts.append(f"<h2>run {html.escape(run.run_id)}</h2>"
                     + _img(run_png(run.entries, title, run.baseline), "what the run shipped")
                     + f"<pre>{html.escape(text(run))}</pre>")
        if run.winners:
            rows = "".join(f"<tr><td>{html.escape(s)}</td><td><code>{html.escape(w.flags)}"
                           f"</code></td><td>{html.escape(w.measured.interval_text())}</td></tr>"
                           for s, w in sorted(run.winners.items()))
            parts.append("<table><tr><th>file</th><th>flags</th><th>measured</th></tr>"
                         f"{rows}</table>")
        parts.append("<details><summary>run settings</summary><pre>"
                     f"{html.escape(json.dumps(run.settings.to_json(), indent=1))}</pre></details>")
    return "\n".join(parts) + "\n"
