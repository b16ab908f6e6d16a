"""`autopass apply --train`: the tuned decisions with profiles trained inside the build
(issue 46): real make builds with clang, llvm-profdata and BOLT, the user's command run
twice, the training run's failures and changed outputs falling back to the shipped
database."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from autopass_build.candidates.steady_counts import round_fdata, round_proftext, rounded
from autopass_build.core import bolt_commands as bolt
from autopass_build.core import flags_db, toolchain
from tests.support import AUTOPASS, env_with_autopass, run, shipped_database, write

MAIN = r"""
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
int work(int n);
int main(int argc, char **argv) {
    char mode = argc > 1 ? argv[1][0] : 'x';
    if (mode == 'c') {                               /* a training run that crashes */
        fputs("cannot go on: mode c\n", stderr);
        abort();
    }
    if (mode == 'e')                                 /* one whose output changes */
        puts(getenv("LLVM_PROFILE_FILE") ? "instrumented" : "plain");
    if (mode == 'w' && getenv("LLVM_PROFILE_FILE"))  /* a training run that takes long */
        sleep(120);
    /* the training run's counts move with its pid, as a program's move with hash seeds
       and timing (Lua's), by up to 8 %: over rounding boundaries, not its output */
    volatile int sink = work(240000 + getpid() % 20000);
    (void)sink;
    printf("%d\n", work(1000));
    return 0;
}
"""
WORK = r"""
int work(int n) {
    int sum = 0;
    for (int i = 0; i < n; i++)
        sum += (i % 7 == 0) ? i / 7 : (i % 3 ? 1 : -2);
    return sum;
}
"""
MAKEFILE = """CC ?= cc
prog: main.o work.o
\t$(CC) -o $@ main.o work.o
%.o: %.c
\t$(CC) -O2 -c $< -o $@
clean:
\trm -f prog *.o
"""
BOLT_HERE = bolt.missing() == ""
STAGES = ("pgo", "bolt") if BOLT_HERE else ("pgo",)


def project(root: Path, mode: str = "x", stages: tuple[str, ...] = STAGES) -> Path:
    write(root / "main.c", MAIN)
    write(root / "work.c", WORK)
    write(root / "Makefile", MAKEFILE)
    write(root / "autopass.toml", f'[build]\ncommand = "make"\n[run]\ncommand = ["{{exe}}", '
                                  f'"{mode}"]\n')
    shipped_database(root, "prog", ("main.c", "work.c"), stages)
    return root


def train(root: Path):
    return run([AUTOPASS, "apply", "--train", "--", "make"], root, env_with_autopass())


def instrumented(binary: Path) -> bool:
    return b"__llvm_profile_runtime" in binary.read_bytes()


def test_train_builds_with_fresh_profiles_and_two_clean_builds_are_identical(tmp_path):
    """F73: the profiles trained in the build, and one binary from two clean builds,
    though the training runs' counts differ (held to the profile trained before)."""
    root = project(tmp_path)
    done = train(root)
    said = done.stderr.decode()
    assert done.returncode == 0, said
    assert "PGO retrained" in said, said
    assert ("BOLT retrained" in said) == BOLT_HERE, said
    trained = flags_db.load(str(root / "autopass.trained.flags.json"))
    assert trained.profile is not None and trained.profile.path == "autopass.trained.profdata"
    profdata = toolchain.find_tool("llvm-profdata")
    assert profdata
    shown = subprocess.run([profdata, "show", "--all-functions", str(root / trained.profile.path)],
                           capture_output=True, text=True).stdout
    assert "work" in shown and "main" in shown, shown
    assert not instrumented(root / "prog"), "the final build kept the instrumentation"
    assert not list(root.glob("*.profraw")), "a raw profile was left in the tree"
    if BOLT_HERE:
        assert trained.target is not None and trained.target.bolt is not None
        assert bolt.code_fingerprint(str(root / "prog")) != trained.target.bolt_binary, \
            "BOLT did not rewrite the linked program"
    first = (root / "prog").read_bytes()
    assert subprocess.run([root / "prog", "x"], capture_output=True).returncode == 0
    subprocess.run(["make", "clean"], cwd=root, check=True, capture_output=True)
    assert train(root).returncode == 0
    assert (root / "prog").read_bytes() == first, "two clean --train builds differ"


