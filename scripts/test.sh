#!/usr/bin/env bash
# Set up (tool + test needs), then run the test suite. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --test
# Pyflakes-class errors and import order (pyproject.toml [tool.ruff]): cheap, never style.
.venv/bin/ruff check --quiet autopass_build bench tests
# The type hints, checked ([tool.mypy]).
.venv/bin/mypy
# Everything, slow tests included (a plain `pytest` leaves them out: pyproject.toml), on
# two workers (pytest-xdist), each test file whole on one of them: a file's tests share
# fixtures built once per file (a recorded project, a tuned run, a Ray cluster) and some
# follow each other's state.  Most tests leave the second core idle much of the time
# (one compile, one valgrind run, a wait on Ray or a signal), and no test counts on an
# idle machine (issue 64, item 9): 13 minutes on two cores where one worker took 22.
exec .venv/bin/python -m pytest -q -p no:cacheprovider -m "slow or not slow" \
    -n "${AUTOPASS_TEST_WORKERS:-2}" --dist loadfile --durations=25 "$@"
