#!/usr/bin/env bash
# Set everything up, then run the main job on the bundled example (offline):
# record its build through autopass, list the captured units and which binary holds them,
# and check that the recorded build still produces the expected output.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export PATH="$PWD/.venv/bin:$PATH"
autopass doctor
cd examples/make-c
make -s clean
rm -rf .autopass
echo "== autopass record -- make -j2"
autopass record -- make -j2 -s
echo "== autopass units"
autopass units
echo "== autopass targets"
autopass targets
echo "== the recorded build still gives the expected output"
./dataproc | diff -u expected.txt - && echo "dataproc: output OK"
