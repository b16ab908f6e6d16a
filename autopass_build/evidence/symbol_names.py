"""Function names as people read them, for display only: demangled C++ names, cut to a
table's width.  Everything inside autopass keeps the mangled names objects and remarks
use."""

from __future__ import annotations


def readable(names: list[str]) -> dict[str, str]:
    """C++ names as people read them ('LZ_encoder::get_match_pairs(Pair*)' for
    '_ZN10LZ_encoder15get_match_pairsEPNS_4PairE'), for display only: everything
    inside autopass keeps the mangled name the objects and remarks use.  Names stay as
    they are where llvm-cxxfilt is missing or fails."""
    import subprocess

    from autopass_build.core import toolchain

    cxxfilt = toolchain.find_tool("llvm-cxxfilt")
    if not cxxfilt or not names:
        return {}
    try:
        done = subprocess.run([cxxfilt], input="\n".join(names) + "\n", capture_output=True,
                              text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return {}
    shown = done.stdout.splitlines()
    return dict(zip(names, shown)) if done.returncode == 0 and len(shown) == len(names) else {}


def shortened(name: str, width: int = 48) -> str:
    """A readable name cut to about `width` for a table: C++ template arguments, then
    parameter lists, become "…" ('std::_Rb_tree<…>::_M_erase(…)' for a 300-character
    jsoncpp name) before the end is cut.  Display only."""
    for opening, closing in (("<", ">"), ("(", ")")):
        if len(name) <= width:
            return name
        name = _collapsed(name, opening, closing)
    return name if len(name) <= width else name[:width - 1] + "…"


def _collapsed(name: str, opening: str, closing: str) -> str:
    """`name` with every outermost opening...closing span replaced by opening…closing
    ("operator<" and other unbalanced uses are left as they are)."""
    out, depth, start = [], 0, 0
    for i, char in enumerate(name):
        if char == opening:
            if depth == 0:
                out.append(name[start:i + 1])
            depth += 1
        elif char == closing and depth:
            depth -= 1
            if depth == 0:
                out.append("…")
                start = i
    if depth:      # unbalanced: keep the name as it was
        return name
    return "".join(out) + name[start:]
