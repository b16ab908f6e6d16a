"""A unit's functions, loops and call sites as decisions carried in the IR name them.

    the unit's recorded IR ──clang -fpass-plugin (AUTOPASS_INVENTORY=file)──▶ one line
    per function, loop and call: its key, its place, the hash of its code, and its size
    (capture/pass_plugin.cpp writes it; nothing is compiled further)

The tuner reads it to offer decisions on the hot functions' loops and calls
(tuning/decision_knobs.py), and `db status` to count the decisions of a database that
still match today's source.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field

from autopass_build.candidates.replay import QUIET, Replayer
from autopass_build.candidates.replay_args import source_args
from autopass_build.core import proc
from autopass_build.core.outcome import EvaluationError, Outcome
from autopass_build.store.build_records import UnitRecord


@dataclass(frozen=True)
class FunctionFacts:
    key: str           # as decisions name it (core/decisions.py)
    hash: str
    name: str          # mangled
    loops: int
    instructions: int
    location: str      # "file:line" where the IR has debug information, else ""


@dataclass(frozen=True)
class LoopFacts:
    function: str      # its function's key
    path: str          # "2.1"
    hash: str
    depth: int
    innermost: bool
    blocks: int
    instructions: int
    location: str      # "file:line:col", or ""


@dataclass(frozen=True)
class CallFacts:
    function: str      # the caller's key
    place: str         # "callee#n"
    hash: str          # the caller's
    callee: str        # mangled


@dataclass
class Inventory:
    functions: dict[str, FunctionFacts] = field(default_factory=dict)
    loops: list[LoopFacts] = field(default_factory=list)
    calls: list[CallFacts] = field(default_factory=list)

    def by_name(self, name: str) -> FunctionFacts | None:
        return next((f for f in self.functions.values() if f.name == name), None)

    def loops_of(self, key: str) -> list[LoopFacts]:
        return [loop for loop in self.loops if loop.function == key]

    def calls_to(self, name: str) -> list[CallFacts]:
        return [call for call in self.calls if call.callee == name]


def parse(text: str) -> Inventory:
    found = Inventory()
    for line in text.splitlines():
        parts = line.split("\t")
        try:
            if parts[0] == "fn" and len(parts) == 7:
                found.functions[parts[1]] = FunctionFacts(parts[1], parts[2], parts[3],
                                                          int(parts[4]), int(parts[5]), parts[6])
            elif parts[0] == "loop" and len(parts) == 9:
                found.loops.append(LoopFacts(parts[1], parts[2], parts[3], int(parts[4]),
                                             parts[5] == "1", int(parts[6]), int(parts[7]),
                                             parts[8]))
            elif parts[0] == "call" and len(parts) == 5:
                found.calls.append(CallFacts(*parts[1:]))
        except ValueError:
            continue        # a line the plugin did not write whole
    return found


def of_unit(replayer: Replayer, unit: UnitRecord, from_source: bool = False) -> Inventory:
    """The inventory of `unit`'s recorded IR (`from_source`: of its source as it is
    today, for `db status`); EvaluationError when the pass plugin cannot run."""
    plugin = replayer.plugin_for(unit)
    with tempfile.TemporaryDirectory(prefix="autopass-inventory-") as scratch:
        listing = os.path.join(scratch, "inventory.tsv")
        env = {**proc.clean_env(dict(os.environ)), "AUTOPASS_INVENTORY": listing}
        tail = [f"-fpass-plugin={plugin}", *QUIET, "-c", "-o", os.devnull]
        if from_source:
            done = proc.run_captured([unit.compiler, *source_args(unit), *tail], unit.cwd, env,
                                     replayer.compile_timeout)
        else:
            with replayer.store.blob_copy("ir", unit.ir_hash, ".bc") as ir:
                done = proc.run_captured([unit.compiler, *replayer.codegen_args(unit), *tail,
                                          "-x", "ir", ir], unit.cwd, env,
                                         replayer.compile_timeout)
        if done.status != 0 or done.timed_out or not os.path.isfile(listing):
            said = done.stderr.decode("utf-8", "replace")[-200:]
            raise EvaluationError(Outcome.COMPILE_FAIL, f"{unit.source_rel}: cannot list its "
                                  "functions and loops (the compile with autopass's pass "
                                  f"plugin failed: {said})")
        with open(listing, encoding="utf-8", errors="replace") as handle:
            return parse(handle.read())
