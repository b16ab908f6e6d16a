"""One call of the compiler wrapper, resolved: which real compiler, which mode, which
store or database (`Plan`), and what record and apply mode share: running a command the
build addressed to gcc (clang first, that gcc where clang refuses it).  Only
foundations are imported here: it runs in every compile.
"""

from __future__ import annotations

import os

from autopass_build.capture.compiler_args import CLANG_REJECTS, Invocation, Skip
from autopass_build.capture.host import Host
from autopass_build.capture.record.spool import Spool, find_store_dir
from autopass_build.core import proc, toolchain
from autopass_build.core.errors import AutopassError
from autopass_build.core.names import (
    ENV_APPLY_POLICY,
    ENV_FALLBACK_CC,
    ENV_FALLBACK_CXX,
    ENV_FLAGS_DB,
    ENV_GUARD,
    ENV_IR_PLUGIN,
    ENV_IR_PLUGIN_FOR,
    ENV_MASQUERADE_DIR,
    ENV_MODE,
    ENV_ROOT,
    ENV_STORE,
    ENV_TRAIN_PHASE,
    WRAPPER_MODES,
)

# A launcher's options (AutoPass.cmake's), those whose values are paths first
PATH_OPTIONS = ("--autopass-store=", "--autopass-root=", "--autopass-db=",
                "--autopass-ir-plugin=", "--autopass-ir-plugin-for=")
LAUNCHER_OPTIONS = PATH_OPTIONS + ("--autopass-mode=", "--autopass-policy=")
COMPILER_BASES = ("cc", "gcc", "c++", "g++", "clang", "clang++")


class WrapperError(AutopassError):
    """A misconfiguration the user must fix; printed as one line, build fails."""


def is_cxx_name(name: str) -> bool:
    base = os.path.basename(name)
    return "++" in base or base.endswith("cxx") or base.startswith("autopass-c++")


def _self_paths(argv0: str, env: dict[str, str], cwd: str) -> frozenset[str]:
    """Real paths that are autopass itself (files, and the masquerade folder of
    `autopass record`), never to be taken for the real compiler."""
    paths = {os.path.realpath(os.path.join(cwd, argv0))}
    located = toolchain.which(argv0, env.get("PATH", "")) if os.sep not in argv0 else None
    if located:
        paths.add(os.path.realpath(located))
    masquerade = env.get(ENV_MASQUERADE_DIR)
    if masquerade:
        paths.update((os.path.abspath(masquerade), os.path.realpath(masquerade)))
    return frozenset(paths)


WRAPPER_NAMES = ("autopass-cc", "autopass-c++")
# the native launcher's file, which those names link to (capture/native_builds.py names
# it after its source's hash): a link resolved to it is autopass, whoever serves the call
LAUNCHER_STEM = "autopass-launcher-"


def _is_autopass(path: str, self_paths: frozenset[str]) -> bool:
    """`path` is one of our own wrappers: what CMake finds for `clang-19` when it
    configures under `autopass record` (the masquerade link first on PATH), and still
    has cached when the user later runs `ninja` on their own (no masquerade then: the
    link's target is known by its name)."""
    real = os.path.realpath(path)
    return real in self_paths or os.path.dirname(real) in self_paths \
        or os.path.dirname(os.path.abspath(path)) in self_paths \
        or os.path.basename(real) in WRAPPER_NAMES \
        or os.path.basename(real).startswith(LAUNCHER_STEM)


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
    """Everything resolved from argv and the environment before anything runs; `host`
    runs what the call decides (host.py)."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: str, host: Host):
        self.env = env
        self.cwd = cwd
        self.host = host
        self.name = os.path.basename(argv[0])
        rest = argv[1:]
        options = {}
        while rest and rest[0].startswith(LAUNCHER_OPTIONS):
            key, value = rest.pop(0)[2:].split("=", 1)
            options[key] = value
        self_paths = _self_paths(argv[0], env, cwd)
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
        # as given; "" for the default (apply mode parses it: core/apply_terms.py)
        self.policy = env.get(ENV_APPLY_POLICY) or options.get("autopass-policy") or ""
        self.train_phase = env.get(ENV_TRAIN_PHASE, "")
        if "autopass-ir-plugin" in options and not env.get(ENV_IR_PLUGIN):
            # AutoPass.cmake's record mode: the one-pass plugin `autopass record` would
            # name in the environment (one_pass.py)
            self.env = {**env, ENV_IR_PLUGIN: options["autopass-ir-plugin"],
                        ENV_IR_PLUGIN_FOR: options.get("autopass-ir-plugin-for", "")}
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
        """Become the real compiler with the original arguments (never returns;
        callers write `return plan.exec_compiler()` so the flow reads so)."""
        return self.host.exec(self.compiler_path, [self.compiler_argv0] + self.args,
                              self.child_env())

    def spool(self) -> Spool:
        assert self.store_dir is not None   # main() passes through when there is no store
        return Spool(self.store_dir)

    def log(self, line: str) -> None:
        self.spool().log(line)

    def colour(self) -> list[str]:
        """clang writes into a pipe when its output is held back, so it would drop the
        colours a terminal gets from it directly; ask for them where the build's stderr
        is a terminal and the build did not say."""
        if any(a.startswith(("-fcolor-diagnostics", "-fno-color-diagnostics",
                             "-fdiagnostics-color", "-fno-diagnostics-color"))
               for a in self.args):
            return []
        return ["-fcolor-diagnostics"] if self.host.stderr_is_terminal else []

    def call(self):
        """The record side's view of this call (recorder.Call)."""
        from autopass_build.capture.record.recorder import Call
        return Call(compiler_path=self.compiler_path, compiler_argv0=self.compiler_argv0,
                    args=self.args, cwd=self.cwd, env=self.child_env(), root=self.root,
                    host=self.host)

    def record_skip(self, skip: Skip) -> None:
        try:
            from autopass_build.capture.record.recorder import record_skip
            spool = self.spool()
            spool.prepare()
            record_skip(spool, self.call(), skip)
        except Exception as error:
            self.log(f"recording a skipped command failed: {error!r}")


def clang_or_the_named_gcc(plan: Plan, inv: Invocation) -> proc.Finished | None:
    """A compile the build addressed to gcc: clang first, its output held back; when clang
    refuses it and the named gcc builds it, the skip is recorded and None returned."""
    argv = [plan.compiler_argv0] + plan.colour() + plan.args
    done, out, err = plan.host.buffered(plan.compiler_path, argv, plan.child_env())
    gcc = plan.named_compiler() if done.status > 0 else None
    if gcc is not None:
        by_gcc = plan.host.inherit(gcc, [gcc] + plan.args, plan.child_env())
        if by_gcc.status == 0:
            if plan.mode == "record":
                plan.record_skip(Skip(CLANG_REJECTS, _first_error(err)[:300],
                                      tuple(s.path for s in inv.sources)))
            return None
        return by_gcc
    plan.host.write(out, err)
    return done


def _first_error(stderr: bytes) -> str:
    """clang's first "error:" line (its output starts with "In file included from")."""
    lines = stderr.decode("utf-8", "replace").strip().splitlines() or ["?"]
    return next((line for line in lines if "error:" in line), lines[0])
