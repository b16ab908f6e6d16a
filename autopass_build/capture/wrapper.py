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

from autopass_build.capture.compiler_args import CLANG_REJECTS, Invocation, Skip, classify
from autopass_build.capture.spool import Spool, find_store_dir
from autopass_build.core import proc, toolchain
from autopass_build.core.names import (
    APPLY_POLICIES,
    DEFAULT_APPLY_POLICY,
    ENV_APPLY_POLICY,
    ENV_APPLY_TALLY,
    ENV_FALLBACK_CC,
    ENV_FALLBACK_CXX,
    ENV_FLAGS_DB,
    ENV_GUARD,
    ENV_MASQUERADE_DIR,
    ENV_MODE,
    ENV_ROOT,
    ENV_STORE,
    WRAPPER_MODES,
)

LAUNCHER_OPTIONS = ("--autopass-store=", "--autopass-root=", "--autopass-mode=",
                    "--autopass-db=", "--autopass-policy=")
COMPILER_BASES = ("cc", "gcc", "c++", "g++", "clang", "clang++")


class WrapperError(Exception):
    """A misconfiguration the user must fix; printed as one line, build fails."""


def is_cxx_name(name: str) -> bool:
    base = os.path.basename(name)
    return "++" in base or base.endswith("cxx") or base.startswith("autopass-c++")


def _self_paths(argv0: str, env: dict[str, str]) -> frozenset[str]:
    """Real paths that are autopass itself (files, and the masquerade folder of
    `autopass record`), never to be taken for the real compiler."""
    paths = {os.path.realpath(argv0)}
    located = toolchain.which(argv0, env.get("PATH", "")) if os.sep not in argv0 else None
    if located:
        paths.add(os.path.realpath(located))
    masquerade = env.get(ENV_MASQUERADE_DIR)
    if masquerade:
        paths.update((os.path.abspath(masquerade), os.path.realpath(masquerade)))
    return frozenset(paths)


WRAPPER_NAMES = ("autopass-cc", "autopass-c++")


def _is_autopass(path: str, self_paths: frozenset[str]) -> bool:
    """`path` is one of our own wrappers: what CMake finds for `clang-19` when it
    configures under `autopass record` (the masquerade link first on PATH), and still
    has cached when the user later runs `ninja` on their own (no masquerade then: the
    link's target is known by its name)."""
    real = os.path.realpath(path)
    return real in self_paths or os.path.dirname(real) in self_paths \
        or os.path.dirname(os.path.abspath(path)) in self_paths \
        or os.path.basename(real) in WRAPPER_NAMES


def looks_like_compiler(name: str) -> bool:
    """cc, gcc, clang++, clang-19, x86_64-linux-gnu-gcc-12, ... (no `re`: start-up cost)."""
    base = os.path.basename(name)
    head, _, tail = base.rpartition("-")
    if head and tail.replace(".", "").isdigit():
        base = head                                  # drop a version suffix
    return base.rpartition("-")[2] in COMPILER_BASES  # drop a target-triple prefix


def _gcc_name(argv0: str) -> str:
    """The basename when the build called a gcc by name (gcc, cc, g++, c++,
    x86_64-linux-gnu-gcc-12), else ""."""
    base = os.path.basename(argv0)
    if base in WRAPPER_NAMES or "clang" in base or not looks_like_compiler(base):
        return ""
    return base


def _launcher_compiler(first: str, env: dict[str, str]) -> str | None:
    """The compiler named by a launcher-style call (`autopass-cc clang-19 ...`)."""
    if first.startswith("-") or not looks_like_compiler(first):
        return None
    return toolchain.which(first, env.get("PATH", ""))


