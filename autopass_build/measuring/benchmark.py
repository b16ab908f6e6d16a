"""Running the benchmark once: the user's command with `{exe}` replaced, in its own
session (so the whole process group can be killed), pinned to one CPU unless it runs in
parallel (see `cpu_pinning`), output to files (no pipe deadlocks), with a timeout.

Metrics: `wall`; `cpu` (user+sys of the whole waited-for process tree, from wait4);
`user` (its user time alone: kernel work -- page faults, I/O -- is the same code in every
candidate and the part of a run that varies most on a VM; for runs of 0.5 s or more, see
USER_METRIC_MIN_S); `instructions` (callgrind: deterministic, ~50x slower; valgrind 3.19
cannot run AVX-512 code); `cycles` (`perf stat`, only where the host supports it).
"""

from __future__ import annotations

import os
import resource
import select
import shutil
import tempfile
import time
from dataclasses import dataclass, field

from autopass_build.config import CheckConfig, Config, MeasureConfig, RunConfig
from autopass_build.core import proc
from autopass_build.core.cpu import CPUINFO, this_cpu
from autopass_build.core.errors import AutopassError
from autopass_build.core.files import hash_json
from autopass_build.core.outcome import Outcome
from autopass_build.measuring.binaries import SLOTS, debugless_copy, stable_name
from autopass_build.measuring.cpu_pinning import (
    spawned_on,
)
from autopass_build.measuring.output_check import (
    file_signatures,
    read_output,
    written_files,
)
from autopass_build.measuring.sampling import CALLGRIND

# Metrics that give the same value for the same binary and input every time.
DETERMINISTIC_METRICS = frozenset({"instructions"})
# Metrics read from the clock (wall) or the kernel's accounting (wait4), with no tool
# around the benchmark; in this order in `profile`'s spread line (steadiness.py).
TIMED_METRICS = ("wall", "cpu", "user")
# Above this share of a run's CPU time in the kernel, a timed metric other than `user`
# measures mostly what no compiler flag changes (a markdown parser building an 80 MB
# document's tree: 26 % in the kernel, its run-to-run spread 30 % against user time's 2 %).
KERNEL_SHARE_NOTE = 0.15
# The kernel measures a process's CPU time exactly but splits it into user and system
# time by timer ticks (tick accounting, 4 ms at HZ=250), so `user` carries a sampling
# error of a few ticks: on Lua's 0.07 s benchmark its run-to-run spread was 4.6 % against
# cpu's 1.0 %; on LAME's 0.75 s, 0.5 % against 1.0 %.  Below this, `user` is no help.
USER_METRIC_MIN_S = 0.5


class MeasureError(AutopassError):
    pass


@dataclass
class RunResult:
    outcome: Outcome
    value: float | None      # the metric; None unless the run finished
    wall: float
    status: int              # exit code, negative for a signal
    stdout: bytes
    stderr: bytes
    detail: str = ""
    files: tuple[tuple[str, str], ...] = ()   # [check].files: (path, digest) after the run
    cpu_time: float = 0.0    # user+sys of the waited-for process tree
    kernel_time: float = 0.0  # its sys part

    @property
    def user_time(self) -> float:
        return self.cpu_time - self.kernel_time
    stdout_cut: str = ""     # "" when `stdout` is all of it, else the whole one's digest


