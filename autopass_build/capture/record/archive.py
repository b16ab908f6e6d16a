"""Reading `ar` archives (GNU, BSD and thin): member names and contents, in order.

The record step matches archive members to units by the hash of their bytes, so for
every static library a binary links we know which units it is made of.
"""

from __future__ import annotations

import os

from autopass_build.core.errors import AutopassError

MAGIC = b"!<arch>\n"
THIN_MAGIC = b"!<thin>\n"
HEADER_SIZE = 60
SYMBOL_TABLES = (b"/", b"/SYM64/", b"__.SYMDEF", b"__.SYMDEF SORTED")


class ArchiveFormatError(AutopassError):
    pass


class Member:
    """One archive member (a plain class: the wrapper imports this module)."""
    __slots__ = ("name", "data")

    def __init__(self, name: str, data: bytes):
        self.name, self.data = name, data


def _magic(path: str) -> bytes:
    try:
        with open(path, "rb") as handle:
            return handle.read(len(MAGIC))
    except OSError:
        return b""


def is_thin(path: str) -> bool:
    return _magic(path) == THIN_MAGIC


def is_archive(path: str) -> bool:
    return _magic(path) in (MAGIC, THIN_MAGIC)


def read_members(path: str) -> list[Member]:
    """Object members of the archive at `path`, in archive order (symbol tables left out)."""
    with open(path, "rb") as handle:
        blob = handle.read()
    thin = blob.startswith(THIN_MAGIC)
    if not (thin or blob.startswith(MAGIC)):
        raise ArchiveFormatError(f"{path}: not an ar archive")
    members: list[Member] = []
    long_names = b""
    offset = len(MAGIC)
    while offset + HEADER_SIZE <= len(blob):
        header = blob[offset:offset + HEADER_SIZE]
        if header[58:60] != b"`\n":
            raise ArchiveFormatError(f"{path}: bad member header at offset {offset}")
        raw_name = header[:16].rstrip(b" ")
        size = int(header[48:58].strip() or b"0")
        offset += HEADER_SIZE
        name, data_start = raw_name, offset
        if raw_name.startswith(b"#1/"):  # BSD: the name precedes the data
            name_len = int(raw_name[3:])
            name = blob[offset:offset + name_len].rstrip(b"\0")
            data_start, size = offset + name_len, size - name_len
        special = raw_name in SYMBOL_TABLES or raw_name == b"//"
        stored_inline = not thin or special
        if raw_name == b"//":
            long_names = blob[offset:offset + size]
        elif not special:
            if raw_name.startswith(b"/") and raw_name[1:].isdigit():
                start = int(raw_name[1:])
                end = long_names.find(b"\n", start)
                name = long_names[start:end if end >= 0 else None]
            name = name[:-1] if name.endswith(b"/") else name
            member_name = os.fsdecode(name)
            if thin:
                member_path = os.path.join(os.path.dirname(path), member_name)
                with open(member_path, "rb") as member_file:
                    data = member_file.read()
            else:
                data = blob[data_start:data_start + size]
            members.append(Member(member_name, data))
        if stored_inline:
            offset = data_start + size
            offset += offset % 2
    return members


def regular_archive(members: list[Member]) -> bytes:
    """A GNU `ar` archive holding `members` themselves (names kept, long ones in the
    `//` table), for keeping a thin archive: it names files outside itself (Meson makes
    every static library thin), which a later build rewrites or deletes."""
    table = bytearray()
    headers = []
    for member in members:
        raw = os.fsencode(member.name)
        if len(raw) < 16 and b"/" not in raw:
            headers.append(raw + b"/")
        else:
            headers.append(b"/%d" % len(table))
            table += raw + b"/\n"
    out = bytearray(MAGIC)
    if table:
        out += _header(b"//", len(table)) + table + (b"\n" if len(table) % 2 else b"")
    for name, member in zip(headers, members):
        out += _header(name, len(member.data)) + member.data
        if len(member.data) % 2:
            out += b"\n"
    return bytes(out)


def _header(name: bytes, size: int) -> bytes:
    return (name.ljust(16) + b"0".ljust(12) + b"0".ljust(6) + b"0".ljust(6)
            + b"644".ljust(8) + str(size).encode().ljust(10) + b"`\n")
