"""`autopass verify`: the tuned build through the user's own build system, checked.

Three clean builds of [build].command: one plain (no database), two in apply mode.  The
two tuned binaries must be bit-identical (a reproducible release build); then the
tuned binary is measured against the plain one, interleaved, with the configured
statistics -- the speedup the user actually gets, with its interval.  The tree is left
with the tuned build.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass

from autopass_build.capture.build_env import apply_environment
from autopass_build.config import Config
from autopass_build.instruments.measure import Benchmark, Comparison, Progress, compare


class VerifyError(Exception):
    pass


@dataclass
class Verification:
    identical: bool
    plain: str              # copies of the binaries that were compared
    tuned: str
    comparison: Comparison | None


def _build(config: Config, env: dict[str, str], folder: str, progress: Progress) -> None:
    for what, command in (("clean", config.build.clean), ("build", config.build.command)):
        progress(f"{what}: {' '.join(command)}")
        done = subprocess.run(list(command), cwd=folder, env=env, capture_output=True)
        if done.returncode != 0:
            tail = done.stderr.decode("utf-8", "replace").strip().splitlines()[-3:]
            raise VerifyError(f"[build].{what} failed ({done.returncode}): " + " | ".join(tail))


def verify(config: Config, binary: str, db: str, root: str, progress: Progress,
           measure: bool = True) -> Verification:
    """`root`: the project root the database's paths are relative to (the record root)."""
    if not config.build.command or not config.build.clean:
        raise VerifyError('verify rebuilds from scratch: set [build].command and [build].clean '
                          'in autopass.toml, e.g. command = "make -j2", clean = "make clean"')
    folder = config.resolve(config.build.root)
    keep = tempfile.mkdtemp(prefix="autopass-verify-")
    copies = []
    try:
        for i, database in enumerate([os.path.join(keep, "none.json"), db, db]):
            env = apply_environment(root, database, "warn", os.path.join(keep, f"w{i}"))
            _build(config, env, folder, progress)
            if not os.path.isfile(binary):
                raise VerifyError(f"the build did not produce {binary}")
            copy = os.path.join(keep, f"b{i}", os.path.basename(binary))  # equal-length paths
            os.makedirs(os.path.dirname(copy))
            shutil.copy2(binary, copy)
            copies.append(copy)
        with open(copies[1], "rb") as a, open(copies[2], "rb") as b:
            identical = a.read() == b.read()
        comparison = None
        if measure:
            progress("measuring the tuned build against the plain one")
            comparison = compare(Benchmark.from_config(config), copies[0], {}, copies[1], {},
                                 progress)
        return Verification(identical, copies[0], copies[1], comparison)
    finally:
        shutil.rmtree(keep, ignore_errors=True)
