"""The whole-program composition a run settled on: what the stages chose as the search's
baseline, and what each step on top adds to it (tuning/stage_choice.py chooses it,
tuning/steps_on_top.py extends it, the tuner ships it)."""

from __future__ import annotations

from dataclasses import dataclass

from autopass_build.candidates import pgo, stages
from autopass_build.candidates.bolt import TrainedBolt
from autopass_build.candidates.stages import Stage, StageFlags
from autopass_build.core.stage_flags import lto_mode
from autopass_build.tuning.journal import Entry


@dataclass
class Chosen:
    """The composition that became the baseline, and what it adds to the build."""
    stages: tuple[Stage, ...]
    flags: StageFlags
    entry: Entry                       # its verified measurement against `against`
    profile: pgo.TrainedProfile | None
    bolt: TrainedBolt | None = None      # the BOLT profile, when BOLT is a stage
    bolt_libraries: tuple[TrainedBolt, ...] = ()   # the project libraries BOLT rewrote
    against: str = "the recorded build"  # a step on top: the composition without it

    @property
    def name(self) -> str:
        return stages.name(self.stages)

    @property
    def links_across_units(self) -> bool:
        """LTO or ThinLTO: functions are inlined and moved across units at link time."""
        return bool(lto_mode(self.stages))
