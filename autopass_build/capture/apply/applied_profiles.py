"""Apply mode and the shipped profiles: whether a profile beside the database may be used
(its place, its hash: `shipped_file`), the PGO profile's flags for every compile, and
clang's notes on a profile out of date summed up in one warning.  Runs in every compile:
core only."""

from __future__ import annotations

import os

from autopass_build.capture.apply.to_apply import ToApply, refuse
from autopass_build.core import flags_db, pgo_profile
from autopass_build.core.apply_terms import ApplyPolicy
from autopass_build.core.files import hash_file
from autopass_build.core.flags_db import FlagsDb
from autopass_build.core.stage_flags import profile_use


def shipped_file(ref: flags_db.ProfileRef | None, path: str, what: str, tuned: str
                 ) -> tuple[str, str]:
    """(the file `ref` names beside the database at `path`, "") when it is there with
    its hash, else ("", why it cannot be used); `tuned` ends the message of a file that
    changed: what it was tuned with, and the fix."""
    if ref is None or os.path.isabs(ref.path) or ".." in ref.path.split("/"):
        return "", f"{path}: the {what} must lie beside the database"
    file = os.path.join(os.path.dirname(path), ref.path)
    folder = os.path.realpath(os.path.dirname(path))
    if os.path.islink(file) and not os.path.realpath(file).startswith(folder + os.sep):
        # what the build reads is what was reviewed beside the database, never a file
        # elsewhere a link points at (another user's, a later build's)
        return "", (f"the {what} {file} is a symbolic link to {os.path.realpath(file)}, "
                    "outside the database's folder: not used (put the file itself there)")
    try:
        if hash_file(file) != ref.hash:
            return "", f"{file} is not the {what} {tuned}"
    except OSError as error:
        return "", f"the {what} {file} cannot be used ({error.strerror})"
    return file, ""


def profile_decision(db: FlagsDb, path: str, policy: ApplyPolicy) -> ToApply:
    """The database's PGO profile for every compile, if it is the one tuned with."""
    if db.profile is None:
        return ToApply()
    file, refused = shipped_file(db.profile, path, "PGO profile",
                                 "the flags were tuned with (re-run autopass tune --pgo)")
    if refused:
        return refuse(refused, policy)
    # A source changed since training makes clang warn per compile; under the build's
    # -Werror that would fail it, so the warning stays a warning and we summarize it.
    return ToApply((profile_use(file),) + pgo_profile.NOT_ERRORS)


OUT_OF_DATE = "profile data may be out of date: "     # a front-end profile's words
# A compile the profile was not trained on (a test program, a tool beside the tuned
# binary) gets it for what it shares, and clang's notes on the rest are not news (an IR
# profile's are -Wbackend-plugin's):
UNTRAINED_QUIET = ("-Wno-profile-instr-unprofiled", "-Wno-profile-instr-out-of-date",
                   "-Wno-profile-instr-missing", "-Wno-backend-plugin")


def _warnings_generated(line: str) -> bool:
    """clang's closing count ("1 warning generated."), left over when the warnings it
    counted were taken out."""
    words = line.split()
    return len(words) == 3 and words[0].isdigit() and words[1] in ("warning", "warnings") \
        and words[2] == "generated."


def stale_profile(stderr: bytes, source: str, policy: ApplyPolicy, lto: bool = False
                  ) -> tuple[bytes, ToApply | None]:
    """clang's out-of-date profile diagnostics taken out of a compile's stderr (a
    front-end profile's summary, an IR profile's line per function), and one warning
    (an error under the error policy) that says what they mean and the fix.  `lto`: the
    compile makes LTO bitcode, whose context-sensitive profile the link uses: what it
    says of that part is taken out and not counted (pgo_profile.lto_compile)."""
    text = stderr.decode("utf-8", "replace")
    if OUT_OF_DATE not in text and pgo_profile.MISMATCH not in text:
        return stderr, None
    kept, counts = [], []
    changed = pgo_profile.Said(lto)
    for line in text.splitlines(keepends=True):
        if OUT_OF_DATE in line:   # "...: of 3 functions, 1 has mismatched data that..."
            counts.append(line.split(OUT_OF_DATE, 1)[1].split(" that ")[0].strip())
        elif pgo_profile.MISMATCH in line:
            changed.read(line.encode())
        else:
            kept.append(line)
    if not counts and not changed:     # the context-sensitive part's, under LTO only
        return _without_count_line(kept), None
    if changed:
        counts.append(changed.text())
    why = (f"{source}: the PGO profile is out of date ({'; '.join(counts)}): the source "
           "changed since training, and clang ignores the profile for those functions; "
           "retrain it in the build with `autopass apply --train`")
    return _without_count_line(kept), refuse(why, policy)


def _without_count_line(kept: list[str]) -> bytes:
    """What is left of a compile's stderr, without clang's closing count of warnings
    when none of them is left."""
    if not any("warning:" in line or "error:" in line for line in kept):
        kept = [line for line in kept if not _warnings_generated(line)]
    return "".join(kept).encode()
