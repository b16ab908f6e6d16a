#!/usr/bin/env bash
# Set up (tool + test needs), then run the test suite. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --test
exec .venv/bin/python -m pytest -q -p no:cacheprovider "$@"
