"""The light records of the per-compile code (core/records.py) are typed: a misspelled
field, a field given twice, too many values or a missing one is a TypeError naming it,
never a record with a field silently left at its default (issue 62)."""

from __future__ import annotations

import pytest

from autopass_build.capture.compiler_args import Skip
from autopass_build.core.flags_db import Gain


def test_a_misspelled_field_is_refused_with_the_fields_it_has() -> None:
    with pytest.raises(TypeError, match="Skip has no field detial; its fields: reason, detail"):
        Skip("query", detial="typo")
    assert Skip("query", detail="kept").detail == "kept"


@pytest.mark.parametrize("make, says", [
    (lambda: Skip("query", "a", (), "one too many"), "has no field #4"),
    (lambda: Skip("query", reason="twice"), "got reason twice"),
    (lambda: Gain("cpu", 0.9, 0.8, 1.0), "needs its field pairs"),
])
def test_a_record_made_wrong_says_how(make, says) -> None:
    with pytest.raises(TypeError, match=says):
        make()


def test_a_long_list_of_executables_shows_the_likely_ones_and_where_the_rest_are() -> None:
    """Issue 62: `autopass init` on a project of 86 executables printed all of them in one
    line; now the likely benchmarks first (not a test, named as the project, most units),
    a few of them, and where the others are."""
    from autopass_build.store.targets import Target, executables_text

    root = "/src/tool-1.2"
    targets = [Target(f"{root}/tests/t{i}", f"tests/t{i}", "executable", [f"u{i}"] * 40)
               for i in range(80)]
    targets += [Target(f"{root}/bin/helper{i}", f"bin/helper{i}", "executable", ["u"] * i)
                for i in range(1, 6)]
    targets.append(Target(f"{root}/bin/tool", "bin/tool", "executable", ["u"] * 3))
    text = executables_text(targets)
    assert text.startswith("bin/tool (3 units), bin/helper5 (5 units), bin/helper4")
    assert text.endswith("and 80 more (`autopass targets` lists them all)")
    assert "tests/t" not in text