@pytest.mark.skipif(shutil.which("ccache") is None, reason="needs ccache (scripts/setup.sh "
                    "--test)")
def test_train_builds_compile_only_what_changed_since_the_last(tmp_path):
    """F80: --train's builds go through ccache in autopass's own folder: a second
    --train of one source takes every unit of both builds from it (its profile is the
    last one), one after an edit all but the edited unit of the instrumented build and
    none of the final (a new profile), as after an edit of a header only the unit that
    includes it; the program is the one a build without the cache makes; no dependency
    file is left behind; a folder that cannot be written builds without it, said."""
    root = project(tmp_path, stages=("pgo",))
    write(root / "work.h", "#define STEP 7\n")
    work = '#include "work.h"\n' + WORK.replace("i % 7 == 0", "i % STEP == 0")
    write(root / "work.c", work)
    env = {**env_with_autopass(), "AUTOPASS_TRAIN_CACHE": str(tmp_path / "cache")}

    def train_once(cache: str = "") -> str:
        subprocess.run(["make", "clean"], cwd=root, check=True, capture_output=True)
        done = run([AUTOPASS, "apply", "--train", "--", "make"], root,
                   {**env, "AUTOPASS_TRAIN_CACHE": cache} if cache else env)
        assert done.returncode == 0, done.stderr
        return done.stderr.decode().strip().splitlines()[-1]

    said = train_once()
    assert "compiles from the cache: instrumented 0 of 2, final 0 of 2" in said, said
    first = (root / "prog").read_bytes()
    said = train_once()
    assert "compiles from the cache: instrumented 2 of 2, final 2 of 2" in said, said
    assert (root / "prog").read_bytes() == first
    write(root / "work.c", work.replace("i % 3", "i % 5"))
    said = train_once()
    assert "compiles from the cache: instrumented 1 of 2, final 0 of 2" in said, said
    write(root / "work.h", "#define STEP 9\n")
    said = train_once()
    assert "compiles from the cache: instrumented 1 of 2, final 0 of 2" in said, said
    assert not list(root.glob("*.d")), "a dependency file was left in the tree"
    edited = (root / "prog").read_bytes()
    said = train_once(cache="off")
    assert "from the cache" not in said, said
    assert (root / "prog").read_bytes() == edited, "the cache changed the program"
    write(tmp_path / "a-file", "")
    said = train_once(cache=str(tmp_path / "a-file" / "cache"))
    assert f"no cache: cannot write {tmp_path / 'a-file' / 'cache'}" in said, said
    assert (root / "prog").read_bytes() == edited


def test_train_on_an_up_to_date_tree_says_so_and_keeps_it(tmp_path):
    """F72: nothing instrumented was compiled: refused, the program kept."""
    root = project(tmp_path, stages=("pgo",))
    subprocess.run(["make"], cwd=root, check=True, capture_output=True)
    before = (root / "prog").read_bytes()
    done = train(root)
    assert done.returncode == 2, done.stderr
    said = done.stderr.decode().strip().splitlines()[-1]
    assert "did not link prog" in said and "clean it first" in said, said
    assert (root / "prog").read_bytes() == before


