"""What apply mode adds to one compile or link (the applier's answer), shared by the
parts that decide it: the database's entries (applier.py), its profiles
(applied_profiles.py) and BOLT after a link (applied_bolt.py).  Runs in every compile:
the names of core/ only."""

from __future__ import annotations

from autopass_build.core.apply_terms import ApplyPolicy


class BoltPlan:
    """BOLT after a link: rewrite `output` with `profile` if its code is `fingerprint`,
    else with `stale` (the same profile as YAML) by stale-profile inference, if shipped."""
    __slots__ = ("output", "profile", "fingerprint", "stale")

    def __init__(self, output: str, profile: str, fingerprint: str, stale: str = ""):
        self.output, self.profile, self.fingerprint = output, profile, fingerprint
        self.stale = stale


class ToApply:
    """What to add to one compile: `flags`, plus `warning` (or `error` under policy);
    `profiled`: the source, when the flags include the PGO profile; `bolt`: what to do
    after the link succeeds."""
    __slots__ = ("flags", "warning", "error", "profiled", "bolt")

    def __init__(self, flags: tuple[str, ...] = (), warning: str = "", error: bool = False,
                 profiled: str = "", bolt: BoltPlan | None = None):
        self.flags, self.warning, self.error = flags, warning, error
        self.profiled, self.bolt = profiled, bolt


def refuse(why: str, policy: ApplyPolicy) -> ToApply:
    return ToApply((), why, error=(policy is ApplyPolicy.ERROR))
