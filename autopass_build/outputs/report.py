"""`autopass report`: what one tuning run did, for a terminal or as one HTML file.

From the run's journal (nothing is re-measured): the convergence curve (best clear gain
after each evaluation), the final per-file flags with their measured gains and why,
and the rejected candidates by outcome.  The HTML report is self-contained: the plot is
drawn by matplotlib and embedded as a PNG, so the file can be mailed or attached to a
pull request.
"""

from __future__ import annotations

import base64
import html
import io
import json
from collections import Counter
from dataclasses import dataclass

from autopass_build.tuning.journal import Journal


@dataclass
class RunSummary:
    run_id: str
    header: dict
    curve: list[float]                 # best clear gain (1 - ratio) after each evaluation
    final: dict | None
    winners: dict[str, dict]           # source -> {flags, ratio, low, high, why}
    outcomes: Counter
    evaluations: int
    # On PGO runs, against the recorded build: {"pgo-alone": entry, "tuned-on-pgo": entry}
    versus_recorded: dict[str, dict]
    entries: list[dict]


def summarize(journal: Journal) -> RunSummary:
    entries = journal.entries
    confirming = any(e["phase"] == "confirm" for e in entries)
    clear_phase = "confirm" if confirming else "search"
    curve, best = [], 0.0
    for e in entries:
        if e["phase"] == clear_phase and e["verdict"] == "faster":
            best = max(best, 1 - e["ratio"])
            if e["phase"] == "confirm" and curve:
                curve[-1] = best
        if e["phase"] == "search":
            curve.append(best)
    finals = [e for e in entries if e["phase"] == "final"]
    final = finals[-1] if finals else None
    outcomes = Counter(e["outcome"] for e in entries if e["phase"] == "search")
    versus = {e["phase"]: e for e in entries if e["phase"] in VERSUS_RECORDED}
    return RunSummary(journal.run_id, journal.header, curve, final,
                      _winners(entries, final), outcomes, len(curve), versus, entries)


VERSUS_RECORDED = {"pgo-alone": "PGO alone", "tuned-on-pgo": "tuned on PGO"}


def versus_lines(entries: dict[str, dict]) -> list[str]:
    """'against the recorded build: PGO alone 0.9512x [...] faster' and the like."""
    lines = []
    for phase, label in VERSUS_RECORDED.items():
        e = entries.get(phase)
        if e is None:
            continue
        if e["ratio"] is None:
            lines.append(f"{label} against the recorded build: {e['outcome']}")
        else:
            lines.append(f"{label} against the recorded build: {e['ratio']:.4f}x "
                         f"[{e['low']:.4f}, {e['high']:.4f}] -> {e['verdict']}")
    return lines


def _winners(entries: list[dict], final: dict | None) -> dict[str, dict]:
    if not final or final["verdict"] != "faster":
        return {}
    alone = {next(iter(e["flags"])): e for e in entries
             if e["phase"] in ("attribute", "search") and len(e["flags"]) == 1}
    result = {}
    for source, flags in final["flags"].items():
        measured = alone.get(source) if len(final["flags"]) > 1 else final
        if measured is None or measured["flags"].get(source) != flags:
            measured = final
        result[source] = {"flags": flags, "ratio": measured["ratio"], "low": measured["low"],
                          "high": measured["high"], "measured": measured["phase"]}
    return result


def text(summary: RunSummary) -> str:
    h = summary.header
    lines = [f"run {summary.run_id}: {h.get('strategy')} (seed {h.get('seed')}), "
             f"{summary.evaluations} evaluations of {', '.join(h.get('sources', []))}, "
             f"metric {h.get('metric')}, target {h.get('target')}"]
    marks = [(i + 1, g) for i, g in enumerate(summary.curve)
             if g > 0 and (i == 0 or g > summary.curve[i - 1])]
    lines.append("best clear gain: " + (", ".join(f"#{i}: {g:.1%}" for i, g in marks)
                                        or "none"))
    f = summary.final
    if f and f["ratio"] is not None:
        against = " (against PGO alone)" if h.get("pgo") else ""
        lines.append(f"final re-measurement{against}: {f['ratio']:.4f}x [{f['low']:.4f}, "
                     f"{f['high']:.4f}] -> {f['verdict']}")
    lines += versus_lines(summary.versus_recorded)
    for source, w in sorted(summary.winners.items()):
        lines.append(f"  {source}: {w['flags']}  {w['ratio']:.4f}x [{w['low']:.4f}, "
                     f"{w['high']:.4f}] ({w['measured']})")
    if not summary.winners:
        lines.append("no flags written: no candidate held up as clearly faster")
    screened = summary.header.get("screen") and sum(
        1 for e in summary.entries if e["phase"] == "screened")
    if screened:
        lines.append(f"screened out before measuring: {screened} (predicted no gain)")
    rejected = {o: n for o, n in summary.outcomes.items() if o != "OK"}
    lines.append("rejected: " + (", ".join(f"{n} {o}" for o, n in sorted(rejected.items()))
                                 or "none"))
    return "\n".join(lines)


def _plot_png(runs: list[RunSummary]) -> bytes:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(7, 3.6), dpi=110)
    for run in runs:
        label = f"{run.header.get('strategy')} ({run.run_id[-18:]})"
        axes.step(range(1, len(run.curve) + 1), [100 * g for g in run.curve], where="post",
                  label=label)
    axes.set_xlabel("evaluations")
    axes.set_ylabel("best clear gain (%)")
    axes.set_title("tuning progress")
    axes.grid(alpha=0.3)
    axes.legend(fontsize=8)
    buffer = io.BytesIO()
    figure.tight_layout()
    figure.savefig(buffer, format="png")
    plt.close(figure)
    return buffer.getvalue()


def html_report(runs: list[RunSummary]) -> str:
    image = base64.b64encode(_plot_png(runs)).decode()
    parts = ["<!doctype html><meta charset='utf-8'><title>autopass report</title>",
             "<style>body{font-family:sans-serif;max-width:60em;margin:2em auto}"
             "td,th{padding:.2em .8em;text-align:left}pre{background:#f4f4f4;padding:1em}"
             "</style><h1>autopass tuning report</h1>",
             f"<img alt='convergence' src='data:image/png;base64,{image}'>"]
    for run in runs:
        parts.append(f"<h2>run {html.escape(run.run_id)}</h2><pre>{html.escape(text(run))}</pre>")
        if run.winners:
            rows = "".join(f"<tr><td>{html.escape(s)}</td><td><code>{html.escape(w['flags'])}"
                           f"</code></td><td>{w['ratio']:.4f}x [{w['low']:.4f}, "
                           f"{w['high']:.4f}]</td></tr>" for s, w in sorted(run.winners.items()))
            parts.append("<table><tr><th>file</th><th>flags</th><th>measured</th></tr>"
                         f"{rows}</table>")
        parts.append("<details><summary>run settings</summary><pre>"
                     f"{html.escape(json.dumps(run.header, indent=1))}</pre></details>")
    return "\n".join(parts) + "\n"