def test_a_tuned_binary_renamed_since_tuning_builds_with_the_shipped_database(tmp_path):
    """F83: a later release links the program under another name (prog is now tool):
    no profile trained for a binary the build does not make, the build's own program
    built with the database as shipped, and the words say which binaries it linked;
    under --policy error the build fails and leaves no instrumented program."""
    root = project(tmp_path)
    (root / "Makefile").write_text(MAKEFILE.replace("prog:", "tool:").replace("rm -f prog",
                                                                              "rm -f tool"))
    done = train(root)
    said = done.stderr.decode()
    assert done.returncode == 0, said
    assert "PGO NOT retrained: the build linked tool but not prog, the binary " \
           "autopass.flags.json was tuned for (renamed or removed since tuning? tune again" \
           in said, said
    assert ("BOLT NOT retrained: the build did not link prog, the binary" in said) \
        == BOLT_HERE, said
    assert (root / "tool").is_file() and not instrumented(root / "tool")
    assert not (root / "autopass.trained.flags.json").exists()
    subprocess.run(["make", "clean"], cwd=root, check=True, capture_output=True)
    done = run([AUTOPASS, "apply", "--train", "--policy", "error", "--", "make"], root,
               env_with_autopass())
    said = done.stderr.decode().strip().splitlines()[-1]
    assert done.returncode == 2 and "the build linked tool but not prog" in said, said
    assert not (root / "tool").exists()


@pytest.mark.parametrize("mode,why", [("c", "the training run failed (killed by signal 6); "
                                             "its last line: 'cannot go on: mode c'"),
                                      ("e", "changes the benchmark's output")])
def test_a_failed_or_changed_training_run_builds_with_the_shipped_database(tmp_path, mode,
                                                                             why):
    """F70, F71: a crashing training run, and one whose output the instrumentation
    changes: the build ships the database as shipped, never the doubtful profile."""
    root = project(tmp_path, mode, stages=("pgo",))
    done = train(root)
    said = done.stderr.decode()
    assert done.returncode == 0, said
    assert "PGO NOT retrained" in said and why in said, said
    assert "autopass.profdata" in said, "the shipped profile's own refusal is not said"
    assert (root / "prog").is_file() and not instrumented(root / "prog")
    assert "plain" in subprocess.run([root / "prog", "e"], capture_output=True,
                                     text=True).stdout


# A training command that runs the program, then leaves what a process killed while
# writing its profile leaves: the first raw profile cut short, beside it (ONLY: in its
# place, so that no raw profile can be read).
CUT_SHORT = ('{exe} x && d=$(dirname "$LLVM_PROFILE_FILE") && for f in "$d"/*.profraw; do '
             'head -c 100 "$f" > "$d/killed.profraw"; [ -z "$ONLY" ] || rm "$f"; break; done')


@pytest.mark.parametrize("only", [False, True])
def test_a_raw_profile_that_cannot_be_read_is_left_out_of_the_training(tmp_path, only):
    """The training run left a raw profile llvm-profdata cannot read (a process killed
    while writing it, one of another LLVM): the others are merged and the note names
    it; none readable: the build uses the shipped profile, with llvm-profdata's words."""
    root = project(tmp_path, stages=("pgo",))
    with (root / "autopass.toml").open("a") as toml:
        toml.write(f"train = {json.dumps(['sh', '-c', CUT_SHORT])}\n")
    done = run([AUTOPASS, "apply", "--train", "--", "make"], root,
               {**env_with_autopass(), **({"ONLY": "1"} if only else {})})
    said = done.stderr.decode()
    assert done.returncode == 0, said
    assert not instrumented(root / "prog")
    if only:
        assert "PGO NOT retrained" in said and "no profile can be merged" in said, said
        return
    assert "PGO retrained" in said, said
    assert "PGO trained on 1 of the training run's 2 raw profiles: llvm-profdata cannot " \
           "read killed.profraw: " in said, said
    assert said.count("training: running [run].train") == 1, said
    profdata = toolchain.find_tool("llvm-profdata")
    assert profdata
    shown = subprocess.run([profdata, "show", "--all-functions",
                            str(root / "autopass.trained.profdata")],
                           capture_output=True, text=True).stdout
    assert "work" in shown, shown


