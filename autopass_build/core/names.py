"""Names and defaults defined once: files, folders, environment variables, choices.

Every other module imports these instead of spelling the literal again, so a rename is
one line here.  Imported by the compiler wrapper in every compile: constants only.
"""

from __future__ import annotations

# Files and folders.
STORE_DIRNAME = ".autopass"                  # the store, beside the project's sources
FLAGS_DB_NAME = "autopass.flags.json"        # the flags database, beside autopass.toml
CONFIG_NAME = "autopass.toml"
PROFILE_NAME = "autopass.profdata"           # the PGO profile shipped beside the database
BOLT_PROFILE_NAME = "autopass.fdata"         # the BOLT profile shipped beside the database
BOLT_STALE_NAME = "autopass.bolt.yaml"      # ... as YAML, for a later build (stale inference)
# The flags database's format version.  2: the cspgo and layout stages, decisions carried
# in the IR; a schema-1 database (no such parts) means under 2 what it meant, and is read.
FLAGS_DB_SCHEMA = 2
FLAGS_DB_OLDEST = 1
RUNS_DIR = "runs"                            # tuning runs, under the store

# Environment variables the wrapper reads (set by `autopass record`/`apply`, or by hand).
ENV_STORE = "AUTOPASS_STORE"
ENV_ROOT = "AUTOPASS_ROOT"
ENV_MODE = "AUTOPASS_MODE"                   # record (default when a store is found) | apply | off
ENV_GUARD = "AUTOPASS_WRAPPER_ACTIVE"        # set for the real compiler: recursion guard
ENV_MASQUERADE_DIR = "AUTOPASS_MASQUERADE_DIR"
ENV_FLAGS_DB = "AUTOPASS_FLAGS_DB"
ENV_APPLY_POLICY = "AUTOPASS_APPLY_POLICY"
ENV_APPLY_TALLY = "AUTOPASS_APPLY_TALLY"     # a file: one line per command given tuned flags
ENV_IR_TIMEOUT = "AUTOPASS_IR_TIMEOUT"
ENV_SERVER = "AUTOPASS_SERVER"               # the socket of the wrapper's server (capture/server.py)
# autopass-cc's service calls (capture/entry.py), for cmake/AutoPass.cmake and the
# launcher: serve the launchers of a folder on demand, write the native launcher into a
# build folder, name record's IR-saving plugin
SERVE_OPTION, LAUNCHER_OPTION, IR_PLUGIN_OPTION = (
    "--autopass-serve", "--autopass-launcher", "--autopass-ir-plugin")
ENV_IR_PLUGIN = "AUTOPASS_IR_PLUGIN"         # record's IR-saving pass plugin (capture/record/one_pass.py)
ENV_IR_PLUGIN_FOR = "AUTOPASS_IR_PLUGIN_FOR"  # the real path of the clang it was built for
ENV_IR_OUT = "AUTOPASS_IR_OUT"               # where that plugin writes one compile's IR
ENV_RECORD_SESSION = "AUTOPASS_RECORD_SESSION"   # a file: what one `autopass record` recorded
ENV_CC = "AUTOPASS_CC"
ENV_CXX = "AUTOPASS_CXX"
# The compiler a build reading $CC/$CXX would have used had autopass not set them (the
# user's own, else cc/c++): the wrapper hands it a command clang refuses (F36).
ENV_FALLBACK_CC = "AUTOPASS_FALLBACK_CC"
ENV_FALLBACK_CXX = "AUTOPASS_FALLBACK_CXX"
ENV_MODEL = "AUTOPASS_MODEL"
ENV_REPLAY_CC = "AUTOPASS_REPLAY_CC"
ENV_BOLT = "AUTOPASS_BOLT"                   # llvm-bolt to use (else found beside clang)
ENV_TRAIN_PHASE = "AUTOPASS_TRAIN_PHASE"     # `apply --train`'s build: instrument | final
# `apply --train`'s instrumented compiles through ccache (capture/apply/train_cache.py): the
# user's choice of its folder ("off": none), and, in the build, ccache's path
ENV_TRAIN_CACHE = "AUTOPASS_TRAIN_CACHE"
ENV_TRAIN_CCACHE = "AUTOPASS_TRAIN_CCACHE"

# Choices, each listed once; the CLI's `choices=` and the config's checks read them.
WRAPPER_MODES = ("record", "apply", "off")

# apply mode's policy and `apply --train`'s phases: core/apply_terms.py (enums, which
# the record path must not import)
METRICS = ("wall", "cpu", "user", "instructions", "cycles")
AGENT_BACKENDS = ("rules", "openai", "replay")
DEFAULT_STRATEGY = "agent"                   # [tune].strategy and `autopass tune`'s default
# the strategies (tuning/strategies/, which a test holds to this list)
STRATEGY_NAMES = ("agent", "random", "greedy", "ga", "de", "pso")
# whole-program stages (candidates/stages.py)
STAGES = ("pgo", "cspgo", "lto", "thinlto", "direct", "layout", "exttsp", "inline", "bandwidth",
          "bolt")
# ... and what a database may list: native is tried with `tune --native` alone (consent
# to a build that runs on this CPU family only), never by default.
SHIPPED_STAGES = STAGES + ("native",)
