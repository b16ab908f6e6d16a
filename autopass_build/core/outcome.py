"""What became of one evaluation: every way a candidate can fail has a name."""

from __future__ import annotations

from enum import Enum

from autopass_build.core.errors import AutopassError


class Outcome(str, Enum):
    OK = "OK"
    WRONG_OUTPUT = "WRONG_OUTPUT"        # exit code / stdout / the user's check differ
    RUN_CRASH = "RUN_CRASH"              # killed by a signal (segfault, abort, ...)
    RUN_TIMEOUT = "RUN_TIMEOUT"          # killed at k x the baseline's time
    COMPILE_FAIL = "COMPILE_FAIL"        # the compiler rejected the flags
    COMPILE_CRASH = "COMPILE_CRASH"      # the compiler died of a signal
    COMPILE_TIMEOUT = "COMPILE_TIMEOUT"  # the compiler hung and was killed
    LINK_FAIL = "LINK_FAIL"
    TRAINING_FAIL = "TRAINING_FAIL"      # a stage's training run failed (BOLT)
    POST_LINK_FAIL = "POST_LINK_FAIL"    # BOLT could not process the linked binary, or a
                                         # step on top changed what a binary exports
    BASELINE_FAIL = "BASELINE_FAIL"      # the baseline itself does not run: fix the config
    SCREENED = "SCREENED"                # not measured: the screening model predicted no gain

    def __str__(self) -> str:
        return self.value


class EvaluationError(AutopassError):
    """A candidate could not be built or run; `outcome` says how."""

    def __init__(self, outcome: Outcome, message: str):
        super().__init__(message)
        self.outcome = outcome