def test_under_policy_error_a_failed_training_run_fails_the_build(tmp_path):
    """F70 under --policy error: a release pipeline that insists on fresh profiles gets
    an error, and no program built from the instrumented objects."""
    root = project(tmp_path, "c", stages=("pgo",))
    done = run([AUTOPASS, "apply", "--train", "--policy", "error", "--", "make"], root,
               env_with_autopass())
    said = done.stderr.decode().strip().splitlines()[-1]
    assert done.returncode == 2 and "the training run failed" in said, said
    assert not (root / "prog").exists() and not list(root.glob("*.o"))


def test_counts_held_to_a_reference_make_one_profile_across_a_rounding_boundary():
    """F73: Lua's interning counter read 754,209 and 757,044 in two runs: rounded, they
    fall either side (750,000 and 760,000); held to the first profile, one profile."""
    from autopass_build.candidates.steady_counts import counters_of

    def proftext(count: int) -> str:
        return (f"lstring.c:internshrstr\n# Func Hash:\n77\n# Num Counters:\n3\n"
                f"# Counter Values:\n{count}\n18\n5\n")

    first = round_proftext(proftext(754209))
    assert round_proftext(proftext(757044)) != first              # rounding alone
    assert round_proftext(proftext(757044).replace("\n18\n", "\n0\n"),
                          counters_of(first)) == first             # held to the first
    moved = round_proftext(proftext(900000), counters_of(first))   # the workload changed
    assert "\n900000\n" in moved
    other_hash = round_proftext(proftext(757044).replace("\n77\n", "\n78\n"),
                                counters_of(first))
    assert "\n760000\n" in other_hash                             # another function


def test_rounded_counts_make_one_profile_of_runs_that_differ_a_little():
    """F73: counts that differ past their second digit give one text; names, hashes and the
    numbers of counters stay as they were."""
    def proftext(hot: int, calls: int) -> str:
        return (f"main\n# Func Hash:\n1160280\n# Num Counters:\n2\n# Counter Values:\n1\n"
                f"{hot}\n\n12345\n# Func Hash:\n99\n# Num Counters:\n1\n# Counter Values:\n"
                f"{calls}\n# Num Value Kinds:\n1\n# ValueKind = IPVK_IndirectCallTarget:\n0\n"
                f"# NumValueSites:\n1\n1\nmain:{calls}\n")

    one, other = round_proftext(proftext(100231, 4012)), round_proftext(proftext(99874, 3987))
    assert one == other
    assert "\n100000\n" in one and "main:4000" in one
    assert "\n1160280\n" in one and "\n12345\n" in one and "# Num Counters:\n2\n" in one
    assert [rounded(n) for n in (7, 99, 149, 66666)] == [7, 99, 150, 67000]


def test_rounded_bolt_edges(tmp_path):
    """F73: BOLT's edge counts, rounded in place, or held to the last profile's."""
    fdata = write(tmp_path / "p.fdata", "1 main 3c 1 main 44 0 123456\n1 f 0 1 g 0 0 17\n")
    round_fdata(str(fdata))
    assert fdata.read_text() == "1 f 0 1 g 0 0 17\n1 main 3c 1 main 44 0 120000\n"  # sorted
    again = write(tmp_path / "q.fdata", "1 main 3c 1 main 44 0 126001\n1 f 0 1 g 0 0 40\n"
                                        "1 main 50 1 h 0 0 2\n")   # an edge taken twice
    round_fdata(str(again), str(fdata))
    assert again.read_text() == fdata.read_text()          # held, and the new edge is not


