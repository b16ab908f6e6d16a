"""The report's figures, as data first: what the run shipped (bars against the recorded
build), every measurement by phase, and each unit's own effect.  The plots draw only
these records, so what a figure shows can be checked against the journal (test_report).
"""

from __future__ import annotations

import io
import os
from dataclasses import dataclass
from enum import Enum

from autopass_build.candidates.stages import (
    AFTER_SEARCH,
    ON_TOP,
    Stage,
    link_time,
    of_name,
    step_on_top,
)
from autopass_build.candidates.stages import name as composition_name
from autopass_build.measuring.stats import FASTER
from autopass_build.tuning.journal import STAGE_PHASES, Entry, Phase


class BarKind(str, Enum):
    RECORDED = "recorded"      # the reference: the build as recorded
    STAGE = "stage"            # a whole-program composition, A/B'd against the recording
    ON_TOP = "on top"          # a step on top: A/B'd against its base, multiplied through
    SHIPPED = "shipped"        # what the run wrote, A/B'd against the recording


@dataclass(frozen=True)
class Bar:
    """One build against the recorded build: speedup (its time over the recorded one's,
    inverted: above 1 is faster) with its 95 % interval."""
    label: str
    speedup: float
    low: float
    high: float
    kind: BarKind
    verdict: str = ""


@dataclass(frozen=True)
class Dot:
    """One measurement against its own baseline, as a speedup (above 1: faster), for the
    second plot."""
    n: int
    speedup: float
    low: float
    high: float
    group: str
    label: str


GROUPS = {Phase.STAGE: "stage", Phase.STAGE_AGAIN: "stage, second look",
          Phase.STAGE_CONFIRM: "stage, confirmed",
          Phase.SEARCH: "search candidate", Phase.CONFIRM: "confirmation",
          Phase.ALONE: "unit alone", Phase.COMPOSITE: "composite",
          Phase.FINAL: "final", Phase.PGO_ALONE: "against the recording",
          Phase.TUNED_ON_PGO: "against the recording", Phase.TUNED: "against the recording"}


def _speedup(e: Entry) -> tuple[float, float, float]:
    ratio, low, high = e.ratio or 1.0, e.low or e.ratio or 1.0, e.high or e.ratio or 1.0
    return 1 / ratio, 1 / high, 1 / low


def last_stage_looks(entries: list[Entry]) -> dict[str, Entry]:
    """Each composition's last evaluation (a confirmation replaces the first look, even
    one that failed)."""
    looks: dict[str, Entry] = {}
    for e in entries:
        if e.phase in STAGE_PHASES:
            looks[e.stages] = e
    return looks


def chosen_stages(looks: dict[str, Entry], baseline: str | None = None) -> str:
    """The composition the per-file search ran on: `baseline`, as the run marked it
    (Journal.baseline); for a run without the mark, the fastest verified link-time one
    ("" for none), extended by -march=native where that was kept (the steps after the
    search come on top: `with_steps_after`)."""
    if baseline is not None:
        return baseline
    faster = [e for e in looks.values() if link_time(e.composition)
              and e.verdict == FASTER and e.measured and e.ratio is not None]
    chosen = min(faster, key=lambda e: e.ratio or 1.0).stages if faster else ""
    return _kept_on_top(looks, chosen, Stage.NATIVE)


def with_steps_after(looks: dict[str, Entry], chosen: str) -> str:
    """`chosen` with each step after the search (direct calls, CS-PGO, layout, the
    link-level knobs, BOLT) that was kept."""
    for step in AFTER_SEARCH:
        chosen = _kept_on_top(looks, chosen, step)
    return chosen


def _kept_on_top(looks: dict[str, Entry], chosen: str, step: Stage) -> str:
    extended = composition_name(of_name(chosen) + (step,))
    look = looks.get(extended)
    return extended if look is not None and look.verdict == FASTER and look.measured \
        else chosen


