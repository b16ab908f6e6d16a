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
