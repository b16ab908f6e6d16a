"""Apply mode: the wrapper adds each file's tuned flags from autopass.flags.json in a real
Make build; with no database or an empty one the objects are byte-identical to a plain
build; stale, corrupt, hostile, untrusted databases and flags the compiler rejects give
one warning and the default flags (F3, F11, S1, S3); --policy error fails instead."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from support import AUTOPASS, EXAMPLES, write

from autopass_build.candidates.fidelity import compare_objects
from autopass_build.candidates.replay import Replayer
from autopass_build.capture.apply.applier import compiler_id
from autopass_build.core import toolchain
from autopass_build.core.files import hash_file
from autopass_build.store.index import Store

OBJECTS = ["src/main.o"] + [f"lib/{n}.o" for n in ("rng", "util", "crc32", "lz", "sort",
                                                   "matrix", "hashmap", "strsearch", "nbody",
                                                   "bigint")]
TUNED = ["-O3", "-mllvm", "-inline-threshold=900"]


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> dict[str, bytes]:
    """Objects of a plain clang-19 build (the path is the same for every build below)."""
    root = tmp_path_factory.mktemp("apply") / "make-c"
    shutil.copytree(EXAMPLES / "make-c", root,
                    ignore=shutil.ignore_patterns(".autopass", "*.o", "*.a", "*.d", "autopass.*"))
    clang = toolchain.find_tool("clang")
    subprocess.run(["make", "-s", f"CC={clang}"], cwd=root, check=True)
    objects = {o: (root / o).read_bytes() for o in OBJECTS}
    subprocess.run([AUTOPASS, "record", "--", "make", "-s", "-B"], cwd=root, check=True,
                   capture_output=True)
    return {"root": root, "objects": objects}


def build(root: Path, *apply_args: str) -> subprocess.CompletedProcess:
    subprocess.run(["make", "-s", "clean"], cwd=root, check=True)
    return subprocess.run([AUTOPASS, "apply", *apply_args, "--", "make", "-s"], cwd=root,
                          capture_output=True, text=True)


def write_db(root: Path, entries: dict, schema: int = 1, compiler: str | None = None) -> Path:
    clang = toolchain.find_tool("clang")
    data = {"schema": schema, "cpu": None, "entries": entries,
            "toolchain": {"compiler": compiler or compiler_id(clang), "target": ""}}
    path = root / "autopass.flags.json"
    path.write_text(json.dumps(data, indent=2, sort_keys=True))
    path.chmod(0o644)
    return path


def entry(root: Path, source: str, flags: list[str]) -> dict:
    return {"flags": flags, "source_hash": hash_file(str(root / source)), "why": "test",
            "gain": {"metric": "cpu", "ratio": 0.9, "low": 0.85, "high": 0.95, "pairs": 10}}


def changed(root: Path, reference) -> list[str]:
    return [o for o in OBJECTS if (root / o).read_bytes() != reference["objects"][o]]


def test_no_database_and_empty_database_change_nothing(reference) -> None:
    root = reference["root"]
    (root / "autopass.flags.json").unlink(missing_ok=True)
    done = build(root)
    assert done.returncode == 0 and "does not exist" in done.stderr
    assert changed(root, reference) == []
    write_db(root, {})
    done = build(root)
    assert done.returncode == 0 and done.stderr == ""
    assert changed(root, reference) == []


def test_tuned_entry_is_applied_and_matches_replay(reference) -> None:
    root = reference["root"]
    write_db(root, {"lib/lz.c": entry(root, "lib/lz.c", TUNED)})
    done = build(root)
    assert done.returncode == 0, done.stderr
    assert done.stderr == (f"autopass: 1 command (compiles, links) took the tuned flags of "
                           f"{root / 'autopass.flags.json'}\n")   # and nothing else
    assert changed(root, reference) == ["lib/lz.o"]
    store = Store.open_existing(str(root / ".autopass"))
    [unit] = [u for u in store.units() if u.source_rel == "lib/lz.c"]
    replayed = Path(Replayer(store).object_for(unit, tuple(TUNED))).read_bytes()
    assert compare_objects(replayed, (root / "lib/lz.o").read_bytes())[0]   # what ships
    assert subprocess.run([root / "dataproc", "1"], capture_output=True).returncode == 0


@pytest.mark.parametrize("case", ["stale", "other_compiler", "hostile", "schema", "truncated",
                                  "world_writable"])
def test_untrustworthy_databases_warn_and_build_plain(reference, case) -> None:
    root = reference["root"]
    good = entry(root, "lib/lz.c", TUNED)
    if case == "stale":
        path = write_db(root, {"lib/lz.c": {**good, "source_hash": "0" * 40}})
    elif case == "other_compiler":
        path = write_db(root, {"lib/lz.c": good}, compiler="clang 17.0.6 (x86_64-pc-linux-gnu)")
    elif case == "hostile":
        path = write_db(root, {"lib/lz.c": {**good, "flags": ["-fplugin=/tmp/evil.so"]},
                               "lib/sort.c": {**entry(root, "lib/sort.c", ["-O3"]),
                                              "flags": ["-O3", "$(touch canary)"]}})
    elif case == "schema":      # a newer autopass's: refused, naming both (issue 64)
        path = write_db(root, {"lib/lz.c": good}, schema=99)
    elif case == "truncated":
        path = write_db(root, {"lib/lz.c": good})
        path.write_text(path.read_text()[:40])
    else:
        path = write_db(root, {"lib/lz.c": good})
        path.chmod(0o666)
    done = build(root)
    assert done.returncode == 0, done.stderr
    assert "autopass: warning:" in done.stderr and "Traceback" not in done.stderr
    assert changed(root, reference) == []
    assert not (root / "canary").exists()
    if case == "schema":
        from autopass_build import __version__
        assert (f"was written by a newer autopass (schema 99); this one, {__version__}, "
                "reads schemas 1 to 2: upgrade autopass") in done.stderr
        shown = subprocess.run([AUTOPASS, "db", "show"], cwd=root, capture_output=True,
                               text=True)
        assert shown.returncode == 2 and "newer autopass (schema 99)" in shown.stderr
    path.chmod(0o644)


def test_an_older_schema_is_read_and_said(reference) -> None:
    """Issue 64, case 4: a schema-1 database (an older autopass's) builds as it did, and
    `db show` says it was read as it is."""
    root = reference["root"]
    write_db(root, {"lib/lz.c": entry(root, "lib/lz.c", TUNED)}, schema=1)
    done = build(root)
    assert done.returncode == 0 and "warning" not in done.stderr, done.stderr
    assert changed(root, reference) == ["lib/lz.o"]
    shown = subprocess.run([AUTOPASS, "db", "show"], cwd=root, capture_output=True, text=True)
    assert "schema 1, an older autopass's: read as it is" in shown.stdout


def test_policy_error_fails_the_compile_with_the_reason(reference) -> None:
    root = reference["root"]
    write_db(root, {"lib/lz.c": {**entry(root, "lib/lz.c", TUNED), "source_hash": "0" * 40}})
    done = build(root, "--policy", "error")
    assert done.returncode != 0
    assert "autopass: error: lib/lz.c: entry not applied: the source changed" in done.stderr


def test_flags_the_compiler_rejects_fall_back_with_one_warning(reference) -> None:
    root = reference["root"]
    write_db(root, {"lib/lz.c": entry(root, "lib/lz.c", ["-march=notacpu"])})   # F3
    done = build(root)
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("autopass: warning: the compiler rejected") == 1
    assert changed(root, reference) == []


def test_db_show_and_check(reference) -> None:
    root = reference["root"]
    write_db(root, {"lib/lz.c": entry(root, "lib/lz.c", TUNED),
                    "lib/sort.c": {**entry(root, "lib/sort.c", ["-O3"]), "source_hash": "1" * 40}})
    shown = subprocess.run([AUTOPASS, "db", "show"], cwd=root, capture_output=True, text=True)
    assert "lib/lz.c: -O3 -mllvm -inline-threshold=900" in shown.stdout
    check = subprocess.run([AUTOPASS, "db", "check"], cwd=root, capture_output=True, text=True)
    assert check.returncode == 1 and "lib/sort.c: entry not applied" in check.stdout
    assert "1/2 entries apply" in check.stdout
    shutil.copy(root / "autopass.flags.json", root / "old.json")
    pruned = subprocess.run([AUTOPASS, "db", "prune"], cwd=root, capture_output=True, text=True)
    assert pruned.returncode == 0, pruned.stderr
    assert list(json.loads((root / "autopass.flags.json").read_text())["entries"]) == ["lib/lz.c"]
    diff = subprocess.run([AUTOPASS, "db", "diff", "old.json", "autopass.flags.json"], cwd=root,
                          capture_output=True, text=True)
    assert diff.returncode == 1 and diff.stdout.startswith("- lib/sort.c: -O3")
    assert "1 entry differs" in diff.stdout
    # `db show old.json` showed ./autopass.flags.json instead: the file named is shown
    old = subprocess.run([AUTOPASS, "db", "show", "old.json"], cwd=root, capture_output=True,
                         text=True)
    assert old.returncode == 0 and "lib/sort.c: -O3" in old.stdout, old.stderr
    both = subprocess.run([AUTOPASS, "db", "check", "old.json", "--db", "old.json"], cwd=root,
                          capture_output=True, text=True)
    assert both.returncode == 2 and "db check reads one database" in both.stderr
    os.unlink(root / "autopass.flags.json")
    os.unlink(root / "old.json")


def test_a_subfolder_finds_the_database_tune_writes_and_a_failed_build_is_said(
        reference) -> None:
    """Run from a subfolder of the project, `apply` and `db` read the database `tune`
    wrote ([tune].flags_db of the nearest autopass.toml), not ./autopass.flags.json,
    which is not there: they had built plain with a warning that it does not exist.  A
    build that fails says so in a line of autopass's own, with the build's exit status."""
    root = reference["root"]
    write(root / "autopass.toml", '[build]\ncommand = "make -s"\n')
    (root / "autopass.toml").chmod(0o644)
    write_db(root, {"lib/lz.c": entry(root, "lib/lz.c", TUNED)})
    try:
        shown = subprocess.run([AUTOPASS, "db", "show"], cwd=root / "lib",
                               capture_output=True, text=True)
        assert "lib/lz.c: -O3 -mllvm -inline-threshold=900" in shown.stdout, shown.stderr
        subprocess.run(["make", "-s", "clean"], cwd=root, check=True)
        done = subprocess.run([AUTOPASS, "apply", "--", "make", "-s", "-C", ".."],
                              cwd=root / "lib", capture_output=True, text=True)
        assert done.returncode == 0 and "does not exist" not in done.stderr, done.stderr
        assert changed(root, reference) == ["lib/lz.o"]
        failed = subprocess.run([AUTOPASS, "apply", "--", "sh", "-c", "exit 3"], cwd=root,
                                capture_output=True, text=True)
        assert failed.returncode == 3
        assert failed.stderr.splitlines()[-1] == "autopass: the build command exited with 3"
    finally:
        os.unlink(root / "autopass.toml")
        os.unlink(root / "autopass.flags.json")


def test_db_show_gives_one_measurement_once_for_the_sources_it_covers(reference) -> None:
    """The sources of one compile command are tuned as one: their entries share flags,
    gain and reason, and `db show` says it once for all of them, not once per source."""
    root = reference["root"]
    write_db(root, {"lib/lz.c": entry(root, "lib/lz.c", TUNED),
                    "lib/sort.c": entry(root, "lib/sort.c", TUNED)})
    shown = subprocess.run([AUTOPASS, "db", "show"], cwd=root, capture_output=True, text=True)
    assert shown.returncode == 0, shown.stderr
    assert "lib/lz.c, lib/sort.c: -O3 -mllvm -inline-threshold=900" in shown.stdout
    assert shown.stdout.count("cpu: 0.9000x") == 1, shown.stdout
    os.unlink(root / "autopass.flags.json")


def test_cmake_apply_mode_through_autopass_cmake(tmp_path) -> None:
    """CMake + Ninja, the project untouched: AutoPass.cmake records, then applies."""
    from support import REPO
    root = tmp_path / "cmake-cpp"
    shutil.copytree(EXAMPLES / "cmake-cpp", root, ignore=shutil.ignore_patterns("build", ".autopass"))
    include = f"-DCMAKE_PROJECT_TOP_LEVEL_INCLUDES={REPO}/cmake/AutoPass.cmake"
    env = {**os.environ, "PATH": f"{Path(AUTOPASS).parent}:{os.environ['PATH']}"}

    def cmake_build(*options: str) -> dict[str, bytes]:
        shutil.rmtree(root / "build", ignore_errors=True)
        subprocess.run(["cmake", "-S", ".", "-B", "build", "-G", "Ninja", include, *options],
                       cwd=root, env=env, check=True, capture_output=True)
        done = subprocess.run(["cmake", "--build", "build"], cwd=root, env=env,
                              capture_output=True, text=True)
        assert done.returncode == 0, done.stdout + done.stderr
        return {p.name: p.read_bytes() for p in (root / "build").rglob("*.o")}

    plain = cmake_build()                                   # record mode
    # in one pass (one_pass.py), with the native launcher written into the build folder
    rules = (root / "build" / "CMakeFiles" / "rules.ninja").read_text()
    assert "--autopass-ir-plugin=" in rules
    assert f"{root}/build/autopass-launcher/autopass-cc --autopass-mode=record" in rules
    assert cmake_build("-DAUTOPASS_MODE=apply") == plain    # no database: nothing changes
    aligned = ["-mllvm", "-align-all-functions=6"]       # -O3 already: a flag that shows
    write_db(root, {"src/solver.cpp": entry(root, "src/solver.cpp", aligned)})
    tuned = cmake_build("-DAUTOPASS_MODE=apply")
    assert [name for name in plain if tuned[name] != plain[name]] == ["solver.cpp.o"]
    store = Store.open_existing(str(root / ".autopass"))
    [unit] = [u for u in store.units() if u.source_rel == "src/solver.cpp"]
    replayed = Path(Replayer(store).object_for(unit, tuple(aligned))).read_bytes()
    assert compare_objects(replayed, tuned["solver.cpp.o"])[0]
    out = subprocess.run(["build/routeplan"], cwd=root, capture_output=True, check=True)
    assert out.stdout == (root / "expected.txt").read_bytes()
    # configured to record, built by `autopass apply`: the command says apply, and wins
    # over the launcher's configured mode (it once recorded, and `verify` compared two
    # plain builds)
    cmake_build()
    done = subprocess.run([AUTOPASS, "apply", "--", "cmake", "--build", "build",
                           "--clean-first"], cwd=root, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert {p.name: p.read_bytes() for p in (root / "build").rglob("*.o")} == tuned


def test_autopass_cmake_refuses_an_unknown_mode_when_configuring(tmp_path) -> None:
    """A mistyped AUTOPASS_MODE is said once, at configure time, with the fix; before, the
    configure passed and every compile of the build failed on it."""
    from support import REPO
    root = tmp_path / "cmake-cpp"
    shutil.copytree(EXAMPLES / "cmake-cpp", root, ignore=shutil.ignore_patterns("build", ".autopass"))
    env = {**os.environ, "PATH": f"{Path(AUTOPASS).parent}:{os.environ['PATH']}"}
    done = subprocess.run(["cmake", "-S", ".", "-B", "build", "-G", "Ninja",
                           f"-DCMAKE_PROJECT_TOP_LEVEL_INCLUDES={REPO}/cmake/AutoPass.cmake",
                           "-DAUTOPASS_MODE=aply"], cwd=root, env=env, capture_output=True,
                          text=True)
    assert done.returncode != 0
    assert 'AUTOPASS_MODE is "aply", not one of record, apply, off' in " ".join(
        done.stderr.split()), done.stderr


def verified(root: Path, data: str, run: str, hot_flags: list[str]
             ) -> tuple[Path, subprocess.CompletedProcess]:
    """tests/data/`data` recorded by its Makefile at `root`, hot.c tuned with `hot_flags`
    (run: the [run] command line and what follows), then `autopass verify`."""
    shutil.copytree(Path(__file__).parent / "data" / data, root)
    subprocess.run([AUTOPASS, "record", "--", "make"], cwd=root, check=True, capture_output=True)
    (root / "autopass.toml").write_text(
        '[build]\ncommand = "make"\nclean = "make clean"\n'
        f'[run]\ncommand = {run}\n'
        '[measure]\nmetric = "instructions"\nlayout_check = false\nmin_pairs = 2\nmax_pairs = 2\n')
    write_db(root, {"hot.c": entry(root, "hot.c", hot_flags)})
    return root, subprocess.run([AUTOPASS, "verify"], cwd=root, capture_output=True, text=True)


def test_verify_reproducible_and_measured(tmp_path) -> None:
    """Three clean builds through the project's Makefile: plain, tuned, tuned; the tuned
    binaries are bit-identical and measurably faster (callgrind instructions)."""
    root, done = verified(tmp_path / "mini", "tune-mini", '["{exe}", "20"]', ["-O3"])
    assert done.returncode == 0, done.stderr
    assert "mini: two clean tuned builds are bit-identical" in done.stdout
    speedup = float(done.stdout.split("speedup ")[1].split("x")[0])
    assert speedup > 1.5 and "-> faster" in done.stdout
    missing = subprocess.run([AUTOPASS, "verify", "--config", "/dev/null"], cwd=root,
                             capture_output=True, text=True)
    assert missing.returncode == 2 and "[build].clean" in missing.stderr
    (root / "autopass.flags.json").rename(root / "elsewhere.json")
    nothing = subprocess.run([AUTOPASS, "verify"], cwd=root, capture_output=True, text=True)
    assert nothing.returncode == 2 and "nothing to verify" in nothing.stderr
    assert "verify: clean" not in nothing.stderr      # before three builds, not after


def test_verify_measures_the_project_shared_library_each_build_made(tmp_path) -> None:
    """F22: prog loads libhot.so (no rpath), where the tuned flags go.  verify once ran the
    copied binary alone, which loaded whatever the system had under that name (for xz:
    the installed liblzma, so tuned and plain measured alike); it copies the libraries
    with each side and runs each with its own first."""
    _, done = verified(tmp_path / "shared", "shared-mini", '["{exe}", "300"]\ntarget = "prog"',
                       ["-O1"])
    assert done.returncode == 0, done.stderr
    assert ("prog (with the project shared library it loads): two clean tuned builds "
            "are bit-identical") in done.stdout
    speedup = float(done.stdout.split("speedup ")[1].split("x")[0])
    assert speedup != 1.0     # the tuned library ran, not the plain one twice


def _instructions(python: str, bench: Path, module: Path) -> int:
    from autopass_build.measuring.binaries import (
        debugless_copy,  # valgrind 3.19 cannot read DWARF 5
    )
    folder = module.parent / "stripped"
    folder.mkdir(exist_ok=True)
    stripped = debugless_copy(str(module), str(folder))
    out = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null",
                          python, str(bench), stripped], capture_output=True, text=True,
                         env={**os.environ, "PYTHONHASHSEED": "0"}, check=True)
    return int(out.stderr.split("refs:")[1].split()[0].replace(",", ""))


def test_python_extension_built_by_pip_with_scikit_build_core(tmp_path) -> None:
    """pip + scikit-build-core + CMake + Ninja: record, then a tuned wheel through apply
    mode whose module gives the same answer with fewer instructions."""
    import sys
    import zipfile
    root = tmp_path / "python-ext"
    shutil.copytree(EXAMPLES / "python-ext", root, ignore=shutil.ignore_patterns("build", "dist"))
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    wheel = [sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "-q",
             "-w", "dist", "."]
    subprocess.run([AUTOPASS, "record", "--", *wheel], cwd=root, env=env, check=True,
                   capture_output=True)
    store = Store.open_existing(str(root / ".autopass"))
    assert sorted(u.source_rel for u in store.units()) == ["src/fastkern.c", "src/kernels.c"]

    def built_module(tag: str) -> Path:
        [whl] = (root / "dist").glob("*.whl")
        folder = tmp_path / tag
        with zipfile.ZipFile(whl) as z:
            [name] = [n for n in z.namelist() if n.endswith(".so")]
            z.extract(name, folder)
        whl.unlink()
        return folder / name

    plain = built_module("plain")
    write_db(root, {"src/kernels.c": entry(root, "src/kernels.c",
                                           ["-mllvm", "-force-vector-width=8"])})
    shutil.rmtree(root / "build")
    done = subprocess.run([AUTOPASS, "apply", "--", *wheel], cwd=root, env=env,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    tuned = built_module("tuned")
    assert tuned.read_bytes() != plain.read_bytes()
    bench = root / "bench.py"
    answers = {subprocess.run([sys.executable, str(bench), str(m)], capture_output=True,
                              text=True, check=True).stdout for m in (plain, tuned)}
    assert len(answers) == 1                                  # same checksum
    plain_counts = [_instructions(sys.executable, bench, plain) for _ in range(2)]
    tuned_counts = [_instructions(sys.executable, bench, tuned) for _ in range(2)]
    assert max(tuned_counts) < 0.995 * min(plain_counts), (plain_counts, tuned_counts)


CACHES_CC = {
    # configure's way: $CC kept by its full path in a file the Makefile includes
    "configure": 'echo "CC = $CC" > config.mk\n',
    "Makefile": "include config.mk\nprog: main.c\n\t$(CC) -O2 -o prog main.c\n",
    "main.c": '#include <stdio.h>\nint main(void) { puts("ok"); return 0; }\n',
}


@pytest.mark.parametrize("command", ["apply", "verify"])
def test_a_tree_that_keeps_cc_by_its_path_still_builds_after_autopass(tmp_path, command):
    """F30: apply and verify wrote the wrapper into a folder of their run and deleted it
    after; a configure script had kept that path as $CC, so the user's next plain `make`
    failed ("autopass-cc: No such file or directory": pcre2 after `autopass verify`)."""
    root = tmp_path / "p"
    for name, text in CACHES_CC.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    env = {k: v for k, v in os.environ.items() if not k.startswith("AUTOPASS_")}
    env["XDG_CACHE_HOME"] = str(tmp_path / "cache")
    build = "sh configure && make -s"
    if command == "apply":
        argv = [AUTOPASS, "apply", "--", "sh", "-c", build]
    else:
        (root / "autopass.toml").write_text(
            f'[build]\ncommand = "{build}"\nclean = "rm -f prog"\n[run]\ncommand = ["{{exe}}"]\n'
            'target = "prog"\n')
        (root / "autopass.flags.json").write_text(json.dumps({"schema": 1, "files": {}}))
        subprocess.run([AUTOPASS, "record", "--", "sh", "-c", build], cwd=root, env=env,
                       check=True, capture_output=True)
        argv = [AUTOPASS, "verify", "--no-measure"]
    done = subprocess.run(argv, cwd=root, env=env, capture_output=True, text=True)
    assert done.returncode in (0, 1), done.stderr      # verify: 1 = builds differ
    kept = (root / "config.mk").read_text().split("=", 1)[1].strip()
    assert "autopass-cc" in kept and os.path.exists(kept), kept
    (root / "prog").unlink()
    again = subprocess.run(["make", "-s"], cwd=root, env=env, capture_output=True, text=True)
    assert again.returncode == 0, again.stderr
    assert subprocess.run([root / "prog"], capture_output=True, text=True).stdout == "ok\n"


def test_a_library_found_through_the_users_library_path_is_still_found(tmp_path) -> None:
    """F56 (RELIABILITY): the candidate's rebuilt libraries went on LD_LIBRARY_PATH in
    place of [run].env's (seen running waf-built aubio, whose examples have no rpath and
    run with LD_LIBRARY_PATH=build/src; aubio needed nothing else from it), so a program
    that also loads a library from outside the tree (a vendor's, an install prefix)
    could not start under try, tune or verify.  The candidate's folder now goes first,
    the user's after it."""
    vendor = tmp_path / "vendor"
    vendor.mkdir()
    (vendor / "vendor.c").write_text("unsigned long vendor_seed(void) { return 7; }\n")
    subprocess.run(["clang-19", "-shared", "-fPIC", "-o", str(vendor / "libvendor.so"),
                    str(vendor / "vendor.c")], check=True)
    root = tmp_path / "shared"
    shutil.copytree(Path(__file__).parent / "data" / "shared-mini", root)
    main = root / "main.c"
    main.write_text(main.read_text().replace(
        "unsigned long work(unsigned long n);",
        "unsigned long work(unsigned long n);\nunsigned long vendor_seed(void);").replace(
        "work(argc > 1", "vendor_seed() + work(argc > 1"))
    makefile = root / "Makefile"
    makefile.write_text(makefile.read_text().replace("-L. -lhot", f"-L. -lhot -L{vendor} -lvendor"))
    subprocess.run([AUTOPASS, "record", "--", "make"], cwd=root, check=True,
                   capture_output=True)
    (root / "autopass.toml").write_text(
        '[run]\ncommand = ["{exe}", "300"]\ntarget = "prog"\n'
        f'env = {{ LD_LIBRARY_PATH = "{vendor}" }}\n'
        '[build]\ncommand = "make"\nclean = "make clean"\n'
        '[measure]\nmetric = "instructions"\nlayout_check = false\nmin_pairs = 2\nmax_pairs = 2\n')
    done = subprocess.run([AUTOPASS, "try", "--flags", "hot.c=-O1"], cwd=root,
                          capture_output=True, text=True)
    assert done.returncode == 0 and "libvendor.so" not in done.stderr, done.stderr
    assert "verdict: SLOWER" in done.stdout     # its own libhot.so ran: -O1 against -O2
    write_db(root, {"hot.c": entry(root, "hot.c", ["-O1"])})
    done = subprocess.run([AUTOPASS, "verify"], cwd=root, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "prog (with the project shared library it loads)" in done.stdout


def test_database_keys_are_one_per_source_and_must_match_one(tmp_path) -> None:
    """F67: `./a.c` is `a.c` (normalized on load and on write, and applied); two spellings
    of one source are refused in one line (a.c silently won); an entry for no file
    (`gone.c`) is listed by check and dropped by prune (both said all entries apply);
    an absolute path is a problem entry; and a build whose compiles match no key hears
    that, not that its compiler was named by a full path."""
    root = tmp_path / "p"
    write(root / "a.c", "int a(int x) { return x + 1; }\n")
    digest = hash_file(str(root / "a.c"))
    db = root / "autopass.flags.json"

    def entries(**by_source) -> None:
        db.write_text(json.dumps({"schema": 1, "toolchain": {}, "entries": {
            source: {"flags": flags, "source_hash": digest} for source, flags in
            by_source.items()}}))

    entries(**{"./a.c": ["-O1"], "gone.c": ["-O1"], str(root / "b.c"): ["-O1"]})
    check = subprocess.run([AUTOPASS, "db", "check"], cwd=root, capture_output=True, text=True)
    assert check.returncode == 1
    assert "gone.c: no such file" in check.stdout and "an absolute path" in check.stdout
    assert "1/3 entries apply" in check.stdout, check.stdout
    subprocess.run([AUTOPASS, "db", "prune"], cwd=root, check=True, capture_output=True)
    assert list(json.loads(db.read_text())["entries"]) == ["a.c"]
    applied = subprocess.run([AUTOPASS, "apply", "--policy", "error", "--", "clang-19", "-O3",
                              "-c", "a.c"], cwd=root, capture_output=True, text=True)
    assert applied.returncode == 0 and "1 command" in applied.stderr, applied.stderr
    entries(**{"./a.c": ["-O1"], "a.c": ["-O2"]})
    both = subprocess.run([AUTOPASS, "db", "check"], cwd=root, capture_output=True, text=True)
    assert both.returncode == 2 and both.stderr.count("\n") == 1
    assert "'./a.c' and 'a.c' name one source" in both.stderr
    entries(**{"src/a.c": ["-O1"]})
    write(root / "a.c", "int a(int x) { return x + 2; }\n")     # not src/a.c moved here
    missed = subprocess.run([AUTOPASS, "apply", "--", "clang-19", "-O3", "-c", "a.c"],
                            cwd=root, capture_output=True, text=True)
    assert "1 compile went through autopass, none of a source the database names" in \
        missed.stderr, missed.stderr


def test_an_entry_follows_its_source_when_it_moves(tmp_path) -> None:
    """F81: a source moved since tuning (src/a.c -> lib/a.c, the same content) keeps its
    entry: apply mode matches it by name and content, db check and status say where it
    went; the same content under another name, or a moved source that was also edited,
    is a new source, whose entry matches nothing."""
    root = tmp_path / "p"
    write(root / "src" / "a.c", "int a(int x) { return x + 1; }\n")
    (root / "autopass.flags.json").write_text(json.dumps({"schema": 1, "toolchain": {},
        "entries": {"src/a.c": {"flags": ["-O1"],
                                "source_hash": hash_file(str(root / "src" / "a.c"))}}}))
    (root / "lib").mkdir()
    (root / "src" / "a.c").rename(root / "lib" / "a.c")
    check = subprocess.run([AUTOPASS, "db", "check"], cwd=root, capture_output=True, text=True)
    assert check.returncode == 0, check.stdout
    assert "src/a.c: moved to lib/a.c (the same source): its entry applies there" in \
        check.stdout and "1/1 entries apply" in check.stdout, check.stdout
    applied = subprocess.run([AUTOPASS, "apply", "--policy", "error", "--", "clang-19", "-O3",
                              "-c", "lib/a.c", "-o", "a.o"], cwd=root, capture_output=True,
                             text=True)
    assert applied.returncode == 0 and "1 command" in applied.stderr, applied.stderr
    # the same bytes under another name are another source (a copy, a generated twin),
    # for apply as for db check
    (root / "lib" / "a.c").rename(root / "lib" / "b.c")
    renamed = subprocess.run([AUTOPASS, "apply", "--", "clang-19", "-O3", "-c", "lib/b.c",
                              "-o", "b.o"], cwd=root, capture_output=True, text=True)
    assert "none of a source the database names" in renamed.stderr, renamed.stderr
    check = subprocess.run([AUTOPASS, "db", "check"], cwd=root, capture_output=True, text=True)
    assert check.returncode == 1 and "src/a.c: no such file" in check.stdout, check.stdout
    (root / "lib" / "b.c").rename(root / "lib" / "a.c")
    write(root / "lib" / "a.c", "int a(int x) { return x + 2; }\n")
    edited = subprocess.run([AUTOPASS, "apply", "--", "clang-19", "-O3", "-c", "lib/a.c",
                             "-o", "a.o"], cwd=root, capture_output=True, text=True)
    assert "none of a source the database names" in edited.stderr, edited.stderr
    check = subprocess.run([AUTOPASS, "db", "check"], cwd=root, capture_output=True, text=True)
    assert check.returncode == 1 and "src/a.c: no such file" in check.stdout, check.stdout