@dataclass
class Benchmark:
    run: RunConfig
    check: CheckConfig
    measure: MeasureConfig
    project_dir: str
    extra_env: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_config(cls, config: Config) -> "Benchmark":
        if not config.run.command:
            raise MeasureError("no benchmark: add a [run] command to autopass.toml, e.g. "
                               'command = "{exe} input.txt" (`autopass init` writes a starter)')
        cwd = config.resolve(config.run.cwd)
        for path in config.run.inputs:      # as the benchmark names them: from its folder
            if not os.path.exists(os.path.join(cwd, path)):
                raise MeasureError(f"[run].inputs: {path} does not exist in {cwd} (the "
                                   "benchmark's folder, [run].cwd, which inputs are "
                                   "relative to)")
        if not os.path.isdir(cwd):
            raise MeasureError(f"[run].cwd: {config.resolve(config.run.cwd)} is not a folder; "
                               "give the folder the benchmark runs in, relative to "
                               "autopass.toml")
        if config.run.stdin and not os.path.isfile(config.resolve(config.run.stdin)):
            raise MeasureError(f"[run].stdin: {config.resolve(config.run.stdin)} is not a "
                               "file; give the file the benchmark reads on standard input, "
                               "relative to autopass.toml")
        return cls(config.run, config.check, config.measure, config.project_dir)

    def argv(self, exe: str) -> list[str]:
        return [token.replace("{exe}", exe) for token in self.run.command]

    def workload(self) -> str:
        """What a run does, as a key: the command, the training command, stdin, folder
        and environment.  A profile trained or sampled under another workload is stale
        (the user changed [run]); the key says so without running anything."""
        run = self.run
        return hash_json([list(run.command), list(run.train), run.stdin, run.cwd,
                          sorted(dict(run.env).items())])[:16]

    def env(self, candidate_env: dict[str, str]) -> dict[str, str]:
        """The benchmark's environment: ours, then [run].env, then the candidate's own
        (where its rebuilt shared libraries are).  Its LD_LIBRARY_PATH goes first, before
        the user's, not in place of it: a program that finds a library outside the
        tree only through the user's (a vendor's, an install prefix) still finds it."""
        env = proc.clean_env(dict(os.environ))
        env.update(dict(self.run.env))
        for name, value in candidate_env.items():
            if name == "LD_LIBRARY_PATH" and env.get(name):
                value = os.pathsep.join((value, env[name]))
            env[name] = value
        return env

    @property
    def cwd(self) -> str:
        return os.path.normpath(os.path.join(self.project_dir, self.run.cwd))

    @property
    def stdin(self) -> str | None:
        """The file every run of the benchmark reads as standard input; None: nothing
        (/dev/null), so a benchmark that reads it can never wait on a terminal."""
        return os.path.join(self.project_dir, self.run.stdin) if self.run.stdin else None


# -- one run ------------------------------------------------------------------------------
def metric_prefix(metric: str, out_file: str) -> list[str]:
    if metric == "instructions":
        if shutil.which("valgrind") is None:
            raise MeasureError("metric 'instructions' needs valgrind: apt-get install valgrind")
        # Every process the benchmark starts is counted (a wrapper script, `sh -c`, ...).
        return [*CALLGRIND, "--trace-children=yes",
                f"--callgrind-out-file={out_file}.%p", "--"]
    if metric == "cycles":
        if not cycles_supported():
            raise MeasureError("metric 'cycles' is not supported on this host (perf stat "
                               "cannot count cycles here); use wall, cpu, user or instructions")
        return ["perf", "stat", "-x,", "-e", "cycles", "-o", out_file, "--"]
    return []


_cycles_supported: bool | None = None


def cycles_supported() -> bool:
    global _cycles_supported
    if _cycles_supported is None:
        perf = shutil.which("perf")
        if perf is None:
            _cycles_supported = False
        else:
            done = proc.run_captured([perf, "stat", "-x,", "-e", "cycles", "true"], ".",
                                     timeout=30)
            text = done.stderr.decode("utf-8", "replace")
            _cycles_supported = done.status == 0 and "not supported" not in text \
                and "<not counted>" not in text
    return _cycles_supported


def native_unmeasurable(metric: str, cpuinfo: str = CPUINFO) -> str:
    """Why a -march=native build cannot be measured by `metric` on this CPU ("" when it
    can): callgrind (valgrind 3.19) stops at the first AVX-512 instruction, and clang
    emits them for a CPU that has them (a znver5's vectorized loops are zmm code)."""
    if metric != "instructions" or "avx512f" not in this_cpu(cpuinfo).isa:
        return ""
    return ("metric instructions runs the benchmark under valgrind, which cannot execute "
            "the AVX-512 code -march=native makes on this CPU; use --metric cpu or wall")


def read_metric(metric: str, out_file: str) -> float:
    if metric == "instructions":
        return _callgrind_total(out_file)
    with open(out_file, encoding="utf-8", errors="replace") as handle:
        text = handle.read()
    for line in text.splitlines():  # perf stat -x, : value,unit,event,...
        fields_ = line.split(",")
        if len(fields_) > 2 and fields_[2].startswith("cycles"):
            return float(fields_[0])
    raise MeasureError("perf stat reported no cycle count")


def _callgrind_total(prefix: str) -> float:
    """Instructions summed over the callgrind files of every traced process."""
    folder, stem = os.path.split(prefix)
    total, found = 0.0, False
    for name in os.listdir(folder):
        if not name.startswith(stem + "."):
            continue
        with open(os.path.join(folder, name), encoding="utf-8", errors="replace") as handle:
            for line in handle:
                if line.startswith(("summary:", "totals:")):
                    total += float(line.split()[1])
                    found = True
                    break
    if not found:
        raise MeasureError("callgrind wrote no instruction total")
    return total


