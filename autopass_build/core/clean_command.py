"""How to bring a tree back to clean, read from the command that builds it.

`autopass verify` builds from scratch, so `autopass init` writes a [build].clean next to
the recorded [build].command.  `make clean` is right for a Makefile and wrong for CMake
or Meson with Ninja (no Makefile there: verify then stops).  The last build tool the
command runs decides, with its build folder: `make -C d -f m` -> `make -C d -f m clean`, `ninja -C
d` -> `ninja -C d -t clean`, `cmake --build d` -> `cmake --build d --target clean`,
`meson compile -C d` -> `meson compile -C d --clean`, `scons` -> `scons -c`, `python3
./waf build` -> `python3 ./waf clean`, after the same `cd`s as the build.  Anything else:
no guess.
"""

from __future__ import annotations

import os
import shlex

_SEPARATORS = frozenset({"&&", "||", ";", "|", "&", "(", ")", ";;"})


def clean_command(build: str | list[str]) -> str | None:
    """The clean command for `build` (a shell script or an argument vector), or None
    when no build tool in it is known."""
    words = _words(build)
    guess = None
    folder = ""                        # where earlier `cd`s left the script
    for command in _commands(words):
        if os.path.basename(command[0]) == "cd" and len(command) == 2:
            folder = os.path.normpath(os.path.join(folder, command[1]))
            continue
        clean = _clean_for(command)
        if clean:
            guess = f"cd {shlex.quote(folder)} && {clean}" if folder else clean
    return guess


def make_dry_run(clean: str) -> tuple[str, list[str]] | None:
    """(folder, `make -n ... clean`) for a clean guessed for make: run, it says whether
    the makefile has a `clean` target at all (duktape's Makefile.cmdline has none, and
    verify stopped on the guess); None for any other clean."""
    commands = _commands(_words(clean))
    folder = ""
    if len(commands) == 2 and commands[0][0] == "cd" and len(commands[0]) == 2:
        folder = commands.pop(0)[1]
    if len(commands) != 1 or commands[0][0] != "make" or commands[0][-1] != "clean":
        return None
    return folder, ["make", "-n", *commands[0][1:]]


def _words(build: str | list[str]) -> list[str]:
    if not isinstance(build, str):
        return list(build)
    try:
        lexer = shlex.shlex(build, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        return list(lexer)
    except ValueError:                 # unbalanced quotes: a script we cannot read
        return []


def _commands(words: list[str]) -> list[list[str]]:
    commands: list[list[str]] = [[]]
    for word in words:
        if word in _SEPARATORS or word.startswith(">") or word.startswith("<"):
            commands.append([])
        else:
            commands[-1].append(word)
    stripped = (_without_assignments(c) for c in commands)
    return [c for c in stripped if c]      # `X=1;` alone is no command


def _without_assignments(command: list[str]) -> list[str]:
    """`CC=x make` -> `make`; redirection targets (`>/dev/null`) were split off already."""
    i = 0
    while i < len(command) and "=" in command[i] and not command[i].startswith("-"):
        i += 1
    return command[i:]


def _folder(command: list[str], option: str) -> list[str]:
    """[option, folder] when `command` names a build folder with `option`."""
    for i, word in enumerate(command[:-1]):
        if word == option:
            return [option, command[i + 1]]
    return []


_MAKE_VALUED = ("-C", "-f", "--directory", "--file", "--makefile")


def _make_choices(words: list[str]) -> list[str]:
    """What makes `make` read the same makefile in the same folder with the same
    variables: -C, -f (7-Zip: `make -C Bundles/Alone -f ../../cmpl_clang.mak`; its own
    `makefile` there is for nmake) and VAR=value (`make O=out`); not -j or targets."""
    kept: list[str] = []
    i = 0
    while i < len(words):
        word = words[i]
        if word in _MAKE_VALUED and i + 1 < len(words):
            kept += words[i:i + 2]
            i += 2
            continue
        joined = word[:2] in ("-C", "-f") and len(word) > 2 or \
            word.startswith(tuple(f"{o}=" for o in _MAKE_VALUED[2:]))
        if joined or "=" in word and not word.startswith("-"):
            kept.append(word)
        i += 1
    return kept


def _clean_for(command: list[str]) -> str | None:
    tool = os.path.basename(command[0])
    if tool in ("make", "gmake"):
        return shlex.join(["make", *_make_choices(command[1:]), "clean"])
    if tool.startswith("ninja"):
        return shlex.join([tool, *_folder(command, "-C"), "-t", "clean"])
    if tool == "cmake" and "--build" in command:
        folder = command[command.index("--build") + 1:command.index("--build") + 2]
        return shlex.join(["cmake", "--build", *folder, "--target", "clean"]) if folder else None
    if tool == "meson" and len(command) > 1 and command[1] == "compile":
        return shlex.join(["meson", "compile", *_folder(command, "-C"), "--clean"])
    if tool == "scons":
        return shlex.join(["scons", *_folder(command, "-C"), "-c"])
    waf = _waf(command)
    return shlex.join([*waf, "clean"]) if waf else None


def _waf(command: list[str]) -> list[str]:
    """How `command` runs waf (`./waf build`, `python3 ./waf build -j2`: aubio), else []."""
    if os.path.basename(command[0]) == "waf":
        return command[:1]
    if os.path.basename(command[0]).startswith("python") and len(command) > 1 \
            and os.path.basename(command[1]) == "waf":
        return command[:2]
    return []
