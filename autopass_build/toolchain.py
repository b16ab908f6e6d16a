"""Finding clang, opt and llvm-profdata of one LLVM version, and who they are.

Search order for every tool: an explicit path (config or `AUTOPASS_<TOOL>` in the
environment), then the versioned Debian name on PATH (`clang-19`), then the LLVM
install folder (`/usr/lib/llvm-19/bin`), then the plain name on PATH if its version
matches.  Paths listed in `exclude` (autopass's own wrappers) are never returned, which
is the first half of the recursion guard.  Lookup is stat calls only; only `identify`
runs a process.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

DEFAULT_LLVM_VERSION = 19
INSTALL_HINT = ("install it with: sudo apt-get install clang-{v} llvm-{v}   "
                "(Debian/Ubuntu; or set AUTOPASS_CC / AUTOPASS_CXX / AUTOPASS_OPT to its path)")

# tool -> (environment override, binary base name)
TOOLS = {
    "clang": ("AUTOPASS_CC", "clang"),
    "clang++": ("AUTOPASS_CXX", "clang++"),
    "opt": ("AUTOPASS_OPT", "opt"),
    "llvm-profdata": ("AUTOPASS_PROFDATA", "llvm-profdata"),
    "llvm-ar": ("AUTOPASS_AR", "llvm-ar"),
}


def is_executable_file(path: str) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK)


def which(name: str, path_env: str | None = None, exclude: frozenset[str] = frozenset()
          ) -> str | None:
    """Like shutil.which, without importing shutil, skipping `exclude`d real paths."""
    if os.sep in name:
        return name if is_executable_file(name) else None
    for directory in (path_env if path_env is not None else os.environ.get("PATH", "")
                      ).split(os.pathsep):
        candidate = os.path.join(directory or ".", name)
        if is_executable_file(candidate) and os.path.realpath(candidate) not in exclude \
                and os.path.abspath(directory or ".") not in exclude:
            return candidate
    return None


def find_tool(tool: str, version: int = DEFAULT_LLVM_VERSION,
              env: dict[str, str] | None = None, explicit: str | None = None,
              exclude: frozenset[str] = frozenset()) -> str | None:
    env = os.environ if env is None else env
    env_var, base = TOOLS[tool]
    chosen = explicit or env.get(env_var)
    if chosen:
        found = which(chosen, env.get("PATH", ""))
        return os.path.abspath(found) if found and os.sep in found else found
    path_env = env.get("PATH", "")
    for candidate in (which(f"{base}-{version}", path_env, exclude),
                      _in_llvm_dir(base, version, exclude),
                      which(base, path_env, exclude)):
        if candidate:
            return candidate
    return None


def _in_llvm_dir(base: str, version: int, exclude: frozenset[str]) -> str | None:
    candidate = f"/usr/lib/llvm-{version}/bin/{base}"
    if is_executable_file(candidate) and os.path.realpath(candidate) not in exclude:
        return candidate
    return None


def stamp_of(path: str) -> str:
    """Changes when the binary is replaced: the cache key of its identity."""
    real = os.path.realpath(path)
    st = os.stat(real)
    return f"{real}:{st.st_size}:{st.st_mtime_ns}"


@dataclass(frozen=True)
class Identity:
    path: str
    version: str        # "19.1.7"
    major: int
    target: str         # "x86_64-pc-linux-gnu"
    vendor_line: str    # first line of --version

    def short(self) -> str:
        return f"clang {self.version} ({self.target})"


VERSION_RE = re.compile(r"(?:clang|LLVM) version (\d+)\.(\d+)\.(\d+)")


def parse_version_output(path: str, text: str) -> Identity | None:
    match = VERSION_RE.search(text)
    if not match:
        return None
    target = ""
    for line in text.splitlines():
        if line.startswith("Target:"):
            target = line.split(":", 1)[1].strip()
        elif "Default target:" in line:
            target = line.split(":", 1)[1].strip()
    version = ".".join(match.groups())
    return Identity(path, version, int(match.group(1)), target,
                    text.splitlines()[0].strip() if text else "")


def identify(path: str, timeout: float = 30.0) -> Identity | None:
    """Run `TOOL --version` (clang, opt and llvm-profdata all answer it)."""
    import subprocess  # only here: the wrapper's fast path never needs it

    try:
        result = subprocess.run([path, "--version"], capture_output=True, timeout=timeout,
                                stdin=subprocess.DEVNULL,
                                env={**os.environ, "LC_ALL": "C"})
    except (OSError, subprocess.TimeoutExpired):
        return None
    return parse_version_output(path, result.stdout.decode("utf-8", "replace"))


@dataclass(frozen=True)
class ToolReport:
    tool: str
    path: str | None
    identity: Identity | None


def survey(version: int = DEFAULT_LLVM_VERSION, env: dict[str, str] | None = None
           ) -> list[ToolReport]:
    """Every tool autopass uses: where it is and which version it says it is."""
    reports = []
    for tool in TOOLS:
        path = find_tool(tool, version, env)
        reports.append(ToolReport(tool, path, identify(path) if path else None))
    return reports