def test_train_needs_a_database_with_a_profile_stage(tmp_path):
    """F72: a database without PGO or BOLT has nothing to train."""
    root = project(tmp_path)
    db = flags_db.load(str(root / "autopass.flags.json"))
    assert db.target is not None
    flags_db.save(str(root / "autopass.flags.json"),
                  db.replace(profile=None, target=db.target.replace(stages=("lto",), bolt=None,
                                                                     bolt_binary="")))
    done = train(root)
    said = done.stderr.decode().strip()
    assert done.returncode == 2 and "no profile to train" in said and "lto" in said, said
    assert not (root / "prog").exists(), "it built though it refused"
    assert shutil.which("make")


def test_a_profile_from_a_newer_llvm_builds_with_the_default_flags(tmp_path):
    """F74: a shipped profile written by another LLVM (its indexed
    format version is one clang 19 does not read).  Every compile says so once and
    builds with the default flags; --train then makes one this clang reads."""
    import struct

    from autopass_build.core.files import hash_file

    root = project(tmp_path, stages=("pgo",))
    profdata = toolchain.find_tool("llvm-profdata")
    assert profdata
    raw = tmp_path / "one.proftext"
    raw.write_text("main\n# Func Hash:\n1\n# Num Counters:\n1\n# Counter Values:\n5\n")
    newer = root / "autopass.profdata"
    subprocess.run([profdata, "merge", "-o", str(newer), str(raw)], check=True)
    data = bytearray(newer.read_bytes())
    version, = struct.unpack_from("<Q", data, 8)
    struct.pack_into("<Q", data, 8, version + 20)          # a later format than 19 reads
    newer.write_bytes(bytes(data))
    db = flags_db.load(str(root / "autopass.flags.json"))
    flags_db.save(str(root / "autopass.flags.json"),
                  db.replace(profile=flags_db.ProfileRef("autopass.profdata",
                                                         hash_file(str(newer)))))
    built = run([AUTOPASS, "apply", "--", "make"], root, env_with_autopass())
    said = built.stderr.decode()
    assert built.returncode == 0, said
    assert "unsupported instrumentation profile format version" in said, said
    assert "compiling with the default flags" in said, said
    assert subprocess.run([root / "prog", "x"], capture_output=True).returncode == 0
    subprocess.run(["make", "clean"], cwd=root, check=True, capture_output=True)
    assert "PGO retrained" in train(root).stderr.decode()


@pytest.mark.skipif(not BOLT_HERE, reason="needs bolt-19 (scripts/setup.sh)")
def test_db_status_matches_the_bolt_profile_against_todays_program(tmp_path):
    """Issue 46, item 3: BOLT's share that still applies, from llvm-bolt's own
    stale-matching report on today's program; a program BOLT rewrote already is said to
    be one it cannot read."""
    root = project(tmp_path)
    assert train(root).returncode == 0
    status = [AUTOPASS, "db", "status", "--db", "autopass.trained.flags.json"]
    rewritten = subprocess.run(status, cwd=root, capture_output=True, text=True)
    assert "prog was rewritten by BOLT already" in rewritten.stdout, rewritten.stdout
    write(root / "work.c", WORK.replace("i / 7", "i / 5 + 1"))   # today's source
    subprocess.run(["make", "clean"], cwd=root, check=True, capture_output=True)
    plain = dict(env_with_autopass(), CC=toolchain.find_tool("clang") or "clang")
    subprocess.run(["make"], cwd=root, check=True, capture_output=True, env=plain)
    today = subprocess.run(status + ["--binary", "prog"], cwd=root, capture_output=True,
                           text=True)
    line = next(x for x in today.stdout.splitlines() if "profiled functions unchanged" in x)
    unchanged, profiled = map(int, line.split()[1].split("/"))
    assert 0 < profiled and unchanged < profiled, line      # work() changed, not all
    assert "llvm-bolt's report" in line
    assert "recommendation:" in today.stdout
    missing = subprocess.run(status + ["--binary", "gone"], cwd=root, capture_output=True,
                             text=True)
    assert missing.returncode == 2 and "--binary" in missing.stderr