def over_recorded(looks: dict[str, Entry], e: Entry) -> tuple[float, float, float] | None:
    """`e`'s speedup over the recorded build, with its interval: a step on top is
    multiplied through the builds under it (None where one of them was not measured)."""
    speedup = _speedup(e)
    if step_on_top(e.composition) is None:
        return speedup
    base = looks.get(composition_name(e.composition[:-1])) if len(e.composition) > 1 \
        else None
    if len(e.composition) == 1:        # a step on the recorded build itself
        return speedup
    if base is None or not base.measured or not base.ratio:
        return None
    under = over_recorded(looks, base)
    if under is None:
        return None
    return speedup[0] * under[0], speedup[1] * under[1], speedup[2] * under[2]


def shipped_entry(entries: list[Entry]) -> Entry | None:
    """The measurement of what the run wrote against the recorded build, where there
    is one: the chosen stages with the per-file flags (tuned, tuned on PGO), else the
    final per-file result of a run without stages (its baseline is the recorded build)."""
    against = [e for e in entries if e.phase in (Phase.TUNED, Phase.TUNED_ON_PGO)
               and e.measured and e.ratio]
    if against:
        return against[-1]
    finals = [e for e in entries if e.phase == Phase.FINAL and e.measured and e.ratio
              and not e.stages]
    return finals[-1] if finals and not last_stage_looks(entries) else None


def shipped_bars(entries: list[Entry], baseline: str | None = None) -> list[Bar]:
    """The recorded build, each composition and step measured, and what was shipped
    (`baseline`: the composition the search ran on, as the run marked it)."""
    bars = [Bar("recorded build", 1.0, 1.0, 1.0, BarKind.RECORDED)]
    looks = last_stage_looks(entries)
    for label, e in looks.items():
        through = over_recorded(looks, e) if e.measured and e.ratio else None
        if through is None:
            continue
        step = step_on_top(e.composition)
        if step is not None:
            bars.append(Bar(f"{label} ({ON_TOP[step]} x its base)", *through,
                            BarKind.ON_TOP, e.verdict or ""))
        else:
            bars.append(Bar(label, *through, BarKind.STAGE, e.verdict or ""))
    shipped = shipped_entry(entries)
    if shipped is not None:
        what = shipped.stages or "no stages"
        if shipped.flags:
            what += f" + flags on {len(shipped.flags)} files"
        bars.append(Bar(f"shipped: {what}", *_speedup(shipped), BarKind.SHIPPED,
                        shipped.verdict or ""))
        return bars
    chosen = with_steps_after(looks, chosen_stages(looks, baseline))   # stages alone
    same = [b for b in bars if b.label.split(" ")[0] == chosen]
    if same:
        b = same[0]
        bars.append(Bar(f"shipped: {chosen}, no per-file flags", b.speedup, b.low, b.high,
                        BarKind.SHIPPED, b.verdict))
    return bars


def dots(entries: list[Entry]) -> list[Dot]:
    found = []
    for e in entries:
        if not e.measured or e.ratio is None or e.identical or e.phase not in GROUPS:
            continue
        group = GROUPS[e.phase]
        step = step_on_top(e.composition)
        if e.phase in STAGE_PHASES and step is not None:
            group = f"{ON_TOP[step]} on its base"
        units = ", ".join(os.path.basename(s) for s in sorted(e.flags))
        label = units if e.phase in (Phase.SEARCH, Phase.CONFIRM, Phase.ALONE) \
            else e.stages
        found.append(Dot(e.n, *_speedup(e), group, label[:28]))
    return found


def effects(entries: list[Entry]) -> list[tuple[str, float, float, float]]:
    """Each unit's own effect (attribution), as a speedup: ('#12 lvm.c', speedup, low,
    high)."""
    return [(f"#{e.n} {os.path.basename(u.source)}", 1 / u.ratio, 1 / u.high, 1 / u.low)
            for e in entries for u in e.effects if u.ratio and u.low and u.high]


