"""Whether a link takes LLVM bitcode: then apply mode gives it the LTO link of the
database's stages (a shared library of the tuned binary, linked by libtool, must get the
LTO link too).  Read by hand: the wrapper runs without site-packages (no pyelftools)."""

from __future__ import annotations

BITCODE = b"BC\xc0\xde"
FAT_SECTION = b".llvm.lto\x00"      # the section name, in the object's string table


def links_bitcode(parsed, cwd: str) -> bool:
    """Whether a link's objects or archive members (its own -L libraries included) carry
    LLVM bitcode: bitcode files, or the fat objects the LTO stages make (a shared library
    of the tuned binary, linked by libtool, must get the LTO link too)."""
    from autopass_build.capture.record import archive
    from autopass_build.capture.record.recorder import link_input_paths

    for path in link_input_paths(parsed, cwd, static=True):
        try:
            if archive.is_archive(path):
                if any(carries_bitcode(m.data) for m in archive.read_members(path)):
                    return True
            else:
                with open(path, "rb") as handle:
                    if carries_bitcode(handle.read()):
                        return True
        except (OSError, ValueError):
            continue
    return False


def carries_bitcode(data: bytes) -> bool:
    """LLVM bitcode, or an ELF object with its .llvm.lto section (-ffat-lto-objects)."""
    if data[:4] == BITCODE:
        return True
    return data[:4] == b"\x7fELF" and FAT_SECTION in data and ".llvm.lto" in _section_names(data)


def _section_names(data: bytes) -> list[str]:
    """The section names of a 64-bit little-endian ELF file (x86-64), read by hand: the
    wrapper runs without site-packages, so pyelftools is not there."""
    import struct

    if len(data) < 64 or data[4] != 2 or data[5] != 1:    # ELFCLASS64, ELFDATA2LSB
        return []
    try:
        shoff, = struct.unpack_from("<Q", data, 0x28)
        entsize, count, names_index = struct.unpack_from("<HHH", data, 0x3A)
        names_offset, names_size = struct.unpack_from("<QQ", data,
                                                      shoff + names_index * entsize + 0x18)
        table = data[names_offset:names_offset + names_size]
        result = []
        for i in range(count):
            name_at, = struct.unpack_from("<I", data, shoff + i * entsize)
            result.append(table[name_at:table.index(b"\0", name_at)].decode("latin-1"))
        return result
    except (struct.error, ValueError):
        return []