LIBRARY_MAKEFILE = """CC ?= cc
prog: main.o libwork.so
\t$(CC) -o $@ main.o -L. -lwork -Wl,-rpath,'$$ORIGIN' -Wl,--enable-new-dtags
libwork.so: work.o
\t$(CC) -shared -Wl,-soname,libwork.so -o $@ work.o
work.o: work.c
\t$(CC) -O2 -fPIC -c $< -o $@
main.o: main.c
\t$(CC) -O2 -c $< -o $@
clean:
\trm -f prog libwork.so *.o
"""


@pytest.mark.skipif(not BOLT_HERE, reason="needs bolt-19 (scripts/setup.sh)")
def test_train_retrains_bolt_of_the_project_library_the_program_loads(tmp_path):
    """The program's time in a shared library of its own (F58's case), which tune had
    BOLT rewrite: --train trains and rewrites it too, beside the program."""
    root = project(tmp_path, stages=("bolt",))
    write(root / "Makefile", LIBRARY_MAKEFILE)
    db = flags_db.load(str(root / "autopass.flags.json"))
    assert db.target is not None
    library = flags_db.BoltLibrary("libwork.so",
                                   flags_db.ProfileRef("autopass.libwork.fdata", "0" * 40),
                                   "0" * 40)
    flags_db.save(str(root / "autopass.flags.json"),
                  db.replace(profile=None, target=db.target.replace(bolt_libraries=(library,))))
    done = train(root)
    said = done.stderr.decode()
    assert done.returncode == 0 and "BOLT retrained" in said, said
    trained = flags_db.load(str(root / "autopass.trained.flags.json"))
    assert trained.target is not None
    assert [b.output for b in trained.target.bolt_libraries] == ["libwork.so"], said
    assert bolt.rewritten(str(root / "libwork.so")) and bolt.rewritten(str(root / "prog"))
    ran = subprocess.run([root / "prog", "x"], capture_output=True, text=True)
    assert ran.returncode == 0 and ran.stdout.strip(), ran.stderr


NEW_MAIN = r"""
#include <stdio.h>
int work(int n);
int extra(int n);
int main(void) {
    printf("%d\n", work(200000) + extra(3));
    return 0;
}
"""
EXTRA = "int extra(int n) { return n * 7; }\n"
TOOL = "int main(void) { return 0; }\n"
RELEASE_MAKEFILE = """CC ?= cc
all: prog tool
prog: main.o work.o libextra.a
\t$(CC) -o $@ main.o work.o -L. -lextra
libextra.a: extra.o
\tar rcs $@ extra.o
tool: tool.o
\t$(CC) -o $@ tool.o
%.o: %.c
\t$(CC) -O2 -c $< -o $@
clean:
\trm -f prog tool *.o *.a
"""


def test_a_source_added_since_tuning_gets_the_lto_stage_in_a_train_build(tmp_path):
    """A release adds extra.c (in an archive the program links) and another program's
    tool.c: --train finds extra.c in today's program and builds it with the stages'
    flags (bitcode, for the LTO link), and leaves tool.c as it was."""
    from autopass_build.capture.apply.bitcode import carries_bitcode

    root = project(tmp_path, stages=("pgo", "lto"))
    write(root / "main.c", NEW_MAIN)
    write(root / "extra.c", EXTRA)
    write(root / "tool.c", TOOL)
    write(root / "Makefile", RELEASE_MAKEFILE)
    done = train(root)
    said = done.stderr.decode()
    assert done.returncode == 0 and "PGO retrained" in said, said
    assert "the stages' flags also go to 1 source new since tuning: extra.c" in said, said
    trained = flags_db.load(str(root / "autopass.trained.flags.json"))
    assert trained.target is not None
    assert set(trained.target.units) == {"main.c", "work.c", "extra.c"}, trained.target.units
    assert carries_bitcode((root / "extra.o").read_bytes()), "extra.c was built without LTO"
    assert not carries_bitcode((root / "tool.o").read_bytes())
    ran = subprocess.run([root / "prog"], capture_output=True, text=True)
    assert ran.returncode == 0 and ran.stdout.strip(), ran.stderr


