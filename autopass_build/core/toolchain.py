"""Finding clang, opt and llvm-profdata of one LLVM version, and who they are.

Search order for every tool: an explicit path (config or `AUTOPASS_<TOOL>` in the
environment), then the versioned Debian name on PATH (`clang-19`), then the LLVM
install folder (`/usr/lib/llvm-19/bin`), then the plain name on PATH if its version
matches.  Paths listed in `exclude` (autopass's own wrappers) are never returned, which
is the first half of the recursion guard.  Lookup is stat calls only; only `identify`
runs a process.  The wrapper imports this module for every compile, so it avoids `re`,
`dataclasses` and `subprocess` at import time (tens of milliseconds together).
"""

from __future__ import annotations

import os

from autopass_build.core.names import ENV_CC, ENV_CXX

DEFAULT_LLVM_VERSION = 19
INSTALL_HINT = ("install it with: sudo apt-get install clang-{v} llvm-{v}   "
                "(Debian/Ubuntu; or set AUTOPASS_CC / AUTOPASS_CXX / AUTOPASS_OPT to its path)")

# tool -> (environment override, binary base name)
TOOLS = {
    "clang": (ENV_CC, "clang"),
    "clang++": (ENV_CXX, "clang++"),
    "opt": ("AUTOPASS_OPT", "opt"),
    "llvm-profdata": ("AUTOPASS_PROFDATA", "llvm-profdata"),
    "llvm-ar": ("AUTOPASS_AR", "llvm-ar"),
    "llvm-objdump": ("AUTOPASS_OBJDUMP", "llvm-objdump"),
    "llvm-mca": ("AUTOPASS_MCA", "llvm-mca"),
    "ld.lld": ("AUTOPASS_LLD", "ld.lld"),
    "llvm-ranlib": ("AUTOPASS_RANLIB", "llvm-ranlib"),
    "llvm-cxxfilt": ("AUTOPASS_CXXFILT", "llvm-cxxfilt"),   # C++ names for people to read
    "llvm-symbolizer": ("AUTOPASS_SYMBOLIZER", "llvm-symbolizer"),  # inlined code: inlined.py
    # $AUTOPASS_BOLT names llvm-bolt, and merge-fdata is the one beside it: core/bolt_commands.py
    # reads it before searching, so neither has a variable here.
    "llvm-bolt": ("", "llvm-bolt"),
    "merge-fdata": ("", "merge-fdata"),
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
    environ = os.environ if env is None else env
    env_var, base = TOOLS[tool]
    chosen = explicit or (environ.get(env_var) if env_var else None)
    if chosen:
        found = which(chosen, environ.get("PATH", ""))
        return os.path.abspath(found) if found and os.sep in found else found
    path_env = environ.get("PATH", "")
    for candidate in (which(f"{base}-{version}", path_env, exclude),
                      _in_llvm_dir(base, version, exclude),
                      which(base, path_env, exclude)):
        if candidate:
            return candidate
    return None


def not_found(tool: str, env: dict[str, str] | None = None) -> str:
    """Why `find_tool(tool)` found nothing, with the fix: the variable that names a
    program that is not there (`AUTOPASS_CC=/opt/clang`), else how to install it."""
    environ = os.environ if env is None else env
    env_var, base = TOOLS[tool]
    named = environ.get(env_var) if env_var else None
    if named:
        return (f"{env_var}={named!r} names no program (a path, or a name on PATH): point it "
                f"at {base}-{DEFAULT_LLVM_VERSION}, or unset it")
    return f"{tool} not found: " + INSTALL_HINT.format(v=DEFAULT_LLVM_VERSION)


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


class Identity:
    """Who a tool says it is.  A plain class: the wrapper imports this module."""
    __slots__ = ("path", "version", "major", "target", "vendor_line")

    def __init__(self, path: str, version: str, major: int, target: str, vendor_line: str):
        self.path = path
        self.version = version          # "19.1.7"
        self.major = major
        self.target = target            # "x86_64-pc-linux-gnu"
        self.vendor_line = vendor_line  # first line of --version

    def short(self) -> str:
        return f"clang {self.version} ({self.target})"


def _version_after(text: str, marker: str) -> str | None:
    """"19.1.7" from "... clang version 19.1.7 (...)" (no `re`: see the module doc)."""
    at = text.find(marker)
    if at < 0:
        return None
    word = text[at + len(marker):].split(None, 1)[0] if text[at + len(marker):].strip() else ""
    parts = [_leading_digits(p) for p in word.split(".")[:3]]
    if len(parts) < 3 or not all(parts):
        return None
    return ".".join(parts)


def _leading_digits(text: str) -> str:
    end = 0
    while end < len(text) and text[end].isdigit():
        end += 1
    return text[:end]


def parse_version_output(path: str, text: str) -> Identity | None:
    version = (_version_after(text, "clang version ") or _version_after(text, "LLVM version ")
               or _version_after(text, "LLD "))
    if version is None:
        return None
    target = ""
    for line in text.splitlines():
        if line.startswith("Target:") or "Default target:" in line:
            target = line.split(":", 1)[1].strip()
    return Identity(path, version, int(version.split(".")[0]), target,
                    text.splitlines()[0].strip())


def version_text(path: str, env: dict[str, str] | None = None, timeout: float = 60.0) -> str:
    """What `TOOL --version` prints (clang, opt and llvm-profdata all answer it); "" if
    it cannot run."""
    import subprocess  # only here: the wrapper's fast path never needs it

    try:
        result = subprocess.run([path, "--version"], capture_output=True, timeout=timeout,
                                stdin=subprocess.DEVNULL,
                                env={**(os.environ if env is None else env), "LC_ALL": "C"})
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return result.stdout.decode("utf-8", "replace")


def identify(path: str, timeout: float = 30.0) -> Identity | None:
    return parse_version_output(path, version_text(path, timeout=timeout))


class ToolReport:
    __slots__ = ("tool", "path", "identity")

    def __init__(self, tool: str, path: str | None, identity: Identity | None):
        self.tool, self.path, self.identity = tool, path, identity


def survey(version: int = DEFAULT_LLVM_VERSION, env: dict[str, str] | None = None
           ) -> list[ToolReport]:
    """Every tool autopass uses: where it is and which version it says it is."""
    reports = []
    for tool in TOOLS:
        path = find_tool(tool, version, env)
        reports.append(ToolReport(tool, path, identify(path) if path else None))
    return reports
