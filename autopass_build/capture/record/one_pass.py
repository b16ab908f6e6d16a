"""Record mode's compile with the front end run once: the build's own compile, with a
pass plugin that writes the unit's IR as the optimization pipeline gets it.

    two passes   clang ARGS -c x.c -o x.o ; clang ARGS' -Xclang -disable-llvm-passes
                 -emit-llvm -o ir.bc      (the front end a second time: 2.2x a plain
                                           build of GEOS, whose compiles are mostly it)
    one pass     AUTOPASS_IR_OUT=ir.bc clang ARGS -c x.c -o x.o -fpass-plugin=save-ir.so

The plugin (pass_plugin.cpp, its IR-saving pass) only reads the module and invalidates nothing, so the
object, the dependency file and everything the compile prints are the plain compile's.
Making the object from the recorded IR instead (a second step, `clang -x ir`) was tried
first and is not always the plain object: names LLVM makes unique while optimizing
(`.Lstr.168` against `.Lstr.11`, in 3 of libpng's 34 units and in cppcheck's
valueflow.cpp) count on from where the front end left off, and a module read from
bitcode starts at 0.  Same code, other bytes: not the promise.

Only plain commands go this way: `-c` of one source (one IR file per call), no
`-MJ` (its compilation-database entry would list the plugin), no option that records
the command line in the object.  The plugin is built and proven once per installation
(native_builds.py) for the clang found there, and named in AUTOPASS_IR_PLUGIN; without it
(or for another compiler) every compile takes two passes, as before.  A compile that fails with the plugin is run again without it, so
that what the user sees of a failing compile is the plain compile's own.
"""

from __future__ import annotations

import os

from autopass_build.capture.compiler_args import COMPILE, Invocation, Skip
from autopass_build.capture.option_table import R_SIDE_OUTPUT
from autopass_build.capture.record.recorder import (
    IR_FAILED,
    Call,
    record_call,
    record_skip,
)
from autopass_build.capture.record.spool import Spool
from autopass_build.core.files import disk_full
from autopass_build.core.names import ENV_IR_OUT, ENV_IR_PLUGIN, ENV_IR_PLUGIN_FOR

# Options under which the compile would not be the plain one with the plugin added: the
# command line written into the object or a side file, or a second command line after
# `--` that the plugin's option would not reach.
RECORDS_COMMAND_LINE = ("-frecord-command-line", "-frecord-gcc-switches",
                        "-grecord-command-line", "-grecord-gcc-switches", "--")


def eligible(inv: Invocation, env: dict[str, str], compiler: str) -> str | None:
    """The plugin to compile `inv` with in one pass, or None: two passes.  It is built
    for one clang (a plugin is tied to its LLVM), so another compiler takes two."""
    plugin = env.get(ENV_IR_PLUGIN, "")
    if not plugin or not os.path.isabs(plugin) or not os.path.isfile(plugin) or \
            os.path.realpath(compiler) != env.get(ENV_IR_PLUGIN_FOR):
        return None
    if inv.mode != COMPILE or len(inv.sources) != 1 or inv.skipped_sources:
        return None
    for arg in inv.args:
        if arg.role == R_SIDE_OUTPUT or arg.tokens[0] in RECORDS_COMMAND_LINE:
            return None
    return plugin


def compile_and_record(call: Call, inv: Invocation, spool: Spool, plugin: str,
                       colour: list[str]) -> int | None:
    """Compile `inv` with the plugin and record its unit: the exit status, or None when
    the plain compile must run instead (nothing of this attempt is left then).
    `colour`: what keeps a terminal's colours in the output held back here."""
    ir_tmp = spool.new_tmp_path(".bc")
    try:
        done, out, err = call.host.buffered(
            call.compiler_path,
            [call.compiler_argv0] + colour + call.args + [f"-fpass-plugin={plugin}"],
            {**call.env, ENV_IR_OUT: ir_tmp})
        if done.status != 0:
            status = done.status if done.status < 0 else None   # a signal is not a retry
        else:
            call.host.write(out, err)
            _record(call, inv, spool, ir_tmp)
            status = 0
    finally:
        for leftover in (ir_tmp, ir_tmp + ".part"):
            if os.path.exists(leftover):
                os.unlink(leftover)
    return None if status is None else call.host.exit_like(status)


def _record(call: Call, inv: Invocation, spool: Spool, ir_tmp: str) -> None:
    """The unit into the store; a failure here is only a log line: the build is done."""
    source = inv.sources[0].path
    try:
        if not os.path.isfile(ir_tmp):   # the plugin could not write it (a full disk)
            said = f"IR of {source} not written by the record plugin" + (
                ": no space left on the store's disk" if disk_full(spool.dir) else "")
            spool.log(said)
            record_skip(spool, call, Skip(IR_FAILED, said, (source,)))
            return
        record_call(spool, call, inv, {0: spool.adopt_blob("ir", ir_tmp, ".bc")})
    except Exception as error:
        spool.log(f"record failed for {' '.join(call.args)[:500]}: {error!r}")
