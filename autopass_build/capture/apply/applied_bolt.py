"""Apply mode and BOLT: the link of the tuned binary (or a library BOLT rewrites) with
BOLT to run after it when its shipped profile may be used, and that run, which never
breaks the build: any failure keeps the linked binary, with one warning.  Runs in the
link's wrapper: core only, BOLT's own module only when BOLT runs."""

from __future__ import annotations

from autopass_build.capture.apply.applied_profiles import shipped_file
from autopass_build.capture.apply.to_apply import BoltPlan, ToApply, refuse
from autopass_build.core import flags_db
from autopass_build.core.apply_terms import ApplyPolicy


def bolt_decision(plan: flags_db.BoltLibrary, path: str, output: str, link: ToApply,
                  policy: ApplyPolicy, stale: flags_db.ProfileRef | None = None) -> ToApply:
    """The link of `output` (the target, or a library BOLT rewrites: `plan`), with BOLT
    to run after it when the shipped profile is intact (else the link's own decision
    with a warning, or an error under the error policy)."""
    file, refused = shipped_file(plan.profile, path, "BOLT profile",
                                 "the build was tuned with (re-run autopass tune)")
    if refused:
        warning = "; ".join(w for w in (link.warning, refused + ": linking without BOLT") if w)
        return ToApply(link.flags, warning, policy is ApplyPolicy.ERROR)
    stale_file = shipped_file(stale, path, "BOLT profile", "")[0] if stale else ""
    return ToApply(link.flags, link.warning,
                    bolt=BoltPlan(output, file, plan.binary, stale_file))


def run_bolt(plan: BoltPlan, policy: ApplyPolicy) -> ToApply:
    """After the target's link: BOLT on the output with the shipped profile, if the
    output is the binary the profile was trained on.  Any failure leaves the linked
    binary as it is, with one warning (an error under the error policy)."""
    from autopass_build.core import bolt_commands as bolt

    try:
        fingerprint = bolt.code_fingerprint(plan.output)
        if fingerprint != plan.fingerprint and plan.stale and policy is not ApplyPolicy.ERROR:
            bolt.optimize(plan.output, plan.stale, plan.output, stale=True)
            return ToApply(warning=f"{plan.output}: the BOLT profile was trained on another "
                            "build of it (a source, flag or compiler changed since tuning): "
                            "applied by stale-profile inference, which recovers part of its "
                            "gain; retrain (autopass tune) for all of it")
        if fingerprint != plan.fingerprint:
            return refuse(f"{plan.output}: the BOLT profile was trained on another build of "
                           "it (a source, flag or compiler changed since tuning): BOLT not "
                           "applied; re-run autopass tune", policy)
        bolt.optimize(plan.output, plan.profile, plan.output)
    except (bolt.BoltError, OSError) as error:
        return refuse(f"{plan.output}: BOLT not applied, the linked binary is kept "
                       f"({error})", policy)
    except Exception as error:  # our bug must not break the build: the link succeeded
        return refuse(f"{plan.output}: BOLT not applied, the linked binary is kept "
                       f"({error!r})", policy)
    return ToApply()
