"""The options a gcc/clang command line can hold, as far as classifying it needs: the
role each argument plays, and one sorted table of the options with property bits.
Runs in every compile (imported by the wrapper): constants and one lookup only.
"""

from __future__ import annotations

# Roles of arguments.
R_OUTPUT = "output"
R_SOURCE = "source"
R_MODE = "mode"                # -c -S -E
R_DEPENDENCY = "dependency"    # -MD -MMD -MF -MT -MQ -MP -MG -Wp,-MD,...
R_SIDE_OUTPUT = "side_output"  # flags that write extra files: -MJ, -ftime-trace, ...
R_PREPROCESSOR = "preprocessor"
R_LANGUAGE = "language"        # -x, -std=
R_OPTIMIZATION = "optimization"  # -O*, -f*, -m*, -mllvm
R_WARNING = "warning"
R_DEBUG = "debug"
R_LINK = "link"                # -l -L -Wl, -shared ...
R_LINK_INPUT = "link_input"    # .o .a .so and unknown files
R_OTHER = "other"

# ---- the option table -----------------------------------------------------------------
# One sorted table, as ccache's compopt.cpp keeps it: each option the classifier must
# know, with property bits and the role its tokens get.  An argument is looked up by
# its exact name first, then by the longest JOINED or PREFIX name it starts with, so
# `-Bsymbolic` is itself and `-Bfoo` is `-B` with the value "foo".  A test checks the
# table itself (sorted, no duplicates, no entry shadowed by a shorter one).
SEPARATE = 1 << 0         # the next argument is its value when it is written alone
JOINED = 1 << 1           # may be written joined to its value (-Ifoo, -lm, -MFx.d)
PREFIX = 1 << 2           # a family: every argument that starts with the name
STAGE = 1 << 3            # -c -S -E: how far the driver goes (gcc: -E over -S over -c)
QUERY_BIT = 1 << 4        # asks the driver something; compiles nothing
VERBOSE_BIT = 1 << 5      # -v -###: tools parse what it prints
DEPENDENCY_ONLY_BIT = 1 << 6   # -M -MM: dependencies instead of an object
DEPENDENCY_FILE = 1 << 7  # -MD -MMD ...: a dependency file beside the object
SYNTAX_ONLY_BIT = 1 << 8  # -fsyntax-only

