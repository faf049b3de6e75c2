"""The GPU page's table of a published run: their numbers beside ours, matched by workload."""

from __future__ import annotations

import pandas as pd

from reportgen import published_runs


def frame(rows: list[dict]) -> pd.DataFrame:
    base = {"machine": "h200-box", "device": "cuda", "status": "ok", "direction": "forward"}
    return pd.DataFrame([{**base, **r} for r in rows])


def test_their_file_holds_the_numbers_their_readme_quotes():
    theirs = published_runs.TORCHLINOPS_RTX3090.medians()
    # NUFFT forward 3D large on their RTX 3090: 28.4 ms functional, 3.30 ms linop, 10.6 ms SigPy
    assert round(theirs[("nufft3d", "forward", "large", "torchlinops")] * 1e3, 1) == 28.4
    assert round(theirs[("nufft3d", "forward", "large", "torchlinops-linop")] * 1e3, 2) == 3.30
    assert round(theirs[("nufft3d", "forward", "large", "sigpy")] * 1e3, 1) == 10.6
    assert all(key[3] in {"torchlinops", "torchlinops-linop", "sigpy"} for key in theirs)


def test_rows_pair_our_validated_cuda_records_with_theirs():
    ours = frame([
        {"case": "nufft3d", "size_label": "large", "variant": "torchlinops", "median": 2.835e-3},
        {"case": "nufft3d", "size_label": "small", "variant": "torchlinops", "median": 1e-3,
         "status": "failed"},
        {"case": "nufft3d", "size_label": "large", "variant": "torchkbnufft", "median": 1e-2},
        {"case": "nufft3d", "size_label": "large", "variant": "sigpy", "median": 1e-3,
         "device": "cpu"},
    ])
    table = published_runs.comparison(ours)
    assert table is not None and len(table.rows) == 1  # failed, unpublished and CPU rows left out
    row = table.rows[0]
    assert row[2] == "large" and row[-1] == "0.10×"  # 2.835 ms against their 28.35 ms
    assert "RTX 3090" in table.title and "h200-box" in table.title


def test_no_gpu_record_means_no_table():
    cpu_only = frame([{"case": "nufft2d", "size_label": "small", "variant": "sigpy",
                       "median": 1e-3, "device": "cpu"}])
    assert published_runs.comparison(cpu_only) is None
