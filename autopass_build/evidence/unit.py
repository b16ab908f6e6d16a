"""What the compiler knows about one unit under given flags, sized for a reader or an LLM.

* remarks: `-fsave-optimization-record` YAML (parsed with PyYAML's C loader), grouped by
  function and pass into passed / missed / analysis, with location, a readable message
  and the numeric arguments (inline Cost and Threshold, VectorizationFactor,
  InterleaveCount, UnrollCount, ...);
* code size per function, from the object's symbol table (pyelftools);
* the pass pipeline (`-print-pipeline-passes`);
* the IR of one function before and after optimization, truncated with a marker;
* the difference between two configurations: remarks gained and lost, size changes.

Every result is plain JSON data with explicit caps, so a caller can bound its size.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import asdict, dataclass, field

import yaml

from autopass_build.candidates.object_symbols import function_sizes
from autopass_build.candidates.replay import QUIET, Replayer
from autopass_build.candidates.replay_args import source_args
from autopass_build.capture.apply.bitcode import BITCODE
from autopass_build.core import proc, toolchain
from autopass_build.core.flags import replayable_from_ir
from autopass_build.store.build_records import UnitRecord
from autopass_build.store.index import Store

NUMERIC_ARGS = ("Cost", "Threshold", "VectorizationFactor", "InterleaveCount", "UnrollCount",
                "NumInstructions", "NumVRCopies", "NumStackBytes", "Line")
MAX_REMARKS_PER_GROUP = 5      # distinct messages per (function, pass, passed/missed)
MAX_FUNCTIONS = 8              # largest functions first
MAX_IR_CHARS = 6000
TRUNCATED = "\n... [truncated by autopass] ..."


class _RemarkLoader(yaml.CSafeLoader if hasattr(yaml, "CSafeLoader")  # type: ignore[misc]
                    else yaml.SafeLoader):   # libyaml's loader where it is built in
    pass


def _tagged(loader, tag_suffix, node):
    data = loader.construct_mapping(node, deep=True)
    data["Kind"] = tag_suffix
    return data


_RemarkLoader.add_multi_constructor("!", _tagged)


@dataclass
class Remark:
    kind: str          # Passed / Missed / Analysis
    pass_name: str
    name: str
    function: str
    location: str
    message: str
    numbers: dict[str, float] = field(default_factory=dict)

    def key(self) -> tuple:
        return (self.kind, self.pass_name, self.name, self.function, self.location,
                tuple(sorted(self.numbers.items())))


def _number(text: object) -> float | None:
    try:
        return float(str(text))
    except ValueError:
        return None


def parse_remarks(text: str) -> list[Remark]:
    remarks = []
    for doc in yaml.load_all(text, Loader=_RemarkLoader):
        if not isinstance(doc, dict):
            continue
        loc = doc.get("DebugLoc") or {}
        location = f"{loc.get('File', '?')}:{loc.get('Line', '?')}" if loc else ""
        parts, numbers = [], {}
        for arg in doc.get("Args") or []:
            for key, value in arg.items():
                if key == "DebugLoc":
                    continue
                parts.append(str(value))
                number = _number(value) if key in NUMERIC_ARGS else None
                if number is not None:
                    numbers[key] = number
        message = "".join(parts).replace("'", "").strip()
        if "cost=" in message and "Cost" not in numbers:  # "(cost=310, threshold=225)"
            for item in message[message.find("cost="):].strip("()").split(","):
                key, _, value = item.strip(" ()").partition("=")
                if _number(value) is not None:
                    numbers[key.capitalize()] = float(value)
        remarks.append(Remark(doc["Kind"], str(doc.get("Pass", "")), str(doc.get("Name", "")),
                              str(doc.get("Function", "")), location, message, numbers))
    return remarks


def group_remarks(remarks: list[Remark], cap: int = MAX_REMARKS_PER_GROUP) -> dict:
    """{function: {pass: {"passed": [...], "missed": [...], "analysis": n, "omitted": n}}}.

    Identical messages collapse into one entry with a count (Lua's interpreter loop has
    hundreds of "load clobbered by call"); at most `cap` distinct ones per group."""
    grouped: dict = {}
    for r in remarks:
        entry = grouped.setdefault(r.function, {}).setdefault(
            r.pass_name, {"passed": [], "missed": [], "analysis": 0, "omitted": 0})
        if r.kind == "Analysis":
            entry["analysis"] += 1
            continue
        bucket = entry["passed" if r.kind == "Passed" else "missed"]
        message = r.message[:200]
        same = next((b for b in bucket if b["message"] == message and b["name"] == r.name), None)
        if same is not None:
            same["count"] = same.get("count", 1) + 1
        elif len(bucket) < cap:
            bucket.append({"name": r.name, "at": r.location, "message": message,
                           **({"numbers": r.numbers} if r.numbers else {})})
        else:
            entry["omitted"] += 1
    return grouped


@dataclass
class UnitEvidence:
    unit: str
    flags: list[str]
    sizes: dict[str, int]
    remarks: dict
    counts: dict[str, int]

    def to_json(self) -> dict:
        return asdict(self)


class Evidence:
    """Compiles units (from IR, or from source for front-end flags) to collect evidence."""

    def __init__(self, store: Store):
        self.store = store
        self.replayer = Replayer(store)

    def _compile(self, unit: UnitRecord, flags: tuple[str, ...], extra: list[str]
                 ) -> proc.Captured:
        if unit.id in self.replayer.from_source or not replayable_from_ir(flags, unit.opt_level):
            argv = [unit.compiler] + source_args(unit) + list(flags) + QUIET
            return self.replayer.run_compiler(argv + extra, unit.cwd, unit)
        with self.store.blob_copy("ir", unit.ir_hash, ".bc") as ir:
            argv = ([unit.compiler] + self.replayer.codegen_args(unit) + list(flags) + QUIET
                    + ["-x", "ir", ir])
            return self.replayer.run_compiler(argv + extra, unit.cwd, unit)

    def collect(self, unit: UnitRecord, flags: tuple[str, ...] = ()) -> tuple[list[Remark],
                                                                              dict[str, int]]:
        with tempfile.TemporaryDirectory(prefix="autopass-evidence-") as scratch:
            obj, record = os.path.join(scratch, "u.o"), os.path.join(scratch, "u.yaml")
            self._compile(unit, flags, ["-c", "-o", obj, "-fsave-optimization-record",
                                        f"-foptimization-record-file={record}"])
            with open(record, encoding="utf-8", errors="replace") as handle:
                remarks = parse_remarks(handle.read())
            with open(obj, "rb") as handle:
                data = handle.read()
            if data[:4] == BITCODE:    # the unit's own -flto=thin: sizes out of LTO
                with open(self.replayer.code_object_for(unit, flags), "rb") as handle:
                    data = handle.read()
            sizes = function_sizes(data)
        return remarks, sizes

    def unit_evidence(self, unit: UnitRecord, flags: tuple[str, ...] = (),
                      function: str | None = None, max_functions: int = MAX_FUNCTIONS,
                      hot: dict[str, float] | None = None) -> UnitEvidence:
        """`hot` (function -> share of the profile) puts hot functions first; without a
        profile the largest functions stand in for the hot ones."""
        remarks, sizes = self.collect(unit, flags)
        if function:
            remarks = [r for r in remarks if r.function == function]
        else:
            hot = hot or {}
            ranked = sorted(sizes, key=lambda f: (-hot.get(f, 0.0), -sizes[f]))
            keep = set(ranked[:max_functions])
            remarks = [r for r in remarks if r.function in keep]
        counts = {kind: sum(r.kind == kind for r in remarks)
                  for kind in ("Passed", "Missed", "Analysis")}
        return UnitEvidence(unit.source_rel, list(flags), sizes, group_remarks(remarks), counts)

    def pipeline(self, unit: UnitRecord, flags: tuple[str, ...] = ()) -> str:
        done = self._compile(unit, flags, ["-c", "-o", os.devnull, "-mllvm",
                                           "-print-pipeline-passes"])
        return done.stdout.decode("utf-8", "replace").strip()

    def function_ir(self, unit: UnitRecord, function: str, flags: tuple[str, ...] = ()
                    ) -> dict[str, str]:
        """The function's IR as the front end emitted it, and after optimization."""
        dis = toolchain.find_tool("opt")
        before_text = ""
        if dis:
            with self.store.blob_copy("ir", unit.ir_hash, ".bc") as ir:
                done = proc.run_captured([dis, "-S", "-passes=verify", ir, "-o", "-"], unit.cwd)
            before_text = done.stdout.decode("utf-8", "replace")
        after = self._compile(unit, flags, ["-S", "-emit-llvm", "-o", "-"])
        return {"before": _cut_function(before_text, function),
                "after": _cut_function(after.stdout.decode("utf-8", "replace"), function)}

    def diff(self, unit: UnitRecord, flags_a: tuple[str, ...], flags_b: tuple[str, ...]
             ) -> dict:
        remarks_a, sizes_a = self.collect(unit, flags_a)
        remarks_b, sizes_b = self.collect(unit, flags_b)
        keys_a = {r.key(): r for r in remarks_a if r.kind != "Analysis"}
        keys_b = {r.key(): r for r in remarks_b if r.kind != "Analysis"}
        gained = [keys_b[k] for k in keys_b if k not in keys_a]
        lost = [keys_a[k] for k in keys_a if k not in keys_b]
        sizes = {f: (sizes_a.get(f), sizes_b.get(f)) for f in sorted(set(sizes_a) | set(sizes_b))
                 if sizes_a.get(f) != sizes_b.get(f)}
        return {"unit": unit.source_rel, "a": list(flags_a), "b": list(flags_b),
                "gained": group_remarks(gained), "lost": group_remarks(lost),
                "size_changes": {f: {"a": a, "b": b} for f, (a, b) in sizes.items()},
                "total_size": {"a": sum(sizes_a.values()), "b": sum(sizes_b.values())}}


def _cut_function(text: str, function: str) -> str:
    start = text.find(f"@{function}(")
    if start < 0:
        return f"(no function {function!r} in this IR)"
    start = text.rfind("\ndefine ", 0, start) + 1
    end = text.find("\n}\n", start)
    body = text[start:end + 2 if end >= 0 else None]
    return body if len(body) <= MAX_IR_CHARS else body[:MAX_IR_CHARS] + TRUNCATED
