"""`autopass-cc` / `autopass-c++`: the compiler wrapper.

Three ways in, one behaviour:

* as the compiler:        CC=autopass-cc make            (real compiler: clang-19)
* as a launcher:          autopass-cc clang-19 -c a.c     (CMake's COMPILER_LAUNCHER)
* masquerading:           a `gcc`/`cc` symlink to us, first on PATH (autopass record)

The rule that matters most: never break the build.  The real compiler always runs with
the byte-exact original arguments.  Queries, probes and anything we do not capture are
handed over with `exec` (no extra process, not one byte added to the output).  Compiles
run first, untouched; only after they succeed is the IR captured, and any failure of
ours is logged to the store and ignored.  A build that names gcc and gets clang through
the masquerade link: a compile or link clang refuses goes to that gcc, and is recorded as
a skip with clang's error.  Only foundations are imported here.
"""

from __future__ import annotations

import os
import sys

from autopass_build.capture.compiler_args import Invocation, Skip, classify
from autopass_build.capture.host import Host, Interrupted, LocalHost, interrupts
from autopass_build.capture.plan import (
    Plan,
    WrapperError,
    clang_or_the_named_gcc,
    is_cxx_name,
    looks_like_compiler,
)
from autopass_build.capture.record.spool import remove_tmp_files
from autopass_build.core.names import ENV_GUARD

__all__ = ["main", "is_cxx_name", "looks_like_compiler"]


def main(argv: list[str] | None = None, host: Host | None = None,
         env: dict[str, str] | None = None, cwd: str | None = None) -> int:
    """One compiler call: `argv` as the build gave it; `host`, `env` and `cwd` are the
    server's for a call the launcher sent (server.py), else this process's."""
    if host is not None:
        return _call(argv, host, env, cwd)
    host = LocalHost()
    with interrupts() as interrupted:
        try:
            return _call(argv, host, env, cwd)
        except Interrupted:
            pass
    remove_tmp_files()     # an IR file half written: no later record would remove it
    return host.exit_like(-interrupted[0])


def _call(argv: list[str] | None, host: Host, env: dict[str, str] | None,
          cwd: str | None) -> int:
    argv = list(sys.argv if argv is None else argv)
    env = dict(os.environ) if env is None else env
    name = os.path.basename(argv[0])
    if env.get(ENV_GUARD):
        host.say(f"{name}: error: autopass's wrapper was started by the compiler it wraps "
                 "(recursion). The real compiler resolves back to autopass: set AUTOPASS_CC "
                 "/ AUTOPASS_CXX to the real clang (e.g. /usr/bin/clang-19), or remove "
                 "autopass's symlinks from the front of PATH.\n")
        return 2
    try:
        plan = Plan(argv, env, cwd or os.getcwd(), host)
    except WrapperError as error:
        host.say(f"{name}: error: {error}\n")
        return 2
    except Exception as error:  # nothing ran yet, and there is no compiler to fall back to
        host.say(f"{name}: error: cannot start ({error!r}); set AUTOPASS_MODE=off to "
                 "bypass autopass, and please report this\n")
        return 2
    if plan.mode == "apply":
        from autopass_build.capture.apply import apply_mode
        return apply_mode.run(plan)
    if plan.mode == "off" or plan.store_dir is None:
        return plan.exec_compiler()
    try:
        parsed = classify(plan.args, plan.cwd, plan.cxx)
    except Exception as error:  # never break the build over our own bug
        plan.log(f"classify failed: {error!r}")
        return plan.exec_compiler()
    if isinstance(parsed, Skip):
        if not parsed.quiet:
            plan.record_skip(parsed)
        return plan.exec_compiler()
    return _compile_and_record(plan, parsed)


def _compile_and_record(plan: Plan, inv: Invocation) -> int:
    """Record mode's compile: in one pass where it can be (one_pass.py: the compile with
    a plugin that saves its IR), else the plain compile, then the IR step."""
    status = _in_one_pass(plan, inv)
    if status is not None:
        return status
    try:
        if plan.gcc_named:
            done = clang_or_the_named_gcc(plan, inv)
            if done is None:
                return 0     # gcc built it: recorded as a skip, with clang's reason
        else:
            done = plan.host.inherit(plan.compiler_path, [plan.compiler_argv0] + plan.args,
                                     plan.child_env())
    except OSError as error:  # what exec would have said, without a traceback
        plan.host.say(f"{plan.name}: error: cannot run {plan.compiler_path}: "
                      f"{error.strerror}\n")
        return 127
    if done.status != 0:
        return plan.host.exit_like(done.status)
    try:
        from autopass_build.capture.record.recorder import record_call
        spool = plan.spool()
        spool.prepare()
        record_call(spool, plan.call(), inv)
    except Exception as error:  # the build has succeeded; ours is only a log line
        plan.log(f"record failed for {' '.join(plan.args)[:500]}: {error!r}")
    return 0


def _in_one_pass(plan: Plan, inv: Invocation) -> int | None:
    """The compile made in one pass and recorded (its status), or None: run it plainly."""
    try:
        from autopass_build.capture.record import one_pass
        plugin = one_pass.eligible(inv, plan.env, plan.compiler_path)
        if plugin is None:
            return None
        spool = plan.spool()
        spool.prepare()
        return one_pass.compile_and_record(plan.call(), inv, spool, plugin, plan.colour())
    except Exception as error:   # nothing of ours is left: the plain path runs
        plan.log(f"one-pass compile failed for {' '.join(plan.args)[:500]}: {error!r}")
        return None


if __name__ == "__main__":
    sys.exit(main())