def run_png(entries: list[Entry], title: str, baseline: str | None = None) -> bytes:
    """One run's figure: what it shipped, every measurement, the units' own effects."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    bars, points, units = shipped_bars(entries, baseline), dots(entries), effects(entries)
    rows = [len(bars) * 0.38 + 1.2, 3.4] + ([len(units) * 0.3 + 1.2] if units else [])
    figure, panels = plt.subplots(len(rows), 1, figsize=(8, sum(rows)), dpi=100,
                                  gridspec_kw={"height_ratios": rows}, squeeze=False)
    _draw_bars(panels[0][0], bars, title)
    _draw_dots(panels[1][0], points)
    if units:
        _draw_effects(panels[2][0], units)
    buffer = io.BytesIO()
    figure.tight_layout()
    figure.savefig(buffer, format="png")
    plt.close(figure)
    return buffer.getvalue()


COLORS = {BarKind.RECORDED: "#999999", BarKind.STAGE: "#4878a8", BarKind.ON_TOP: "#8cb0d8",
          BarKind.SHIPPED: "#d07a2c"}


def _draw_bars(axes, bars: list[Bar], title: str) -> None:
    y = list(range(len(bars)))[::-1]
    axes.barh(y, [b.speedup - 1 for b in bars], left=1.0,
              xerr=[[b.speedup - b.low for b in bars], [b.high - b.speedup for b in bars]],
              color=[COLORS[b.kind] for b in bars], capsize=3)
    for row, bar in zip(y, bars):
        text = "1 (reference)" if bar.kind == BarKind.RECORDED else \
            f"{bar.speedup:.3f}x [{bar.low:.3f}, {bar.high:.3f}] {bar.verdict}"
        axes.annotate(text, (max(bar.high, 1.0), row), xytext=(4, 0),
                      textcoords="offset points", va="center", fontsize=7)
    axes.set_yticks(y, [b.label for b in bars], fontsize=8)
    axes.axvline(1.0, color="black", linewidth=0.8)
    axes.set_xlabel("speedup over the recorded build (95 % interval; right of 1: faster)")
    axes.set_title(f"what the run shipped: {title}", fontsize=10)
    axes.margins(x=0.35)
    axes.grid(axis="x", alpha=0.3)


def _draw_dots(axes, points: list[Dot]) -> None:
    for group in dict.fromkeys(p.group for p in points):
        mine = [p for p in points if p.group == group]
        axes.errorbar([p.n for p in mine], [p.speedup for p in mine],
                      yerr=[[p.speedup - p.low for p in mine],
                            [p.high - p.speedup for p in mine]],
                      fmt="o", markersize=3, capsize=2, label=group)
    for p in points:
        if p.label:
            axes.annotate(p.label, (p.n, p.speedup), xytext=(3, 3), textcoords="offset points",
                          fontsize=6, alpha=0.8)
    axes.axhline(1.0, color="grey", linewidth=0.8)
    axes.set_xlabel("journal entry")
    axes.set_ylabel("speedup over its baseline")
    axes.set_title("every measurement against its own baseline (above 1: faster)",
                   fontsize=10)
    axes.grid(alpha=0.3)
    if points:
        axes.legend(fontsize=7)


def _draw_effects(axes, units: list[tuple[str, float, float, float]]) -> None:
    y = list(range(len(units)))[::-1]
    axes.errorbar([u[1] for u in units], y, xerr=[[u[1] - u[2] for u in units],
                                                 [u[3] - u[1] for u in units]],
                  fmt="o", capsize=3)
    axes.set_yticks(y, [u[0] for u in units], fontsize=7)
    axes.axvline(1.0, color="grey", linewidth=0.8)
    axes.set_xlabel("the unit's own speedup (attribution; right of 1: faster)")
    axes.set_title("each changed unit's own effect (attribution)", fontsize=10)
    axes.grid(alpha=0.3)
