"""Apply mode: this source's tuned flags appended; any doubt -> the plain compile.

The decision is the applier's (applier.py); this runs it: the tuned compile with its
output held back, so that a rejected flag (F3) shows only one warning before the plain
compile's own output; after a tuned link, BOLT; stale-profile notes summarized.
"""

from __future__ import annotations

from autopass_build.capture.apply import tally, train_cache
from autopass_build.capture.apply.tally import APPLIED, NOT_APPLIED, SEEN
from autopass_build.capture.compiler_args import COMPILE, Invocation, Skip, classify
from autopass_build.capture.plan import Plan, WrapperError, clang_or_the_named_gcc
from autopass_build.core import decisions, proc
from autopass_build.core.apply_terms import (
    APPLY_POLICIES,
    DEFAULT_APPLY_POLICY,
    TRAIN_PHASES,
    ApplyPolicy,
    TrainPhase,
)
from autopass_build.core.names import (
    ENV_APPLY_TALLY,
    ENV_IR_PLUGIN,
    ENV_IR_PLUGIN_FOR,
    ENV_TRAIN_PHASE,
)


def run(plan: Plan) -> int:
    """Apply mode: this source's tuned flags appended; any doubt -> the plain compile."""
    parsed: Invocation | Skip | None = None
    try:
        parsed = classify(plan.args, plan.cwd, plan.cxx)
        if isinstance(parsed, Invocation) and parsed.sources:
            _tally(plan, SEEN)
        decision = _decide(plan, parsed)
    except Exception as error:  # our bug must not break the build
        decision = None
        _note(plan, f"apply failed ({error!r}); default flags")
    if decision is None:
        return _plain(plan, parsed)
    if decision.warning:
        _note(plan, decision.warning, decision.error)
        if decision.error:
            return 1
    flags = _with_plugin(plan, decision.flags)
    if not flags:
        return _plain(plan, parsed)
    # Captured, so that a rejection (F3) shows only our one-line warning, then the plain
    # compile's own output.  LTO objects need a fixed address layout to be reproducible.
    argv = [plan.compiler_argv0] + plan.args + list(flags)
    run = train_cache.Command(plan.compiler_path, argv, plan.child_env())
    if plan.train_phase and isinstance(parsed, Invocation):
        # named before the compiler runs: a build killed between the compiler's write and
        # the tally line after it still has the file deleted by the next `apply`
        for output in tally.outputs_of(parsed, plan.cwd):
            _tally(plan, tally.BEGUN + output + "\n")
    if plan.train_phase and isinstance(parsed, Invocation) and parsed.mode == COMPILE:
        run = train_cache.through_ccache(run.program, argv, run.env,
                                         plan.env.get(ENV_APPLY_TALLY))
    try:
        done, out, err = plan.host.buffered(run.program, run.argv, run.env,
                                            fixed_layout=proc.wants_fixed_layout(argv))
    except OSError as error:   # E2BIG and the like: the plain compile is still ours to run
        _note(plan, f"cannot run the compiler with the tuned flags ({error.strerror}); "
                    "compiling with the default flags")
        return _plain(plan, parsed)
    finally:
        run.clean_up()
    if done.status < 0:     # killed (Ctrl-C, a CI timeout): not a rejected flag (F15)
        return plan.host.exit_like(done.status)
    if done.status != 0 and run.program != plan.compiler_path:   # ccache's doing? without it
        done, out, err = plan.host.buffered(plan.compiler_path, argv, plan.child_env())
    if done.status == 0:
        _tally(plan)
        if plan.train_phase and isinstance(parsed, Invocation):   # for `apply --train`
            for output in tally.outputs_of(parsed, plan.cwd):
                _tally(plan, tally.OUTPUT + output + "\n")
        if plan.train_phase == TrainPhase.INSTRUMENT and isinstance(parsed, Invocation):
            for line in tally.graph_lines(parsed, plan.cwd):   # read after this build only
                _tally(plan, line)
        notes = []
        err, unmatched = decisions.not_applied(err)
        unmatched = _in_no_source(parsed, unmatched)
        if unmatched:
            _note(plan, _unmatched_text(parsed, unmatched))
        if decision.profiled:
            from autopass_build.capture.apply.applied_profiles import stale_profile
            from autopass_build.core.pgo_profile import lto_compile
            err, stale = stale_profile(err, decision.profiled, _policy(plan),
                                       lto_compile(argv))
            notes.append(stale)
        if decision.bolt:   # the target's link: BOLT rewrites what it made
            from autopass_build.capture.apply.applied_bolt import run_bolt
            notes.append(run_bolt(decision.bolt, _policy(plan)))
        plan.host.write(out, err)
        failed = False
        for note in notes:
            if note and note.warning:
                _note(plan, note.warning, note.error)
                failed = failed or note.error
        return 1 if failed else 0
    first = (err.decode("utf-8", "replace").strip().splitlines() or ["?"])[0]
    _note(plan, f"the compiler rejected the tuned flags {' '.join(decision.flags)} "
                f"({first[:200]}); compiling with the default flags")
    return _plain(plan, parsed)


