#!/usr/bin/env bash
# Set up (tool + test needs), then run the test suite. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --test
# Pyflakes-class errors only (unused or undefined names): cheap, and never style.
.venv/bin/ruff check --quiet autopass_build bench tests
exec .venv/bin/python -m pytest -q -p no:cacheprovider "$@"
