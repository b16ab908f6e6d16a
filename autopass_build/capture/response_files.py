"""`@file` response files, read the way gcc and clang read them (GNU quoting).

The classifier expands them only to see the command; the compiler gets them unchanged.
"""

from __future__ import annotations

import os

from autopass_build.core.errors import AutopassError


class ResponseFileError(AutopassError):
    pass


def split_response_text(text: str) -> list[str]:
    """gcc/clang (GNU) response-file quoting: whitespace separates; '' "" and \\ quote."""
    tokens: list[str] = []
    current: list[str] = []
    in_token = False
    quote = ""
    i = 0
    while i < len(text):
        ch = text[i]
        if quote:
            if ch == quote:
                quote = ""
            elif ch == "\\" and i + 1 < len(text):
                i += 1
                current.append(text[i])
            else:
                current.append(ch)
        elif ch in "'\"":
            quote, in_token = ch, True
        elif ch == "\\" and i + 1 < len(text):
            i += 1
            current.append(text[i])
            in_token = True
        elif ch.isspace():
            if in_token:
                tokens.append("".join(current))
                current, in_token = [], False
        else:
            current.append(ch)
            in_token = True
        i += 1
    if in_token:
        tokens.append("".join(current))
    return tokens


def read_response_file(name: str, cwd: str) -> list[str]:
    path = os.path.join(cwd, name)
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError as error:
        raise ResponseFileError(f"cannot read response file {name!r}: {error.strerror}")
    return split_response_text(data.decode("utf-8", "surrogateescape"))