def _plain(plan: Plan, parsed: Invocation | Skip | None) -> int:
    """The command as the build gave it; a compile or link addressed to gcc that clang
    refuses goes to that gcc (probes and queries stay clang's, as when recorded)."""
    if not plan.gcc_named or not isinstance(parsed, Invocation):
        return plan.exec_compiler()
    done = clang_or_the_named_gcc(plan, parsed)
    return 0 if done is None else plan.host.exit_like(done.status)


def _with_plugin(plan: Plan, flags: tuple[str, ...]) -> tuple[str, ...]:
    """The tuned flags, and what loads autopass's pass plugin when they carry decisions
    (core/decisions.py); without their decisions, said once per compile, when the plugin
    was not built for this compiler (or cannot be built here)."""
    carried = decisions.of_flags(flags)
    if not carried:
        return flags
    plugin, built_for = plan.env.get(ENV_IR_PLUGIN, ""), plan.env.get(ENV_IR_PLUGIN_FOR, "")
    import os

    if plugin and os.path.isfile(plugin) and os.path.realpath(plan.compiler_path) == built_for:
        return flags + decisions.plugin_flags(plugin)
    _note(plan, f"{len(carried)} decision{'s' if len(carried) > 1 else ''} carried in the IR "
          "not applied: autopass's pass plugin "
          + (f"was built for {built_for}, not {plan.compiler_path}" if plugin else
             "cannot be built here (llvm-config and LLVM's headers: sudo apt-get install "
             "llvm-19-dev)"))
    return decisions.without(flags)


def _in_no_source(parsed, unmatched: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """What the plugin said, less what a compile of several sources says as a matter of
    course: the plugin runs on each source's module, and a decision on one source's
    function finds no such function in the others (a unit compiled in one command with
    its mates takes their flags).  It is unmatched when every module said so."""
    sources = len(parsed.sources) if isinstance(parsed, Invocation) else 1
    if sources < 2:
        return unmatched
    missing: dict[str, int] = {}
    for token, why in unmatched:
        if why == decisions.NO_FUNCTION:
            missing[token] = missing.get(token, 0) + 1
    kept = [(t, why) for t, why in unmatched
            if why != decisions.NO_FUNCTION or missing[t] >= sources]
    return list(dict.fromkeys(kept))


def _unmatched_text(parsed, unmatched: list[tuple[str, str]]) -> str:
    """One line for the decisions the plugin found no code for (or changed code)."""
    sources = ", ".join(s.path for s in parsed.sources) if isinstance(parsed, Invocation) \
        else "a compile"
    token, why = unmatched[0]
    more = f" and {len(unmatched) - 1} more" if len(unmatched) > 1 else ""
    return (f"{sources}: tuned decision {token}{more} not applied ({why}): the source "
            "changed since tuning; `autopass db status` counts what still matches, "
            "`autopass tune` tunes it again")


def _note(plan: Plan, text: str, error: bool = False) -> None:
    """Something of the database not applied, said on the build's stderr and kept in
    the tally, where `verify` reads what the build it measures lacks (F18)."""
    plan.host.say(f"autopass: {'error' if error else 'warning'}: {text}\n")
    _tally(plan, NOT_APPLIED + " ".join(text.split()) + "\n")


def _tally(plan: Plan, line: str = APPLIED) -> None:
    tally.write(plan.env.get(ENV_APPLY_TALLY), line)


def _policy(plan: Plan) -> ApplyPolicy:
    return ApplyPolicy(plan.policy) if plan.policy else DEFAULT_APPLY_POLICY


def _decide(plan: Plan, parsed: Invocation | Skip):
    from autopass_build.capture.apply import applier

    # the environment's words, parsed once here: the applier reads members, never text
    if plan.policy and plan.policy not in APPLY_POLICIES:
        raise WrapperError(f"AUTOPASS_APPLY_POLICY={plan.policy!r}: use one of "
                           + ", ".join(APPLY_POLICIES))
    if plan.train_phase and plan.train_phase not in TRAIN_PHASES:
        raise WrapperError(f"{ENV_TRAIN_PHASE}={plan.train_phase!r}: use one of "
                           + ", ".join(TRAIN_PHASES))
    return applier.decide_call(parsed, plan.cwd, plan.root, plan.db,
                               _policy(plan), plan.compiler_path,
                               TrainPhase(plan.train_phase))
