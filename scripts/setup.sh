#!/usr/bin/env bash
# Set up autopass on a Debian/Ubuntu machine: clang/llvm/lld/bolt 19 and build tools (apt, only
# what is missing), a virtual environment in .venv with autopass and its dependencies.
#   bash scripts/setup.sh          the tool
#   bash scripts/setup.sh --test   the tool and what the test suite needs
set -euo pipefail
cd "$(dirname "$0")/.."
LLVM=19
want_tests=0
[ "${1:-}" = "--test" ] && want_tests=1

say() { printf 'setup: %s\n' "$*" >&2; }
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

missing=()
command -v clang-$LLVM >/dev/null || missing+=(clang-$LLVM)
command -v opt-$LLVM >/dev/null || missing+=(llvm-$LLVM)
# LLVM's headers: record builds its IR-saving pass plugin against them (one front end
# per unit; without them record compiles every unit twice)
[ -f /usr/lib/llvm-$LLVM/include/llvm/Passes/PassPlugin.h ] || missing+=(llvm-$LLVM-dev)
command -v make >/dev/null || missing+=(make)
command -v ld.lld-$LLVM >/dev/null || missing+=(lld-$LLVM)   # the LTO stages
command -v llvm-bolt-$LLVM >/dev/null || missing+=(bolt-$LLVM)   # the BOLT stage
command -v cmake >/dev/null || missing+=(cmake)
# the profile samples with perf (cpu-clock); its sampled instructions say which helper
# inlined into a hot function the time is in (callgrind, the fallback, does not)
command -v perf >/dev/null || missing+=(linux-perf)
# clang's OpenMP runtime: under autopass a build's -fopenmp goes to clang, and without it
# configure finds no OpenMP and the program builds single-threaded
echo '#include <omp.h>' | clang-$LLVM -fopenmp -E -x c -o /dev/null - 2>/dev/null \
  || missing+=(libomp-$LLVM-dev)
python3 -c 'import venv, ensurepip' 2>/dev/null || missing+=(python3-venv)
# apply --train's instrumented build compiles only what changed through it (and the
# tests build under a compiler cache, F32)
command -v ccache >/dev/null || missing+=(ccache)
if [ $want_tests = 1 ]; then
  command -v dpkg-source >/dev/null || missing+=(dpkg-dev)
  command -v valgrind >/dev/null || missing+=(valgrind)
  command -v gcc >/dev/null || missing+=(gcc)           # builds that name gcc (F36)
  command -v dwz >/dev/null || missing+=(dwz)           # Debian packaging's dh_dwz (F42)
fi
if [ ${#missing[@]} -gt 0 ]; then
  say "installing ${missing[*]} with apt-get"
  as_root apt-get update -qq
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# The tests build a real program from Debian sources: they need a deb-src entry for the
# main archive only (the mirror lacks the security archive's sources).
if [ $want_tests = 1 ] && ! grep -rqs '^Types:.*deb-src\|^deb-src' /etc/apt/sources.list /etc/apt/sources.list.d/; then
  src=/etc/apt/sources.list.d/debian.sources
  if [ -f $src ]; then
    say "enabling deb-src for the main Debian archive"
    awk 'BEGIN{RS="";ORS="\n\n"} NR==1{sub(/Types: deb/,"Types: deb-src"); print}' $src \
      | as_root tee /etc/apt/sources.list.d/autopass-deb-src.sources >/dev/null
    as_root apt-get update -qq
  else
    say "warning: no $src; enable deb-src yourself for the Debian-source tests"
  fi
fi

if [ ! -x .venv/bin/python ]; then
  say "creating .venv"
  python3 -m venv .venv
fi
extra=""
[ $want_tests = 1 ] && extra="[test,cluster]"   # the tests run a cluster on this machine
say "installing autopass${extra} into .venv"
.venv/bin/python -m pip install -q --disable-pip-version-check -e ".${extra}" 2>&1 \
  | grep -v "^WARNING: Location" >&2 || true
.venv/bin/autopass --version >/dev/null
say "ready: .venv/bin/autopass (activate with: source .venv/bin/activate)"
