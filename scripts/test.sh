#!/usr/bin/env bash
# Set up (tool + test needs), then run the test suite. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --test
# Pyflakes-class errors and import order (pyproject.toml [tool.ruff]): cheap, never style.
.venv/bin/ruff check --quiet autopass_build bench tests
# The type hints, checked ([tool.mypy]).
.venv/bin/mypy
# Everything, slow tests included (a plain `pytest` leaves them out: pyproject.toml).
exec .venv/bin/python -m pytest -q -p no:cacheprovider -m "slow or not slow" --durations=25 "$@"