WATCH_INTERVAL_MS = 10       # how often a watched run's runnable threads are counted


def _wait(pid: int, timeout: float, watch: list[int] | None = None
          ) -> tuple[int, resource.struct_rusage, bool]:
    """Wait for `pid` with a timeout; (wait status, rusage, timed out).  `watch`: a list
    the number of its process tree's runnable threads is appended to, every
    WATCH_INTERVAL_MS while it runs."""
    fd = os.pidfd_open(pid)
    try:
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        if watch is None:
            exited = bool(poller.poll(max(1, int(timeout * 1000))))
        else:
            deadline = time.monotonic() + timeout
            exited = False
            while not exited and time.monotonic() < deadline:
                exited = bool(poller.poll(WATCH_INTERVAL_MS))
                if not exited:
                    watch.append(proc.runnable_threads(pid))
    finally:
        os.close(fd)
    if not exited:
        proc.kill_group(pid)
    _, status, usage = os.wait4(pid, 0)
    return status, usage, not exited


LOADER_FAILED = 127                                   # glibc's ld.so exit status
LOADER_ERROR = b"error while loading shared libraries"


def run_once(bench: Benchmark, exe: str, candidate_env: dict[str, str], timeout: float,
             metric: str | None = None, cpu: int | None = None,
             slot: str = SLOTS[0], watch: list[int] | None = None) -> RunResult:
    """One run of the benchmark on `exe`, measured by `metric`, on `cpu` if given;
    `slot`: which of the stable names it runs under (binaries.stable_name); `watch`:
    gets how many of its threads were runnable, counted as it runs (_wait)."""
    import subprocess

    metric = metric or bench.measure.metric
    with tempfile.TemporaryDirectory(prefix="autopass-run-") as scratch:
        out_path, err_path = os.path.join(scratch, "stdout"), os.path.join(scratch, "stderr")
        metric_file = os.path.join(scratch, "metric")
        if metric == "instructions":
            exe = debugless_copy(exe, scratch)
        argv = metric_prefix(metric, metric_file) + bench.argv(stable_name(exe, slot))
        outputs_before = file_signatures(bench)
        with open(out_path, "wb") as out, open(err_path, "wb") as err, \
                open(bench.stdin or os.devnull, "rb") as source:
            started = time.perf_counter()
            try:
                with spawned_on(cpu):
                    child, held = proc.start_held(lambda: subprocess.Popen(
                        argv, cwd=bench.cwd, env=bench.env(candidate_env), stdin=source,
                        stdout=out, stderr=err, start_new_session=True))
            except OSError as error:
                return RunResult(Outcome.RUN_CRASH, None, 0.0, -1, b"", b"",
                                 f"cannot start {argv[0]}: {error.strerror}")
            try:
                proc.replay(held)
                status, usage, timed_out = _wait(child.pid, timeout, watch)
                proc.kill_group(child.pid)  # children it left behind
            except BaseException:
                proc.kill_group(child.pid)
                child.wait()
                raise
            wall = time.perf_counter() - started
            child.returncode = os.waitstatus_to_exitcode(status)  # reaped by wait4
        stdout, cut = read_output(out_path, keep_all=bench.check.mode == "command")
        stderr, _ = read_output(err_path)
        code = child.returncode
        if timed_out:
            return RunResult(Outcome.RUN_TIMEOUT, None, wall, code, stdout, stderr,
                             f"killed after {timeout:.1f}s")
        if code < 0:
            return RunResult(Outcome.RUN_CRASH, None, wall, code, stdout, stderr,
                             f"killed by signal {-code}")
        if code == LOADER_FAILED and LOADER_ERROR in stderr:  # not the program's own 127
            said = stderr[stderr.index(LOADER_ERROR):].split(b"\n")[0]
            return RunResult(Outcome.RUN_CRASH, None, wall, code, stdout, stderr,
                             "the dynamic loader cannot start it ("
                             + said.decode("utf-8", "replace")[:200] + ")")
        cpu_time = usage.ru_utime + usage.ru_stime
        if metric == "wall":
            value = wall
        elif metric == "cpu":
            value = cpu_time
        elif metric == "user":
            value = usage.ru_utime
        else:
            value = read_metric(metric, metric_file)
        return RunResult(Outcome.OK, value, wall, code, stdout, stderr,
                         files=written_files(bench, outputs_before), cpu_time=cpu_time,
                         kernel_time=usage.ru_stime, stdout_cut=cut)
