"""docs/RELIABILITY.md and the tests agree: every row names tests that exist, and every
row a test cites is in the matrix."""

from __future__ import annotations

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MATRIX = REPO / "docs" / "RELIABILITY.md"
ROW = re.compile(r"^\| ([IFSC]\d+) \|(.*)\|$", re.M)
TEST_REF = re.compile(r"`(tests/test_\w+\.py)::(test_\w+)`")
CITED = re.compile(r"\b([IFSC]\d{1,2})\b")


def _rows() -> dict[str, str]:
    return {m.group(1): m.group(2) for m in ROW.finditer(MATRIX.read_text())}


def _tests_in(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    return {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)
            and n.name.startswith("test_")}


def test_every_row_names_tests_that_exist():
    rows = _rows()
    assert len(rows) == 18 + 105 + 6 + 18, sorted(rows)
    for row_id, text in rows.items():
        refs = TEST_REF.findall(text)
        assert refs, f"{row_id} names no test"
        for file, name in refs:
            assert name in _tests_in(REPO / file), f"{row_id}: {file}::{name} does not exist"


def test_rows_cited_by_tests_are_in_the_matrix():
    rows = _rows()
    cited: set[str] = set()
    for path in (REPO / "tests").glob("test_*.py"):
        if path.name in ("test_reliability.py", "test_stats.py"):
            continue    # test_stats names statistics (F7 aside), not matrix rows
        for line in path.read_text().splitlines():
            if "RELIABILITY" in line or re.search(r"#\s*-+\s*[IFSC]\d", line) or \
                    re.match(r'\s*(""")?\(?[IFSC]\d', line):
                cited.update(CITED.findall(line))
    assert cited, "no test cites the matrix"
    assert cited <= set(rows), sorted(cited - set(rows))


def test_the_checker_rejects_a_missing_test(tmp_path):
    text = "| I1 | x | y | `tests/test_wrapper.py::test_that_does_not_exist` |"
    (file, name), = TEST_REF.findall(ROW.search(text).group(2))
    assert name not in _tests_in(REPO / file)
