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


@dataclass
class Knowledge:
    """Measured evaluations as (features, log ratio, program); `note` says why an
    unusable file was set aside."""
    path: str
    samples: list[dict] = field(default_factory=list)
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
        samples = [s for s in raw if _valid_sample(s)] if isinstance(raw, list) else []
        return cls(path, samples)

    @classmethod
    def _set_aside(cls, path: str, why: str) -> "Knowledge":
        try:
            os.replace(path, path + ".bad")
        except OSError:
            pass
        return cls(path, note=f"screening knowledge {path} {why}: set aside as .bad, "
                              "starting afresh")

    def add(self, samples: list[dict]) -> None:
        known = {(s["program"], s["key"]) for s in self.samples}
        for sample in samples:
            if (sample["program"], sample["key"]) not in known:
                known.add((sample["program"], sample["key"]))
                self.samples.append(sample)
        self.samples = self.samples[-MAX_SAMPLES:]

    def save(self) -> None:
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        data = {"version": KNOWLEDGE_VERSION, "samples": self.samples}
        write_atomic(self.path, json.dumps(data).encode(), durable=False)

    def programs(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for s in self.samples:
            counts[s["program"]] = counts.get(s["program"], 0) + 1
        return counts


def _valid_sample(sample: object) -> bool:
    return (isinstance(sample, dict) and isinstance(sample.get("features"), dict)
            and isinstance(sample.get("target"), (int, float))
            and math.isfinite(sample["target"])
            and all(isinstance(v, (int, float)) for v in sample["features"].values())
            and isinstance(sample.get("program"), str) and isinstance(sample.get("key"), str))
