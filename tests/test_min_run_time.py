"""`run --min-run-time`: how long each round samples, chosen by the user and kept by the run."""

from __future__ import annotations

import json

from hardening_cases import CALL_SECONDS, Fake, run

from bench_suite import runner
from bench_suite.results import load_run, run_dirs


def test_a_longer_floor_raises_a_lower_cap_with_it():
    quick = runner.PRESETS["quick"]
    longer = runner.with_min_run_time(quick, 0.4)
    assert (longer.min_run_time, longer.max_run_time) == (0.4, 0.8)
    shorter = runner.with_min_run_time(quick, 0.1)
    assert (shorter.min_run_time, shorter.max_run_time) == (0.1, quick.max_run_time)
    assert longer.rounds == quick.rounds and longer.sizes == quick.sizes


def test_each_round_samples_at_least_the_time_asked_and_the_run_records_it(tmp_path,
                                                                         monkeypatch):
    fake = Fake(variants=("good",))
    assert run(monkeypatch, tmp_path, fake, "--min-run-time", "0.08") == 0
    (run_dir,) = run_dirs(tmp_path)
    metadata, (rec,) = load_run(run_dir)
    assert metadata.settings["min_run_time"] == 0.08
    assert metadata.settings["max_run_time"] == runner.PRESETS["quick"].max_run_time
    assert rec.extra["min_run_time"] == 0.08
    # Sampling stopped at the first call past 0.08 s, not at the quick preset's own floor.
    sampled = sum(rec.times) * rec.number_per_run
    assert 0.08 <= sampled < runner.PRESETS["quick"].min_run_time
    assert len(rec.times) >= 0.08 / (3 * CALL_SECONDS)
    assert json.loads((run_dir / "metadata.json").read_text())["settings"]["min_run_time"] == 0.08
