"""data_gen_fn: a new buffer for every call, cycling through a few drawn inputs."""

import numpy as np

from bench_suite import runner
from bench_suite.cases import CASES
from bench_suite.cases import _common as C


def prepared(shape, draws):
    def make_input(rng):
        draws.append(1)
        return C.complex_normal(rng, shape)

    return C.make_prepared(fn=lambda x: x, make_input=make_input, entropy=[1, 2, 3],
                           convert=lambda x: x, reference=None, tol=1e-6, timer="cpu")


def test_every_call_gets_a_new_buffer_and_the_pool_cycles():
    draws: list[int] = []
    gen = prepared((16, 16), draws).data_gen_fn
    outs = [gen() for _ in range(2 * C.INPUT_POOL_SIZE + 1)]
    assert len({id(o) for o in outs}) == len(outs)  # never the same array twice
    assert not any(np.shares_memory(a, b) for a in outs for b in outs if a is not b)
    first = outs[:C.INPUT_POOL_SIZE]
    assert all(not np.array_equal(a, b) for i, a in enumerate(first) for b in first[i + 1:])
    for i, out in enumerate(outs[C.INPUT_POOL_SIZE:], C.INPUT_POOL_SIZE):
        assert np.array_equal(out, outs[i % C.INPUT_POOL_SIZE])
    assert len(draws) == C.INPUT_POOL_SIZE


def test_the_first_input_is_the_stream_s_first_draw():
    """The values a variant is timed on start with the one it was validated on."""
    gen = prepared((8,), []).data_gen_fn
    expected = C.complex_normal(np.random.default_rng([1, 2, 3]), (8,))
    assert np.array_equal(gen(), expected)


def test_a_large_input_is_drawn_once():
    assert C.input_pool_size(C.INPUT_POOL_BYTES) == 1
    assert C.input_pool_size(C.INPUT_POOL_BYTES * 3) == 1
    assert C.input_pool_size(C.INPUT_POOL_BYTES // 3) == 3
    assert C.input_pool_size(1) == C.INPUT_POOL_SIZE


def test_the_memory_pass_draws_its_inputs_instead_of_keeping_them(monkeypatch):
    """A kept draw would sit in the measured call's peak (up to 64 MiB); a drawn input is freed."""
    draws: list[int] = []
    prep = prepared((16, 16), draws)
    outs = [prep.draw_input() for _ in range(3)]
    assert len(draws) == 3 and not np.array_equal(outs[0], outs[1])
    gen_calls: list[int] = []
    prep.data_gen_fn = lambda: gen_calls.append(1)
    monkeypatch.setattr(runner, "_prepare", lambda item, settings, rec: prep)
    case = CASES["interp2d"]
    item = runner.PlanItem(case, "forward", case.size("small"), case.variant("sigpy"), "cpu", 1)
    rec = runner.measure_memory(item, runner.RunSettings(preset=runner.PRESETS["quick"],
                                                         machine="m"))
    assert gen_calls == [] and len(draws) == 3 + 1 + runner.MEMORY_CALLS
    assert rec.status == "ok"