class Plan:
    """Everything resolved from argv and the environment before anything runs."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: str):
        self.env = env
        self.cwd = cwd
        rest = argv[1:]
        options = {}
        while rest and rest[0].startswith(LAUNCHER_OPTIONS):
            key, value = rest.pop(0)[2:].split("=", 1)
            options[key] = value
        self_paths = _self_paths(argv[0], env)
        named = rest[0] if rest else ""
        launched = _launcher_compiler(named, env) if rest else None
        if launched and _is_autopass(launched, self_paths):
            # AutoPass.cmake's launcher in front of a compiler that is record mode's
            # masquerade link (both ways in at once): we are the outer layer, and the
            # compiler is the real one that the masquerade stands for.
            rest, launched = rest[1:], None
            self.cxx = is_cxx_name(named)
        else:
            self.cxx = is_cxx_name(named if launched else argv[0])
        # Record and apply put `gcc`/`cc` links to us first on PATH, so a build that names
        # gcc gets clang; where clang refuses a command (gcc-only options), that name's
        # real compiler builds it (`named_compiler`): the build never breaks over it.
        self.gcc_named = "" if launched else _gcc_name(argv[0])
        if not launched and os.path.basename(argv[0]) in WRAPPER_NAMES:
            # Called as $CC/$CXX, which record and apply set: the user's build, left
            # alone, takes the compiler they had there (make's default is g++).
            fallback = env.get(ENV_FALLBACK_CXX if self.cxx else ENV_FALLBACK_CC, "")
            self.gcc_named = fallback if _gcc_name(fallback) else ""
        self._self_paths = self_paths
        if launched:
            self.compiler_argv0, self.compiler_path, self.args = named, launched, rest[1:]
        else:
            tool = "clang++" if self.cxx else "clang"
            found = toolchain.find_tool(tool, env=env, exclude=self_paths)
            if not found:
                raise WrapperError(toolchain.not_found(tool, env))
            self.compiler_argv0 = self.compiler_path = found
            self.args = rest
        # The environment first: `autopass apply|record|verify` set it for this build,
        # while the launcher's options are what CMake was configured with (a tree
        # configured to record, built by `autopass verify`, must apply).
        self.mode = env.get(ENV_MODE) or options.get("autopass-mode") or "record"
        if self.mode not in WRAPPER_MODES:
            raise WrapperError(f"{ENV_MODE}={self.mode!r} is not one of {', '.join(WRAPPER_MODES)}")
        self.store_dir = env.get(ENV_STORE) or options.get("autopass-store") or None
        if self.store_dir is None and self.mode == "record":
            self.store_dir = find_store_dir(cwd)
        self.db = env.get(ENV_FLAGS_DB) or options.get("autopass-db") or None
        self.policy = (env.get(ENV_APPLY_POLICY) or options.get("autopass-policy")
                       or DEFAULT_APPLY_POLICY)
        self.root = (env.get(ENV_ROOT) or options.get("autopass-root")
                     or (os.path.dirname(os.path.abspath(self.store_dir))
                         if self.store_dir else cwd))

    def named_compiler(self) -> str | None:
        """The real compiler of the gcc name the build called, when that is not the
        clang that runs in its place (None otherwise)."""
        if not self.gcc_named:
            return None
        found = toolchain.which(self.gcc_named, self.env.get("PATH", ""), self._self_paths)
        if not found or os.path.realpath(found) == os.path.realpath(self.compiler_path):
            return None
        return found

    def child_env(self) -> dict[str, str]:
        return {**self.env, ENV_GUARD: "1"}

    def exec_compiler(self) -> int:
        """Replace this process by the real compiler with the original arguments (never
        returns; callers write `return plan.exec_compiler()` so the flow reads so)."""
        return os.execve(self.compiler_path, [self.compiler_argv0] + self.args, self.child_env())


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv if argv is None else argv)
    env = dict(os.environ)
    name = os.path.basename(argv[0])
    if env.get(ENV_GUARD):
        sys.stderr.write(
            f"{name}: error: autopass's wrapper was started by the compiler it wraps "
            "(recursion). The real compiler resolves back to autopass: set AUTOPASS_CC / "
            "AUTOPASS_CXX to the real clang (e.g. /usr/bin/clang-19), or remove autopass's "
            "symlinks from the front of PATH.\n")
        return 2
    try:
        plan = Plan(argv, env, os.getcwd())
    except WrapperError as error:
        sys.stderr.write(f"{name}: error: {error}\n")
        return 2
    except Exception as error:  # nothing ran yet, and there is no compiler to fall back to
        sys.stderr.write(f"{name}: error: cannot start ({error!r}); set AUTOPASS_MODE=off "
                         "to bypass autopass, and please report this\n")
        return 2
    if plan.mode == "apply":
        return _apply(plan)
    if plan.mode == "off" or plan.store_dir is None:
        return plan.exec_compiler()
    try:
        parsed = classify(plan.args, plan.cwd, plan.cxx)
    except Exception as error:  # never break the build over our own bug
        _log(plan, f"classify failed: {error!r}")
        return plan.exec_compiler()
    if isinstance(parsed, Skip):
        if not parsed.quiet:
            _try_record_skip(plan, parsed)
        return plan.exec_compiler()
    return _compile_and_record(plan, parsed)


def _compile_and_record(plan: Plan, inv: Invocation) -> int:
    try:
        if plan.gcc_named:
            done = _clang_or_the_named_gcc(plan, inv)
            if done is None:
                return 0     # gcc built it: recorded as a skip, with clang's reason
        else:
            done = proc.run_inherit(plan.compiler_path, [plan.compiler_argv0] + plan.args,
                                    plan.child_env())
    except OSError as error:  # what exec would have said, without a traceback
        sys.stderr.write(f"{os.path.basename(sys.argv[0])}: error: cannot run "
                         f"{plan.compiler_path}: {error.strerror}\n")
        return 127
    if done.status != 0:
        return proc.exit_like(done.status)
    try:
        from autopass_build.capture.recorder import record_call
        spool = _spool(plan)
        spool.prepare()
        record_call(spool, _call(plan), inv)
    except Exception as error:  # the build has succeeded; ours is only a log line
        _log(plan, f"record failed for {' '.join(plan.args)[:500]}: {error!r}")
    return 0


def _clang_or_the_named_gcc(plan: Plan, inv: Invocation) -> proc.Finished | None:
    """A compile the build addressed to gcc: clang first, its output held back; when clang
    refuses it and the named gcc builds it, the skip is recorded and None returned."""
    argv = [plan.compiler_argv0] + _colour(plan.args) + plan.args
    done, out, err = proc.run_buffered(plan.compiler_path, argv, plan.child_env())
    gcc = plan.named_compiler() if done.status > 0 else None
    if gcc is not None:
        by_gcc = proc.run_inherit(gcc, [gcc] + plan.args, plan.child_env())
        if by_gcc.status == 0:
            if plan.mode == "record":
                _try_record_skip(plan, Skip(CLANG_REJECTS, _first_error(err)[:300],
                                            tuple(s.path for s in inv.sources)))
            return None
        return by_gcc
    sys.stdout.buffer.write(out)
    sys.stderr.buffer.write(err)
    sys.stdout.flush()
    sys.stderr.flush()
    return done


def _first_error(stderr: bytes) -> str:
    """clang's first "error:" line (its output starts with "In file included from")."""
    lines = stderr.decode("utf-8", "replace").strip().splitlines() or ["?"]
    return next((line for line in lines if "error:" in line), lines[0])


