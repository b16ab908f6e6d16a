"""Random search: valid points drawn uniformly (rejection sampling), never one twice."""

from __future__ import annotations

from typing import Iterator

from autopass_build.tuning.strategies.base import Point, Strategy


class RandomSearch(Strategy):
    name = "random"
    summary = "valid points at random; the baseline every other strategy must beat"
    OPTIONS = {}

    def proposals(self) -> Iterator[Point]:
        while True:
            yield self.random_point()
