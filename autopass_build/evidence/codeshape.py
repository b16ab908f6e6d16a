"""Code shape: what a unit's hot functions compiled to, read off the object.

The instruction mix (bytes, instructions, branches, calls, vector instructions, memory
operands) from `llvm-objdump`, and the innermost loops (from the backward jumps) with
`llvm-mca`'s cycles per iteration for each.  Screening compares a candidate's shape with
the baseline's (`relative`); what the code became transfers between programs, where
which flags made it does not.
"""

from __future__ import annotations

import bisect
import math
import os
import re
import tempfile
from dataclasses import dataclass

from autopass_build.core import proc, toolchain
from autopass_build.core.errors import AutopassError

CODE_FEATURES = ("size", "instructions", "branches", "calls", "vector", "memory",
                 "loops", "loop_instructions", "loop_cycles")
_INSTRUCTION = re.compile(r"^\s+([0-9a-f]+):\s+([a-z][a-z0-9.]*)\s*(.*)$")
_FUNCTION = re.compile(r"^[0-9a-f]+ <(.+)>:$")
_TARGET = re.compile(r"^0x([0-9a-f]+)\b")
_THROUGHPUT = re.compile(r"Block RThroughput:\s+([0-9.]+)")
_MCA_ERROR = re.compile(r"loops\.s:(\d+):\d+: error")
_MCA_RETRIES = 5
_DISASSEMBLY_CAP = 256 << 20  # room for an amalgamation (sqlite3.c), not the default 1 MB


class CodeShapeError(AutopassError):
    pass


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
        raise CodeShapeError(f"llvm-objdump failed on {object_path}")
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
    raise CodeShapeError(f"llvm-mca could not analyze the loops: {said[-300:]}")


def _tool(name: str) -> str:
    path = toolchain.find_tool(name)
    if path is None:
        raise CodeShapeError(toolchain.not_found(name))
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