def _apply(plan: Plan) -> int:
    """Apply mode: this source's tuned flags appended; any doubt -> the plain compile."""
    parsed: Invocation | Skip | None = None
    try:
        parsed = classify(plan.args, plan.cwd, plan.cxx)
        decision = _decide(plan, parsed)
    except Exception as error:  # our bug must not break the build
        decision = None
        sys.stderr.write(f"autopass: warning: apply failed ({error!r}); default flags\n")
    if decision is None:
        return _plain(plan, parsed)
    if decision.warning:
        sys.stderr.write(f"autopass: {'error' if decision.error else 'warning'}: "
                         f"{decision.warning}\n")
        if decision.error:
            return 1
    if not decision.flags:
        return _plain(plan, parsed)
    if proc.wants_fixed_layout(decision.flags):
        proc.fix_address_layout()   # LTO objects are otherwise not reproducible
    # Captured, so that a rejection (F3) shows only our one-line warning, then the plain
    # compile's own output.
    argv = [plan.compiler_argv0] + plan.args + list(decision.flags)
    try:
        done, out, err = proc.run_buffered(plan.compiler_path, argv, plan.child_env())
    except OSError as error:   # E2BIG and the like: the plain compile is still ours to run
        sys.stderr.write(f"autopass: warning: cannot run the compiler with the tuned flags "
                         f"({error.strerror}); compiling with the default flags\n")
        return _plain(plan, parsed)
    if done.status == 0:
        _tally(plan)
        notes = []
        if decision.profiled:
            from autopass_build.capture.applier import stale_profile
            err, stale = stale_profile(err, decision.profiled, plan.policy)
            notes.append(stale)
        if decision.bolt:   # the target's link: BOLT rewrites what it made
            from autopass_build.capture.applier import run_bolt
            notes.append(run_bolt(decision.bolt, plan.policy))
        sys.stdout.buffer.write(out)
        sys.stderr.buffer.write(err)
        failed = False
        for note in notes:
            if note and note.warning:
                sys.stderr.write(f"autopass: {'error' if note.error else 'warning'}: "
                                 f"{note.warning}\n")
                failed = failed or note.error
        return 1 if failed else 0
    first = (err.decode("utf-8", "replace").strip().splitlines() or ["?"])[0]
    sys.stderr.write(f"autopass: warning: the compiler rejected the tuned flags "
                     f"{' '.join(decision.flags)} ({first[:200]}); compiling with the "
                     "default flags\n")
    return _plain(plan, parsed)


