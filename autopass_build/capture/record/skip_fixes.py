"""What a user changes in the build so that skipped compiles are recorded: record's
summary, `units`, and the error of a command that found nothing to tune say it."""

from __future__ import annotations

from autopass_build.capture.compiler_args import (
    CLANG_REJECTS,
    EMBED_BITCODE,
    MODULES,
    PROFILE,
    SAVE_TEMPS,
)

FIXES = {
    PROFILE: "build without -fprofile-*: the pgo stage of `autopass tune` trains its own",
    MODULES: "build without -fmodules / C++ modules",
    CLANG_REJECTS: "the build compiles with gcc, and clang refused these commands (a "
                   "gcc-only option, -Werror with a gcc-only warning, code only gcc "
                   "accepts), so gcc built them; `autopass units` shows clang's error: "
                   "drop the option, or add clang's -Wno-<warning> to CFLAGS/CXXFLAGS, "
                   "to tune them",
    SAVE_TEMPS: "build without -save-temps",
    EMBED_BITCODE: "build without -fembed-bitcode",
}

def fixes(skips: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """(reason, what to change) for each reason the user can fix among `skips`, given as
    (reason, detail) pairs, in the order of the reasons."""
    details: dict[str, list[str]] = {}
    for reason, detail in skips:
        if reason in FIXES:
            details.setdefault(reason, []).append(detail)
    return [(reason, fix_for(reason, found)) for reason, found in sorted(details.items())]


def fix_for(reason: str, details: list[str]) -> str:
    """What to change for these skips: FIXES[reason], and for clang's refusals the
    -Wno- options its errors name (indent: "... [-Werror,-Wunused-but-set-variable]")."""
    fix = FIXES[reason]
    named = sorted({"-Wno-" + warning[2:] for detail in details
                    for warning in _warnings_named(detail)}) if reason == CLANG_REJECTS else []
    return fix + (f" (here: {' '.join(named)})" if named else "")


def _warnings_named(error: str) -> list[str]:
    """The warning options in the brackets that end a clang diagnostic."""
    if not error.endswith("]") or "[" not in error:
        return []
    inside = error[error.rindex("[") + 1:-1].split(",")
    return [w for w in inside if w.startswith("-W") and not w.startswith("-Werror")]
