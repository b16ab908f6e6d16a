"""What autopass compiles for itself with the clang it finds, once per installation
and source: the native launcher (launcher.c: `autopass-cc` without a Python start per
compile) and the pass plugin (pass_plugin.cpp: record's IR in one pass, a unit's
inventory, decisions carried in the IR), each named after the hash of its source and
used only once it proves out."""

from __future__ import annotations

import os

from autopass_build.capture.plan import LAUNCHER_STEM
from autopass_build.core import toolchain
from autopass_build.core.files import hash_bytes
from autopass_build.core.names import ENV_IR_OUT

HERE = os.path.dirname(os.path.abspath(__file__))
LAUNCHER_SOURCE = os.path.join(HERE, "launcher.c")
PLUGIN_SOURCE = os.path.join(HERE, "pass_plugin.cpp")
# What the plugin is proven on: code whose IR names are made unique while optimizing
# (string literals, printf -> puts), templates, exceptions and debug information.
PLUGIN_PROBE = """#include <cstdio>
#include <stdexcept>
#include <vector>
template <class T> T pick(const std::vector<T>& v, unsigned i) {
  if (i >= v.size()) throw std::out_of_range("pick");
  return v[i];
}
int report(int x) { printf("x\\n"); printf("y\\n"); return pick(std::vector<int>{x, 2}, 1); }
"""


def native_launcher(bin_dir: str) -> str | None:
    """The launcher compiled from launcher.c into `bin_dir` (its file name, named after
    the source's hash, made once), or None where it cannot be compiled here."""
    clang = toolchain.find_tool("clang", exclude=frozenset({os.path.realpath(bin_dir)}))
    return _compiled(bin_dir, LAUNCHER_SOURCE, LAUNCHER_STEM[:-1], "",
                     lambda out: [clang or "clang", "-O2", "-o", out, LAUNCHER_SOURCE])


def pass_plugin(bin_dir: str) -> tuple[str, str] | None:
    """(the path of autopass's pass plugin, the real path of the clang it was built for
    and proven with), or None: without llvm-config and LLVM's headers (llvm-19-dev), or
    if it does not prove out.  Then record compiles twice, as before, and decisions
    carried in the IR (core/decisions.py) cannot be applied."""
    clang = toolchain.find_tool("clang++", exclude=frozenset({os.path.realpath(bin_dir)}))
    if clang is None:
        return None
    # The llvm-config of that clang's own LLVM (/usr/lib/llvm-19/bin/): the plugin must
    # be built against the headers of the LLVM that loads it.
    config = os.path.join(os.path.dirname(os.path.realpath(clang)), "llvm-config")
    if not toolchain.is_executable_file(config):
        return None
    from autopass_build.core import proc

    flags = proc.run_captured([config, "--cxxflags"], bin_dir, timeout=30)
    real = os.path.realpath(clang)
    if flags.status != 0:
        return None
    name = _compiled(bin_dir, PLUGIN_SOURCE, "autopass-passes", real,
                     lambda out: [clang, "-shared", "-fPIC", "-O2",
                                  *flags.stdout.decode().split(), "-o", out, PLUGIN_SOURCE],
                     suffix=".so", proof=lambda path: _plugin_proves_out(clang, path))
    return (os.path.join(bin_dir, name), real) if name else None


def _plugin_proves_out(clang: str, plugin: str) -> bool:
    """A small C++ unit compiled with the plugin gives the same object as without it,
    and its IR: else the plugin is not used."""
    import tempfile

    from autopass_build.core import proc

    with tempfile.TemporaryDirectory(prefix="autopass-plugin-") as folder:
        source = os.path.join(folder, "probe.cpp")
        with open(source, "w") as handle:
            handle.write(PLUGIN_PROBE)
        plain = [clang, "-O2", "-g", "-c", source, "-o", os.path.join(folder, "plain.o")]
        ir = os.path.join(folder, "probe.bc")
        saved = [clang, "-O2", "-g", "-c", source, "-o", os.path.join(folder, "saved.o"),
                 f"-fpass-plugin={plugin}"]
        env = {**os.environ, ENV_IR_OUT: ir}
        if proc.run_captured(plain, folder).status or \
                proc.run_captured(saved, folder, env).status:
            return False
        with open(os.path.join(folder, "plain.o"), "rb") as a, \
                open(os.path.join(folder, "saved.o"), "rb") as b:
            same = a.read() == b.read()
        return same and os.path.isfile(ir) and open(ir, "rb").read(4) == b"BC\xc0\xde"


def _compiled(bin_dir: str, source: str, stem: str, salt: str, argv, suffix: str = "",
              proof=None) -> str | None:
    """A program or library built from `source` into `bin_dir` once: its file name,
    named after the hash of the source and `salt`, or None where it cannot be built (or
    `proof` of the built file fails)."""
    try:
        with open(source, "rb") as handle:
            name = f"{stem}-{hash_bytes(handle.read() + salt.encode())[:12]}{suffix}"
    except OSError:
        return None
    path = os.path.join(bin_dir, name)
    if os.access(path, os.R_OK):
        return name
    from autopass_build.core import proc

    tmp = f"{path}.{os.getpid()}.tmp{suffix}"
    try:
        done = proc.run_captured(argv(tmp), bin_dir, timeout=300)
        if done.status != 0 or not os.path.isfile(tmp) or (proof and not proof(tmp)):
            return None
        os.replace(tmp, path)
        return name
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