def _colour(args: list[str]) -> list[str]:
    """clang writes into a pipe here, so it would drop the colours a terminal gets from
    it directly; ask for them where our stderr is a terminal and the build did not say."""
    if any(a.startswith(("-fcolor-diagnostics", "-fno-color-diagnostics",
                         "-fdiagnostics-color", "-fno-diagnostics-color")) for a in args):
        return []
    return ["-fcolor-diagnostics"] if os.isatty(2) else []


def _plain(plan: Plan, parsed: Invocation | Skip | None) -> int:
    """The command as the build gave it; a compile or link addressed to gcc that clang
    refuses goes to that gcc (probes and queries stay clang's, as when recorded)."""
    if not plan.gcc_named or not isinstance(parsed, Invocation):
        return plan.exec_compiler()
    done = _clang_or_the_named_gcc(plan, parsed)
    return 0 if done is None else proc.exit_like(done.status)


def _tally(plan: Plan) -> None:
    """One line in `autopass apply`'s tally file: this command got the tuned flags (a
    write of two bytes with O_APPEND: parallel compiles never interleave)."""
    path = plan.env.get(ENV_APPLY_TALLY)
    if path:
        try:
            with open(path, "a") as handle:
                handle.write("1\n")
        except OSError:
            pass


def _decide(plan: Plan, parsed: Invocation | Skip):
    from autopass_build.capture import applier

    if plan.policy not in APPLY_POLICIES:
        raise WrapperError(f"AUTOPASS_APPLY_POLICY={plan.policy!r}: use one of "
                           + ", ".join(APPLY_POLICIES))
    return applier.decide_call(parsed, plan.cwd, plan.root,
                               plan.db, plan.policy, plan.compiler_path)


def _call(plan: Plan):
    from autopass_build.capture.recorder import Call
    return Call(compiler_path=plan.compiler_path, compiler_argv0=plan.compiler_argv0,
                args=plan.args, cwd=plan.cwd, env=plan.env, root=plan.root)


def _try_record_skip(plan: Plan, skip: Skip) -> None:
    try:
        from autopass_build.capture.recorder import record_skip
        spool = _spool(plan)
        spool.prepare()
        record_skip(spool, _call(plan), skip)
    except Exception as error:
        _log(plan, f"recording a skipped command failed: {error!r}")


def _spool(plan: Plan) -> Spool:
    assert plan.store_dir is not None   # main() passes through when there is no store
    return Spool(plan.store_dir)


def _log(plan: Plan, line: str) -> None:
    _spool(plan).log(line)


if __name__ == "__main__":
    sys.exit(main())
