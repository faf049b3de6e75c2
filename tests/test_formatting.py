"""bench_suite.formatting: the one way times, bytes, figures, Markdown and names are written."""

from __future__ import annotations

import math

import pytest

from bench_suite import formatting as fmt


@pytest.mark.parametrize(("seconds", "unit"), [
    (3.0, "s"), (1.0, "s"), (0.02, "ms"), (1e-3, "ms"), (0.999e-3, "µs"), (2.5e-4, "µs"),
    (1e-6, "µs"), (5e-8, "ns"), (1e-12, "ns"), (0.0, "s"), (float("nan"), "s"), (None, "s"),
    (0.1 * 0.01, "ms"),  # 0.001 computed inexactly still reads as 1 ms
])
def test_time_unit_puts_values_in_one_to_a_thousand_and_writes_micro(seconds, unit):
    assert fmt.time_unit(seconds)[0] == unit


def test_format_time_four_figures_and_shared_unit():
    assert fmt.format_time(1.2344e-3) == "1.234 ms" and fmt.format_time(12.5) == "12.50 s"
    assert fmt.format_time(117.4e-6) == "117.4 µs"
    assert fmt.format_time(2e-3, unit=fmt.time_unit(5e-4)) == "2000 µs"
    assert fmt.format_time(None) == "-" and fmt.format_time(math.nan, missing="—") == "—"


def test_ticks_are_empty_where_a_log_axis_cannot_go():
    assert fmt.time_tick(2e-3) == "2 ms" and fmt.time_tick(5e-4) == "500 µs"
    assert fmt.bytes_tick(2**20) == "1 MiB" and fmt.bytes_tick(4 * 2**30) == "4 GiB"
    assert fmt.count_tick(262144) == "262k" and fmt.count_tick(2097152) == "2.1M"
    for tick in (fmt.time_tick, fmt.bytes_tick, fmt.count_tick):
        assert tick(0) == "" and tick(-1.0) == "" and tick(math.inf) == ""


def test_bytes_in_binary_units():
    assert fmt.format_bytes(512) == "512 B"
    assert fmt.format_bytes(1536) == "1.5 KiB"
    assert fmt.format_bytes(25276071936) == "23.5 GiB"
    assert fmt.format_bytes(-3 * 2**20) == "-3 MiB"
    assert fmt.format_bytes(None) == "—"


def test_significant_figures():
    assert fmt.trim_sigfig(3.14159, 2) == pytest.approx(3.1)
    assert fmt.format_sigfig(123.456e-6, 1e-6, 3) == "123"
    assert fmt.format_sigfig(1.23456e-3, 1e-3, 2) == "1.2"
    assert fmt.format_sigfig(0.5, 1.0, 2) == "0.50"
    assert fmt.format_sigfig(math.nan, 1.0, 2) == "—"


def test_ratios_geometric_mean_and_plurals():
    assert fmt.format_ratio(2.0) == "2.00×" and fmt.format_ratio(math.nan) == "—"
    assert fmt.format_change(1.2) == "1.200x (+20.0%)"
    assert fmt.geometric_mean([2.0, 8.0]) == pytest.approx(4.0)
    assert fmt.geometric_mean([2.0, 0.0, -1.0, math.nan, 8.0]) == pytest.approx(4.0)
    assert math.isnan(fmt.geometric_mean([]))
    assert fmt.plural(1, "thread") == "1 thread" and fmt.plural(2, "thread") == "2 threads"


def test_markdown_escaping():
    assert fmt.md_escape("a|b <i>x</i> *y* _z_\nnext") == \
        "a\\|b &lt;i&gt;x&lt;/i&gt; \\*y\\* \\_z\\_ next"
    assert fmt.md_code("run --x | y") == "`run --x \\| y`"
    assert fmt.md_code("a `b`") == "`` a `b` ``"


def test_slug():
    assert fmt.slug("amd-epyc-2c") == "amd-epyc-2c"
    assert fmt.slug("box 1/cuda:0") == "box-1-cuda-0"
    assert fmt.slug("///") == "x"
