"""runner.plan on the catalogue: registry order, and the resume key that follows IDENTITY_FIELDS."""

from __future__ import annotations

import pytest

from bench_suite import results, runner
from bench_suite.cases import CASES, registry


def test_plan_follows_the_registry_order():
    items = runner.plan([CASES["nufft2d"]], ["forward"], ["small"], None, ["cpu", "cuda"], [1])
    planned = list(dict.fromkeys(i.variant.id for i in items))
    assert planned == [v.id for v in registry.variants() if v in CASES["nufft2d"].variants]


@pytest.mark.parametrize("order", [results.IDENTITY_FIELDS, results.IDENTITY_FIELDS[::-1]])
def test_plan_key_is_the_key_of_the_record_it_makes(monkeypatch, order):
    """Resume skips an item whose key is stored: the two keys must agree whatever the order."""
    monkeypatch.setattr(results, "IDENTITY_FIELDS", order)
    (item,) = runner.plan([CASES["blocks3d"]], ["adjoint"], ["small"], ["sigpy"], ["cpu"], [2])
    record = runner.base_record(item, "m")
    assert item.key("m") == record.key()
    assert item.key("m")[0] == getattr(record, order[0])


def test_an_identity_field_the_plan_cannot_supply_is_an_error(monkeypatch):
    monkeypatch.setattr(results, "IDENTITY_FIELDS", (*results.IDENTITY_FIELDS, "accuracy"))
    (item,) = runner.plan([CASES["blocks3d"]], ["adjoint"], ["small"], ["sigpy"], ["cpu"], [1])
    with pytest.raises(KeyError, match="accuracy"):
        item.key("m")