_P, _L, _D, _S = R_PREPROCESSOR, R_LINK, R_DEPENDENCY, R_SIDE_OUTPUT
OPTIONS: tuple[tuple[str, int, str], ...] = (
    ("-###", VERBOSE_BIT, R_OTHER),
    ("--config", SEPARATE, R_OTHER),
    ("--gcc-toolchain", SEPARATE, R_OTHER),
    ("--help", QUERY_BIT, R_OTHER),
    ("--help-hidden", QUERY_BIT, R_OTHER),
    ("--param", SEPARATE, R_OTHER),
    ("--print-", PREFIX | QUERY_BIT, R_OTHER),
    ("--serialize-diagnostics", SEPARATE, _S),
    ("--shared", 0, _L),      # the drivers' other spelling of -shared (zopfli's Makefile)
    ("--static", 0, _L),
    ("--sysroot", SEPARATE, R_OTHER),
    ("--target", SEPARATE, R_OTHER),
    ("--target-help", QUERY_BIT, R_OTHER),
    ("--verbose", VERBOSE_BIT, R_OTHER),
    ("--version", QUERY_BIT, R_OTHER),
    ("-B", SEPARATE | JOINED, R_OTHER),
    ("-Bsymbolic", 0, _L),
    ("-D", SEPARATE | JOINED, _P),
    ("-E", STAGE, R_MODE),
    ("-F", SEPARATE | JOINED, _P),
    ("-G", SEPARATE, R_OTHER),
    ("-I", SEPARATE | JOINED, _P),
    ("-L", SEPARATE | JOINED, _L),
    ("-M", DEPENDENCY_ONLY_BIT, _D),
    ("-MD", DEPENDENCY_FILE, _D),
    ("-MF", SEPARATE | JOINED, _D),
    ("-MG", DEPENDENCY_FILE, _D),
    ("-MJ", SEPARATE | JOINED, _S),
    ("-MM", DEPENDENCY_ONLY_BIT, _D),
    ("-MMD", DEPENDENCY_FILE, _D),
    ("-MP", DEPENDENCY_FILE, _D),
    ("-MQ", SEPARATE | JOINED, _D),
    ("-MT", SEPARATE | JOINED, _D),
    ("-MV", DEPENDENCY_FILE, _D),
    ("-S", STAGE, R_MODE),
    ("-T", SEPARATE, _L),
    ("-U", SEPARATE | JOINED, _P),
    ("-V", QUERY_BIT, R_OTHER),
    ("-Wl,", PREFIX, _L),
    ("-Wp,", PREFIX, _P),             # -Wp,-MD,x.d: a dependency file (see _classify)
    ("-Xanalyzer", SEPARATE, R_OTHER),
    ("-Xassembler", SEPARATE, R_OTHER),
    ("-Xclang", SEPARATE, R_OTHER),   # its value is checked for -emit-llvm and the like
    ("-Xcuda-fatbinary", SEPARATE, R_OTHER),
    ("-Xcuda-ptxas", SEPARATE, R_OTHER),
    ("-Xflang", SEPARATE, R_OTHER),
    ("-Xlinker", SEPARATE, _L),
    ("-Xopenmp-target", SEPARATE, R_OTHER),
    ("-Xpreprocessor", SEPARATE, _P),
    ("-arch", SEPARATE, R_OPTIMIZATION),   # counted: several -arch cannot be captured
    ("-aux-info", SEPARATE, R_OTHER),
    ("-b", SEPARATE, R_OTHER),
    ("-c", STAGE, R_MODE),
    ("-ccc-install-dir", SEPARATE, R_OTHER),
    ("-compatibility_version", SEPARATE, _L),
    ("-current_version", SEPARATE, _L),
    ("-dependency-dot", SEPARATE, _S),
    ("-dependency-file", SEPARATE, _S),
    ("-dump", PREFIX | QUERY_BIT, R_OTHER),
    ("-e", SEPARATE, _L),
    ("-exported_symbols_list", SEPARATE, _L),
    ("-fdiagnostics-format=sarif", PREFIX, _S),
    ("-foptimization-record-file", PREFIX, _S),
    ("-fproc-stat-report", PREFIX, _S),
    ("-framework", SEPARATE, _L),
    ("-fsave-optimization-record", PREFIX, _S),
    ("-fsyntax-only", SYNTAX_ONLY_BIT, R_MODE),
    ("-ftime-trace", PREFIX, _S),
    ("-gcc-toolchain", SEPARATE, R_OTHER),
    ("-help", QUERY_BIT, R_OTHER),
    ("-idirafter", SEPARATE | JOINED, _P),
    ("-imacros", SEPARATE | JOINED, _P),
    ("-imultilib", SEPARATE, _P),
    ("-include", SEPARATE | JOINED, _P),
    ("-include-pch", SEPARATE, _P),   # its code is in the unit's IR (flags.pch_conflict)
    ("-install_name", SEPARATE, _L),
    ("-iprefix", SEPARATE, _P),
    ("-iquote", SEPARATE | JOINED, _P),
    ("-isysroot", SEPARATE, _P),
    ("-isystem", SEPARATE | JOINED, _P),
    ("-ivfsoverlay", SEPARATE, _P),
    ("-iwithprefix", SEPARATE, _P),
    ("-iwithprefixbefore", SEPARATE, _P),
    ("-l", SEPARATE | JOINED, _L),
    ("-main-file-name", SEPARATE, R_OTHER),
    ("-mllvm", SEPARATE, R_OPTIMIZATION),
    ("-no-pie", 0, _L),
    ("-nodefaultlibs", 0, _L),
    ("-nostartfiles", 0, _L),
    ("-nostdlib", 0, _L),
    ("-o", SEPARATE | JOINED, R_OUTPUT),
    ("-pie", 0, _L),
    ("-print-", PREFIX | QUERY_BIT, R_OTHER),
    ("-pthread", 0, _L),
    ("-qversion", QUERY_BIT, R_OTHER),
    ("-r", 0, _L),
    ("-rdynamic", 0, _L),
    ("-resource-dir", SEPARATE, R_OTHER),
    ("-rpath", SEPARATE, _L),
    ("-s", 0, _L),
    ("-save-stats", PREFIX, _S),
    ("-serialize-diagnostics", SEPARATE, _S),
    ("-shared", 0, _L),
    ("-shared-libgcc", 0, _L),
    ("-specs", SEPARATE, R_OTHER),
    ("-static", 0, _L),
    ("-static-libgcc", 0, _L),
    ("-static-libstdc++", 0, _L),
    ("-symbolic", 0, _L),
    ("-target", SEPARATE, R_OTHER),
    ("-u", SEPARATE, _L),
    ("-v", VERBOSE_BIT, R_OTHER),
    ("-working-directory", SEPARATE, R_OTHER),
    ("-x", SEPARATE | JOINED, R_LANGUAGE),
    ("-z", SEPARATE, _L),
)
SHARED = ("-shared", "--shared")
STATIC = ("-static", "--static")

_EXACT = {name: (name, bits, role) for name, bits, role in OPTIONS}
_BY_PREFIX = sorted(((name, bits, role) for name, bits, role in OPTIONS
                     if bits & (JOINED | PREFIX)), key=lambda o: -len(o[0]))


def lookup(token: str) -> tuple[str, int, str] | None:
    """The table entry for an argument: (name, bits, role), or None.  The name equals the
    token unless the token is a joined form or a member of a PREFIX family."""
    found = _EXACT.get(token)
    if found is not None:
        return found
    for entry in _BY_PREFIX:
        if token.startswith(entry[0]):
            return entry
    return None
