"""Replay: any recorded binary, rebuilt with per-unit flags, from the stored IR.

    unit + flags ──compile (cached by IR, flags, compiler)──▶ object   (unit_objects.py)
    archive      ──members replaced in the original order──▶ archive  (relink.py)
    link         ──the recorded command, inputs swapped────▶ candidate binary

Candidate binaries land in `.autopass/work/<key>/`; shared libraries the binary links
from the project are rebuilt beside it and found first through LD_LIBRARY_PATH.
"""

from __future__ import annotations

from autopass_build.candidates.candidate import Candidate
from autopass_build.candidates.relink import Relinker
from autopass_build.candidates.unit_objects import QUIET, Flags, UnitObjects

__all__ = ["QUIET", "Replayer"]


class Replayer(UnitObjects):
    """The objects of a candidate (UnitObjects) and the binary they link into."""

    def build(self, target: str, flags_by_unit: dict[str, Flags] | None = None,
              link_flags: Flags = ()) -> Candidate:
        """Rebuild the recorded binary `target` (absolute path) with per-unit flags;
        `link_flags` go to every relink (PGO instrumentation needs its runtime)."""
        return Relinker(self).build(target, flags_by_unit, link_flags)
