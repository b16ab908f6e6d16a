"""`apply --train`'s builds, incremental: their compiles go through ccache.

The instrumented build compiles every unit with -fprofile-instr-generate and nothing of
the database, so its objects depend on the source and the command alone: exactly what a
compiler cache keys on.  A release built every day from a source that changed in a few
files compiles only those few instrumented; the rest come from the cache.  ccache (not a
cache of our own) because it already knows what an object depends on: the headers, the
depfile a build asks for, the compiler's identity, the options that make a compile
uncacheable, and the content of the profile a compile reads.

The final build goes through it too, but hits only when the profile just trained is the
last one byte for byte (the same source trained again: counts are held, so the profile
repeats).  A change to any counted code changes the profile, and a profile reaches
every unit's code through its summary (what counts as hot), so every key changes.

The cache is autopass's own folder (never the user's ccache's), $AUTOPASS_TRAIN_CACHE
or ~/.cache/autopass/train-ccache, ccache's size limit its own (5 GB unless set there);
AUTOPASS_TRAIN_CACHE=off compiles everything.  A CI job keeps it between runs as it
would keep any cache.  The wrapper side imports nothing heavy (the import-cost test).
"""

from __future__ import annotations

import os

from autopass_build.core.names import ENV_TRAIN_CACHE, ENV_TRAIN_CCACHE

STATS_LOG = "ccache-stats"      # beside the build's tally: ccache's counters per compile
_HIT = ("direct_cache_hit", "preprocessed_cache_hit")
_MISS = "cache_miss"
OFF = "off"


def folder(env: dict[str, str]) -> str:
    """The cache folder the user chose, or the default; "" when turned off."""
    chosen = env.get(ENV_TRAIN_CACHE, "")
    if chosen.lower() in (OFF, "0", "no", "false"):
        return ""
    if chosen:
        return os.path.abspath(os.path.expanduser(chosen))
    from autopass_build.core.files import user_cache_dir

    return user_cache_dir("train-ccache")


def through_ccache(compiler: str, argv: list[str], env: dict[str, str],
                   tally_path: str | None) -> tuple[str, list[str], dict[str, str]]:
    """A compile of a --train build as ccache's command (the program, argv, env), or as
    it was when this build has no cache.  The user's own CCACHE_* settings are
    left out: they are for their cache (and the build turns it off), not ours."""
    ccache, cache = env.get(ENV_TRAIN_CCACHE, ""), env.get(ENV_TRAIN_CACHE, "")
    if not ccache or not cache:
        return compiler, argv, env
    child = {k: v for k, v in env.items() if not k.startswith("CCACHE_")}
    child["CCACHE_DIR"] = cache
    if tally_path:
        child["CCACHE_STATSLOG"] = os.path.join(os.path.dirname(tally_path), STATS_LOG)
    return ccache, ["ccache", compiler] + argv[1:], child


def hits(work_dir: str) -> tuple[int, int]:
    """(compiles the cache answered, compiles it did not) in a build's stats log."""
    try:
        with open(os.path.join(work_dir, STATS_LOG), encoding="utf-8",
                  errors="replace") as handle:
            lines = [line.strip() for line in handle]
    except OSError:
        return 0, 0
    return sum(line in _HIT for line in lines), sum(line == _MISS for line in lines)
