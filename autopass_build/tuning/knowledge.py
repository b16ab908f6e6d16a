"""What screening has learned, kept between programs: the user's cache, one file per
compiler and CPU (`knowledge-<key>.json`, versioned).  A file that cannot be read or has
another version is set aside as `.bad` and started afresh: never trusted, never a crash.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field

from autopass_build.core.cpu import this_cpu
from autopass_build.core.files import hash_json, user_cache_dir, write_atomic

KNOWLEDGE_VERSION = 2     # 2: loop features, no knob values
MAX_SAMPLES = 5000         # the knowledge file keeps the newest this many


def knowledge_path(compiler_id: str) -> str:
    """One file per compiler and CPU: what -O3 does differs between them."""
    cpu = this_cpu().model
    key = hash_json([KNOWLEDGE_VERSION, compiler_id, cpu])[:16]
    return user_cache_dir("screen", f"knowledge-{key}.json")


@dataclass(frozen=True)
class Sample:
    """One measured evaluation as screening learns from it: a candidate's code features
    (or one unit's) and the log of its measured ratio."""
    features: dict[str, float]
    target: float             # log(candidate / baseline), as measured
    program: str              # where it was measured: another program's weigh less
    key: str                  # phase:config[:source]: one sample per evaluation
    level: str = ""           # "unit" (screen.UNIT) when it is one unit's

    def to_json(self) -> dict[str, object]:
        data: dict[str, object] = {"features": self.features, "target": self.target,
                                   "program": self.program, "key": self.key}
        if self.level:
            data["level"] = self.level
        return data

    @classmethod
    def from_json(cls, raw: object) -> "Sample | None":
        """A sample as the knowledge file keeps it; None for one of another shape (a
        file edited, or written by a bug): dropped, never trusted."""
        if not isinstance(raw, dict):
            return None
        features, target = raw.get("features"), raw.get("target")
        program, key, level = raw.get("program"), raw.get("key"), raw.get("level", "")
        if not (isinstance(features, dict) and isinstance(target, (int, float))
                and math.isfinite(target) and isinstance(program, str)
                and isinstance(key, str) and isinstance(level, str)
                and all(isinstance(v, (int, float)) for v in features.values())):
            return None
        return cls({str(k): float(v) for k, v in features.items()}, float(target), program,
                   key, level)


@dataclass
class Knowledge:
    """Measured evaluations (Sample); `note` says why an unusable file was set aside."""
    path: str
    samples: list[Sample] = field(default_factory=list)
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
        raw = data.get("samples", [])
        read = [Sample.from_json(s) for s in raw] if isinstance(raw, list) else []
        return cls(path, [s for s in read if s is not None])

    @classmethod
    def _set_aside(cls, path: str, why: str) -> "Knowledge":
        try:
            os.replace(path, path + ".bad")
        except OSError:
            pass
        return cls(path, note=f"screening knowledge {path} {why}: set aside as .bad, "
                              "starting afresh")

    def add(self, samples: list[Sample]) -> None:
        known = {(s.program, s.key) for s in self.samples}
        for sample in samples:
            if (sample.program, sample.key) not in known:
                known.add((sample.program, sample.key))
                self.samples.append(sample)
        self.samples = self.samples[-MAX_SAMPLES:]

    def save(self) -> None:
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        data = {"version": KNOWLEDGE_VERSION, "samples": [s.to_json() for s in self.samples]}
        write_atomic(self.path, json.dumps(data).encode(), durable=False)

    def programs(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for s in self.samples:
            counts[s.program] = counts.get(s.program, 0) + 1
        return counts