# (what `apply --train` says as the step starts, the signal): each step in turn
TRAIN_STOPS = [("building instrumented for PGO", signal.SIGTERM),
               ("training: running", signal.SIGINT),
               ("training: running", signal.SIGTERM),
               ("training: running", signal.SIGKILL),
               ("training: merging", signal.SIGKILL),
               ("building with the profile just trained", signal.SIGINT),
               ("building with the profile just trained", signal.SIGKILL)]


@pytest.mark.parametrize("step,signum", TRAIN_STOPS)
def test_an_apply_train_stopped_at_any_step_leaves_nothing_the_next_build_takes(
        tmp_path, step, signum):
    """Issue 64, case 2: `apply --train` stopped at each step (its instrumented build,
    the training run, the merge, the build with the fresh profile): Ctrl-C and SIGTERM
    delete what the run built on the way out; after kill -9 (of the whole group, as an
    OOM kill or CI does) the next `apply` deletes it first, and builds what the
    database gives: the program a clean `apply` builds, byte for byte.  Before, make took
    the instrumented objects as up to date and the next build linked them: a program
    that wrote profiles wherever it ran; and the final build's objects, trained on a
    profile the run never checked, outlived its stop."""
    training, final = step == "training: running", step.startswith("building with")
    root = project(tmp_path / "stopped", mode="w" if training else "x")
    if final:       # a link that takes its time: the stop lands with the objects built
        write(root / "Makefile", MAKEFILE.replace("\t$(CC) -o", "\tsleep 3; $(CC) -o"))
    started = subprocess.Popen([AUTOPASS, "apply", "--train", "--", "make"], cwd=root,
                               env=env_with_autopass(), stderr=subprocess.PIPE,
                               start_new_session=True)
    assert started.stderr is not None
    said = b""
    deadline = time.monotonic() + 120
    while step.encode() not in said and time.monotonic() < deadline:
        line = started.stderr.readline()
        if not line:
            break
        said += line
    assert step.encode() in said, said
    if training:
        assert instrumented(root / "prog")      # the premise: build 1 is in the tree
    while final and len(list(root.glob("*.o"))) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not final or len(list(root.glob("*.o"))) == 2  # the premise: compiled, not linked
    if signum == signal.SIGKILL:
        os.killpg(started.pid, signum)
        # the training run is its own session and outlives the group: its end, not
        # autopass's, would close the pipe
        started.wait(timeout=60)
        started.stderr.close()
    else:
        os.kill(started.pid, signum)
        said += started.communicate(timeout=60)[1]
    assert b"Traceback" not in said, said
    if signum == signal.SIGKILL:
        assert (root / ".autopass-train").is_dir()
    else:
        assert started.returncode == 130, said
        assert not (root / ".autopass-train").exists()
        assert not (root / "prog").exists() and not list(root.glob("*.o")), \
            "what the stopped run built was left in the tree"
    plain = run([AUTOPASS, "apply", "--", "make"], root, env_with_autopass())
    assert plain.returncode == 0, plain.stderr
    if training:
        assert (b"an interrupted `apply --train` had built" in plain.stderr) == \
            (signum == signal.SIGKILL), plain.stderr
    assert not instrumented(root / "prog"), "the next build linked instrumented objects"
    assert not (root / ".autopass-train").exists()
    clean = project(tmp_path / "clean", mode="w" if training else "x")
    write(clean / "Makefile", (root / "Makefile").read_text())
    assert run([AUTOPASS, "apply", "--", "make"], clean, env_with_autopass()).returncode == 0
    assert (root / "prog").read_bytes() == (clean / "prog").read_bytes(), \
        "the next build linked an object the stopped run had built"
