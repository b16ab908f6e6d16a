"""`autopass init` and `doctor`: the starter configuration from a recording, and the toolchain found."""

from __future__ import annotations

import argparse
import os
import subprocess
import tempfile

from autopass_build import config as configuration
from autopass_build.cli.common import (
    CliError,
    add_store_option,
    store_dir,
)
from autopass_build.core import proc, toolchain
from autopass_build.core.clean_command import clean_command, make_dry_run
from autopass_build.core.files import copy_atomic, disk_full, write_atomic
from autopass_build.store.index import Store
from autopass_build.store.targets import executables_text, resolve


def add_parsers(sub) -> None:
    p = sub.add_parser("init", help="write a commented autopass.toml to start from",
                       description="Write autopass.toml in the folder that holds the store, every key "
                       "commented: [build].command (the command `autopass record --` ran), "
                       "[build].clean guessed from it (make, ninja, cmake --build, meson "
                       "compile, scons, waf; `verify` builds from scratch with it), and the "
                       "recorded executables to choose [run].target from, the likely "
                       "benchmark first.  Then set [run].command to your benchmark and run "
                       "`autopass profile`.")
    add_store_option(p)
    p.add_argument("--build", default=None,
                   help="the build command to write in (default: the one `autopass record "
                        "--` ran here, else 'make -j2')")
    p.add_argument("--force", action="store_true",
                   help="replace an existing autopass.toml (the old one is kept as "
                        "autopass.toml.bak)")
    p.set_defaults(func=cmd_init)

    p = sub.add_parser("doctor", help="find clang/opt/llvm-profdata and say how to fix gaps")
    p.add_argument("--llvm-version", type=int, default=toolchain.DEFAULT_LLVM_VERSION,
                   metavar="N", help="LLVM major version to look for (default: %(default)s)")
    p.set_defaults(func=cmd_doctor)


def cmd_init(args: argparse.Namespace) -> int:
    path = os.path.abspath(configuration.CONFIG_NAME)
    if os.path.exists(path) and not args.force:
        raise CliError(f"{path} exists; edit it, or pass --force to overwrite it")
    target = ""
    build: str | list[str] = args.build or "make -j2"
    folder = store_dir(args)
    executables = []
    guessed = args.build is None
    if os.path.isdir(folder):
        store = Store.open_existing(folder)
        executables = [t for t in resolve(store, os.getcwd()) if t.kind == "executable"]
        target = executables[0].output_rel if len(executables) == 1 else ""
        recorded = store.recorded_build()
        if args.build is None and recorded and _same_folder(recorded.cwd, os.getcwd()):
            build, guessed = _as_configured(recorded.argv), False
        elif args.build is None and (configured := _cmake_build_folder(store)):
            # recorded through AutoPass.cmake's launchers: no `record --` command, but
            # the compiles ran in a CMake build folder, which builds itself
            build, guessed = f"cmake --build {configured}", False
    clean = clean_command(build)
    lacking = _clean_target_lacking(clean)
    clean = None if lacking else clean
    kept = _keep_a_copy(path) if args.force and os.path.exists(path) else ""
    try:
        write_atomic(path, configuration.starter_text(build, target, clean).encode())
    except OSError as error:
        raise CliError(f"cannot write {path}: {error.strerror}; run `autopass init` in a "
                       "folder you can write") from None
    if kept:
        print(f"kept the {configuration.CONFIG_NAME} that was here as {kept}")
    said = build if isinstance(build, str) else " ".join(build)
    if guessed:    # gawk: its recorded build failed (doc/ needs files Debian removed)
        said += (", a guess: no build here succeeded under `autopass record`; put the "
                 "command that builds the program in [build].command")
    print(f"wrote {path} (build: {said}; clean: {clean or 'not known'}): set [run].command "
          "to your benchmark, then `autopass profile` (does it run, where does the time go?) "
          "and `autopass tune`")
    if clean is None:
        print(lacking + "set [build].clean in autopass.toml to the command that brings the "
              "tree back to clean: `autopass verify` builds from scratch")
    if len(executables) > 1:
        print("several executables were recorded; set [run].target to the one the "
              "benchmark runs: " + executables_text(executables))
    return 0


def _cmake_build_folder(store: Store) -> str:
    """The CMake build folder (one holding CMakeCache.txt) the recorded compiles ran in,
    relative to here, or "" when they ran in none below here."""
    here = os.path.realpath(os.getcwd())
    for unit in store.units()[:20]:
        folder = os.path.realpath(unit.cwd)
        while folder == here or folder.startswith(here + os.sep):
            if os.path.isfile(os.path.join(folder, "CMakeCache.txt")):
                return os.path.relpath(folder, here)
            if folder == here:
                break
            folder = os.path.dirname(folder)
    return ""


def _clean_target_lacking(clean: str | None) -> str:
    """The start of a sentence saying that the guessed `make ... clean` would fail, when
    the makefile the build reads has no `clean` target (asked with `make -n`, which runs
    nothing), else ""."""
    dry = make_dry_run(clean) if clean else None
    if dry is None:
        return ""
    folder, argv = dry
    try:
        done = proc.run_captured(argv, os.path.join(os.getcwd(), folder),
                                 {**os.environ, "LC_ALL": "C"}, timeout=30)
    except OSError:
        return ""
    if done.status == 0 or b"No rule to make target 'clean'" not in done.stderr:
        return ""
    return f"`{clean}` would fail: the makefile has no `clean` target; "


