#!/usr/bin/env bash
# Set everything up, then run the main job on the bundled example (offline):
# record its build through autopass, list the captured units and which binary holds them,
# check that the recorded build still produces the expected output, profile it, and tune
# its hottest units with the offline rules agent (examples/make-c/autopass.toml), build it
# again with the tuned flags through its own Makefile, and verify that build.
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
echo "== autopass profile"
autopass profile --limit 6
echo "== autopass tune (rules agent, offline; examples/make-c/autopass.toml)"
rm -f autopass.flags.json
autopass tune
echo "== autopass report --html tuning-report.html"
autopass report --html tuning-report.html
if [ -f autopass.flags.json ]; then
    echo "== autopass db show"
    autopass db show
fi
echo "== autopass apply -- make (a tuned build through the example's own Makefile)"
make -s clean
autopass apply -- make -j2 -s
./dataproc | diff -u expected.txt - && echo "dataproc (tuned): output OK"
echo "== autopass verify (two clean tuned builds identical? tuned vs plain, measured)"
autopass verify
