"""Does replaying a unit's IR with its original flags give back the object the build made?

Identical bytes is the common case (measured: every unit of the examples, Lua and
libpng).  Otherwise the sections that are loaded at run time (code, data, their
relocations) are compared one by one: if those match, only debug or metadata
differs and the unit still counts as reproduced; if not, the reason names the first
section that differs, and replay compiles that unit from source instead.
"""

from __future__ import annotations

import io
import os
from dataclasses import dataclass

from elftools.elf.constants import SH_FLAGS
from elftools.elf.elffile import ELFFile

from autopass_build.candidates.replay import Replayer
from autopass_build.capture.record import archive
from autopass_build.core.files import hash_bytes, hash_file
from autopass_build.core.outcome import EvaluationError
from autopass_build.store.build_records import UnitRecord
from autopass_build.store.index import Store


@dataclass
class FidelityResult:
    unit: UnitRecord
    reproduced: bool
    reason: str  # "" when the bytes are identical


def _runtime_sections(elf: ELFFile) -> dict[str, bytes]:
    """Loaded sections and the relocations that apply to them."""
    loaded = {s.name for s in elf.iter_sections() if s["sh_flags"] & SH_FLAGS.SHF_ALLOC}
    out = {}
    for section in elf.iter_sections():
        target = section.name.removeprefix(".rela").removeprefix(".rel")
        if section.name in loaded or (section.name != target and target in loaded):
            out[section.name] = b"" if section["sh_type"] == "SHT_NOBITS" else section.data()
    return out


BITCODE = b"BC\xc0\xde"


def compare_objects(replayed: bytes, recorded: bytes) -> tuple[bool, str]:
    """(same code and data, why not / what differs)."""
    if replayed == recorded:
        return True, ""
    if replayed[:4] == recorded[:4] == BITCODE:
        return _compare_bitcode(replayed, recorded)
    try:
        a = _runtime_sections(ELFFile(io.BytesIO(replayed)))
        b = _runtime_sections(ELFFile(io.BytesIO(recorded)))
    except Exception as error:  # not ELF: only bytes can be compared
        return False, f"objects differ and cannot be parsed as ELF ({error})"
    for name in sorted(set(a) | set(b)):
        if name not in a or name not in b:
            return False, f"section {name} only in the {'recorded' if name in b else 'replayed'} object"
        if a[name] != b[name]:
            return False, f"{name} differs"
    return True, "code and data identical; debug info or metadata differ"


def _compare_bitcode(replayed: bytes, recorded: bytes) -> tuple[bool, str]:
    """The objects of a build that is LTO already (-flto=thin): LLVM bitcode, which a
    compile of the IR writes with the names of local values that the compile of the
    source drops, and with the metadata kinds its context knew (the linked program is the
    same).  Compared as IR text without those names."""
    import tempfile

    from autopass_build.core import proc, toolchain

    opt = toolchain.find_tool("opt")
    if opt is None:
        return False, "bitcode objects differ (" + toolchain.not_found("opt") + ")"
    with tempfile.TemporaryDirectory(prefix="autopass-fidelity-") as folder:
        texts = []
        for name, data in (("replayed", replayed), ("recorded", recorded)):
            path = os.path.join(folder, "unit.bc")     # one name: the text names its file
            with open(path, "wb") as handle:
                handle.write(data)
            done = proc.run_captured([opt, "--discard-value-names", "-passes=verify", "-S",
                                      path, "-o", "-"], folder, output_cap=1 << 30)
            if done.status != 0:
                return False, f"the {name} bitcode cannot be read by opt"
            texts.append(done.stdout)
    if texts[0] != texts[1]:
        return False, "bitcode objects differ beyond the names of local values"
    return True, "the same bitcode but for the names of local values"


def check(store: Store, units: list[UnitRecord] | None = None,
          progress=None) -> list[FidelityResult]:
    """Replay each unit with its original flags, compare, and remember the verdicts."""
    replayer = Replayer(store, trust_fidelity=False)  # judge the IR replay itself
    units = units if units is not None else store.units()
    results = []
    for index, unit in enumerate(units):
        if progress:
            progress(index, len(units), unit)
        recorded = recorded_object(store, unit)
        if recorded is None:
            reason = ("compiled and linked in one call: no object to compare" if unit.output is None
                      else "the recorded object is no longer available")
            results.append(FidelityResult(unit, True, f"not checked: {reason}"))
            continue
        try:
            with open(replayer.object_for(unit), "rb") as handle:
                ok, reason = compare_objects(handle.read(), recorded)
        except EvaluationError as error:
            ok, reason = False, f"{error.outcome}: {error}"
        results.append(FidelityResult(unit, ok, reason))
    store.record_fidelity([(r.unit.id, r.unit.ir_hash, r.reproduced, r.reason)
                           for r in results])
    return results


def recorded_object(store: Store, unit: UnitRecord) -> bytes | None:
    """The bytes of the object the build made for `unit`, wherever they were kept."""
    if not unit.object_hash:
        return None
    try:
        return store.spool.read_blob("obj", unit.object_hash, ".o")
    except FileNotFoundError:
        pass
    if unit.output and os.path.isfile(unit.output) and hash_file(unit.output) == unit.object_hash:
        with open(unit.output, "rb") as handle:
            return handle.read()
    for record in store.archives():
        for index, (_, digest) in enumerate(record.members):
            if digest == unit.object_hash:
                if store.has_blob("ar", record.hash, ".a"):
                    data = archive.read_members(store.blob_file("ar", record.hash, ".a")
                                                )[index].data
                    if hash_bytes(data) == digest:
                        return data
    return None
