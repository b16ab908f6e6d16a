#!/usr/bin/env python3
"""Write the GEOS benchmark's input: 3,000 overlapping star-shaped polygons as WKT, one
per line, the same bytes every time (seeded).  geosop buffers their union, as a GIS
user dissolves and buffers a layer of parcels.

Usage: python bench/workloads/geos_polygons.py OUT.wkt [--count N]
"""

from __future__ import annotations

import argparse
import math
import random


def polygons(count: int, seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    rows = []
    for _ in range(count):
        cx, cy = rng.uniform(0, 1000), rng.uniform(0, 1000)
        corners = rng.randint(8, 40)
        points = []
        for k in range(corners):
            angle = 2 * math.pi * k / corners
            radius = rng.uniform(5, 25)
            points.append((cx + radius * math.cos(angle), cy + radius * math.sin(angle)))
        points.append(points[0])
        rows.append("POLYGON((" + ", ".join(f"{x:.3f} {y:.3f}" for x, y in points) + "))")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out")
    parser.add_argument("--count", type=int, default=3000)
    args = parser.parse_args()
    with open(args.out, "w") as handle:
        handle.write("\n".join(polygons(args.count)) + "\n")


if __name__ == "__main__":
    main()
