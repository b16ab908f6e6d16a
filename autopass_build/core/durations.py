"""Durations as people write and read them: "45m" in, "12 min" out (a tuning run's time
budget, progress lines)."""

from __future__ import annotations

from autopass_build.core.errors import AutopassError

UNITS = {"s": 1, "m": 60, "h": 3600}


class DurationError(AutopassError, ValueError):
    pass


def parse_duration(text: str) -> float:
    """Seconds in "45m", "2h", "90s", "1h30m" or a plain number of seconds."""
    spoken = text.strip().lower().replace(" ", "")
    if not spoken:
        raise DurationError("an empty time")
    if spoken.replace(".", "", 1).isdigit():
        seconds = float(spoken)
    else:
        seconds, number = 0.0, ""
        for char in spoken:
            if char.isdigit() or char == ".":
                number += char
            elif char in UNITS and number:
                seconds += float(number) * UNITS[char]
                number = ""
            else:
                raise DurationError(f"{text!r} is not a time: write e.g. 45m, 2h, 1h30m "
                                    "or 90s")
        if number:
            raise DurationError(f"{text!r} ends without a unit: write e.g. 45m, 2h or 90s")
    if seconds <= 0:
        raise DurationError(f"{text!r}: give a time above zero")
    return seconds


def duration_text(seconds: float) -> str:
    """A wait in the unit a person reads it in: "40 s", "12 min", "1.5 h"."""
    if seconds < 60:
        return f"{max(1, round(seconds))} s"
    if seconds < 90 * 60:
        return f"{round(seconds / 60)} min"
    return f"{seconds / 3600:.1f} h"
