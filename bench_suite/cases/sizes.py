"""The problem sizes shared by the 2D and 3D cases (seed 004 "Problem Sizes").

2D: as many points as grid cells (fully sampled); 3D: 1/8 of the grid (realistic undersampling).
"""

from __future__ import annotations

from bench_suite.cases.base import Size

SIZES_2D = (
    Size("small", (64, 64), 64 * 64),
    Size("medium", (128, 128), 128 * 128),
    Size("large", (256, 256), 256 * 256),
)
SIZES_3D = (
    Size("small", (32, 32, 32), 32**3 // 8),
    Size("medium", (64, 64, 64), 64**3 // 8),
    Size("large", (128, 128, 128), 128**3 // 8),
)
