"""The three roles every backend plays, and what passes between them.

    analyst   : context (hot units, knobs, remarks) -> diagnosis (what the compiler
                missed in the hot code, and which knob could address it)
    planner   : diagnosis + measured trials + lessons + rejected proposals
                -> proposals: per-unit knob changes on top of the incumbent, each with
                   a rationale
    diagnoser : a regression or a wrong output + what changed -> a lesson for the planner

Proposals name knobs and values of the space (`Context.knob_table`); the strategy
validates them and feeds anything invalid back to the planner as a constraint.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from autopass_build.tuning.agents.context import Context, Trial


@dataclass
class Proposal:
    changes: dict[str, dict[str, str]]          # unit -> knob -> value (short form)
    rationale: str = ""


@dataclass
class Lesson:
    text: str
    unit: str = ""
    knob: str = ""
    avoid: list[str] = field(default_factory=list)   # values not to propose again ([]: all)


@dataclass
class Diagnosis:
    findings: list[dict]                        # backend-specific, JSON-able
    text: str = ""


class Backend(Protocol):
    name: str

    def analyse(self, context: Context) -> Diagnosis: ...

    def plan(self, context: Context, diagnosis: Diagnosis, history: list[Trial],
             incumbent: dict[str, dict[str, str]], lessons: list[Lesson],
             feedback: list[str], want: int) -> list[Proposal]: ...

    def diagnose(self, context: Context, trial: Trial) -> Lesson: ...