def _keep_a_copy(path: str) -> str:
    """`init --force` replaces the user's config: the old one is kept beside it, under
    the first free name of autopass.toml.bak, .bak.2, ... (nothing the user wrote is
    lost, however often they re-run init)."""
    for n in range(1, 1000):
        copy = f"{path}.bak" + (f".{n}" if n > 1 else "")
        if not os.path.lexists(copy):
            try:    # whole or not at all: a full disk leaves no empty copy behind
                copy_atomic(path, copy, metadata=True)
            except OSError as error:
                fix = "free space, then run `autopass init --force` again" \
                    if disk_full(os.path.dirname(path) or ".") else \
                    "move it away yourself, then run `autopass init`"
                raise CliError(f"cannot keep a copy of {path} as {copy}: {error.strerror}; "
                               f"{fix}") from None
            return os.path.basename(copy)
    raise CliError(f"{path}.bak to .bak.999 all exist; remove some, then run `autopass init "
                   "--force`")


def _same_folder(a: str, b: str) -> bool:
    return os.path.realpath(a) == os.path.realpath(b)


def _as_configured(argv: list[str]) -> str | list[str]:
    """A recorded argument vector as [build].command says it: `sh -c SCRIPT` as the
    script (a string runs with sh -c), anything else as the vector itself."""
    if len(argv) == 3 and os.path.basename(argv[0]) in ("sh", "bash", "dash") \
            and argv[1] == "-c":
        return argv[2]
    return argv


# Tools a stage needs, not autopass itself: their absence is a note, not a problem.


OPTIONAL_TOOLS = {"ld.lld": ("lld-{v}", "the LTO stages (lto, thinlto) are"),
                  "llvm-bolt": ("bolt-{v}", "the BOLT stage is"),
                  "merge-fdata": ("bolt-{v}", "the BOLT stage is")}


def _doctor_bolt() -> None:
    """BOLT also needs its instrumentation runtime, which the tool list cannot show."""
    from autopass_build.core import bolt_commands as bolt

    if bolt.tool() is None or bolt.tool("merge-fdata") is None:
        return   # the tool list's note said so
    why = bolt.missing()
    if why:
        print(f"note: the BOLT stage is skipped: {why}")
    else:
        print(f"  {'bolt runtime':<14} {bolt.runtime_of(bolt.tool() or '')}")


def _doctor_openmp(version: int) -> None:
    """Under autopass, clang compiles a build that says gcc: one that uses OpenMP
    (`-fopenmp`) needs clang's own runtime, or its configure check finds no OpenMP and
    the program builds single-threaded."""
    clang = toolchain.find_tool("clang", version)
    if clang is None:
        return   # the tool list said so
    try:
        found = subprocess.run([clang, "-fopenmp", "-E", "-x", "c", "-o", os.devnull, "-"],
                               input=b"#include <omp.h>\n", capture_output=True,
                               timeout=60).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        found = False
    if not found:
        print("note: clang has no OpenMP (omp.h): a build using -fopenmp finds none under "
              "autopass and builds without it (sudo apt-get install "
              f"libomp-{version}-dev)")


def _doctor_pass_plugin(version: int) -> None:
    """Record runs each unit's front end once with autopass's pass plugin, which also
    applies the decisions carried in the IR; it is built here against LLVM's headers:
    without them record compiles every unit twice and those decisions are left out."""
    from autopass_build.capture.build_env import wrapper_dir
    from autopass_build.capture.native_builds import pass_plugin

    built = pass_plugin(wrapper_dir(tempfile.gettempdir()))
    if built:
        print(f"  {'pass plugin':<14} {built[0]}")
    else:
        print("note: record compiles every unit twice and per-loop decisions cannot be "
              "applied (autopass's pass plugin needs llvm-config and LLVM's headers: "
              f"sudo apt-get install llvm-{version}-dev)")


def cmd_doctor(args: argparse.Namespace) -> int:
    version = args.llvm_version
    reports = toolchain.survey(version)
    problems = []
    majors = set()
    for report in reports:
        if report.path is None:
            print(f"  {report.tool:<14} MISSING")
            problems.append(report.tool)
            continue
        ident = report.identity
        if ident is None:
            print(f"  {report.tool:<14} {report.path}  (did not report a version)")
            problems.append(report.tool)
            continue
        majors.add(ident.major)
        target = f"  target {ident.target}" if ident.target else ""
        print(f"  {report.tool:<14} {report.path}  version {ident.version}{target}")
    required_missing = [p for p in problems if p in ("clang", "clang++", "opt")]
    for tool, (package, needed_by) in OPTIONAL_TOOLS.items():
        if tool in problems:
            problems.remove(tool)
            print(f"note: {tool} missing: {needed_by} skipped without it "
                  f"(sudo apt-get install {package.format(v=version)})")
    _doctor_bolt()
    _doctor_openmp(version)
    _doctor_pass_plugin(version)
    if len(majors) > 1:
        print(f"error: the tools come from different LLVM versions {sorted(majors)}; "
              "set AUTOPASS_CC, AUTOPASS_CXX, AUTOPASS_OPT, AUTOPASS_PROFDATA to one version")
        return 1
    if problems:
        print(f"{'error' if required_missing else 'warning'}: missing {', '.join(problems)}; "
              + toolchain.INSTALL_HINT.format(v=version))
        return 1 if required_missing else 0
    print(f"ok: LLVM {majors.pop()} toolchain found")
    return 0
