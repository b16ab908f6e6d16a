"""`apply --train`'s builds, incremental: their compiles go through ccache.

The instrumented build compiles every unit with -fprofile-generate and nothing of
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

ccache runs in its depend mode: on a miss it does not run the preprocessor, but reads
the includes from the dependency file the compile writes (7-Zip's instrumented build:
a miss cost 19 % over no cache in ccache's usual mode, 3 % in depend mode).  A compile
that writes none is given one in the build's scratch folder, deleted after it.

The cache is autopass's own folder (never the user's ccache's), $AUTOPASS_TRAIN_CACHE
or ~/.cache/autopass/train-ccache, ccache's size limit its own (5 GB unless set there);
AUTOPASS_TRAIN_CACHE=off compiles everything.  A CI job keeps it between runs as it
would keep any cache.  The wrapper side imports nothing heavy (the import-cost test).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

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


@dataclass(frozen=True)
class Command:
    """A compile as it runs: through ccache or not."""
    program: str
    argv: list[str]
    env: dict[str, str]
    depfile: str = ""          # the dependency file we added, to delete after the compile

    def clean_up(self) -> None:
        """After the compile: the dependency file we added is ours, not the build's."""
        if self.depfile:
            try:
                os.unlink(self.depfile)
            except OSError:
                pass            # the compile never wrote it


def through_ccache(compiler: str, argv: list[str], env: dict[str, str],
                   tally_path: str | None) -> Command:
    """A compile of a --train build as ccache's command, or as it was when this build
    has no cache.  The user's own CCACHE_* settings are left out: they are for their
    cache (and the build turns it off), not ours."""
    ccache, cache = env.get(ENV_TRAIN_CCACHE, ""), env.get(ENV_TRAIN_CACHE, "")
    if not ccache or not cache or not tally_path:
        return Command(compiler, argv, env)
    scratch = os.path.dirname(tally_path)
    child = {k: v for k, v in env.items() if not k.startswith("CCACHE_")}
    child.update(CCACHE_DIR=cache, CCACHE_DEPEND="1",
                 CCACHE_STATSLOG=os.path.join(scratch, STATS_LOG))
    depfile = ""
    if not any(a in _DEPFILE or a.startswith(_DEPFILE_WP) for a in argv[1:]):
        depfile = os.path.join(scratch, f"dep-{os.getpid()}-{os.urandom(6).hex()}.d")
        argv = argv + ["-MD", "-MF", depfile]
    return Command(ccache, ["ccache", compiler] + argv[1:], child, depfile)


_DEPFILE = ("-MD", "-MMD")                  # a compile that writes its dependency file
_DEPFILE_WP = ("-Wp,-MD,", "-Wp,-MMD,")


def hits(work_dir: str) -> tuple[int, int]:
    """(compiles the cache answered, compiles it did not) in a build's stats log."""
    try:
        with open(os.path.join(work_dir, STATS_LOG), encoding="utf-8",
                  errors="replace") as handle:
            lines = [line.strip() for line in handle]
    except OSError:
        return 0, 0
    return sum(line in _HIT for line in lines), sum(line == _MISS for line in lines)
