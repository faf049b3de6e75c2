"""The variant registry: every library (or way of calling one) the suite measures, in display order.

Why a registry: a library used to be spread over a case's variant tuple, an `if/elif` branch, a
tolerance table, a colour table and the lists of the profile and environment modules. Now it is
one `Variant` entry (base.py) with one adapter per operator family, registered here; cases,
the runner's plan, the CLI, the run's catalogue, the profile command and the environment capture
all read this registry. An unknown id is an error everywhere, never a fallback.

The built-in entries live in the `lib_*.py` modules and are registered, in order, by
`libraries.py`. Tests add fakes with `registered(...)`, which removes them again.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator, Sequence

from bench_suite.cases.base import BACKENDS, CLOCKS, DEVICES, THREADING, Ladder, Variant

_REGISTRY: dict[str, Variant] = {}
_COLOUR = re.compile(r"^#[0-9a-fA-F]{6}$")


class UnknownVariant(ValueError):
    """A variant id that is not registered; the message lists the registered ones."""


def _problems(v: Variant) -> list[str]:
    """Everything that makes `v` an incomplete entry (empty when it is complete)."""
    out = []
    if not v.id or not v.title:
        out.append("needs an id and a title")
    if not _COLOUR.match(v.colour):
        out.append(f"colour {v.colour!r} is not a #rrggbb hex colour")
    if not v.devices or any(d not in DEVICES for d in v.devices):
        out.append(f"devices {v.devices!r} must be a non-empty subset of {DEVICES}")
    for name, table, valid in (("backends", v.backends, BACKENDS), ("clocks", v.clocks, CLOCKS)):
        if set(table) != set(v.devices):
            out.append(f"{name} must name exactly its devices {v.devices!r}")
        out += [f"{name}[{d!r}] = {k!r} is not one of {valid}" for d, k in table.items()
                if k not in valid]
    if not v.build:
        out.append("has no adapter (build is empty)")
    if set(v.tolerances) != set(v.build):
        out.append(f"tolerances {sorted(v.tolerances)} must cover exactly the families it "
                   f"builds {sorted(v.build)}")
    out += [f"tolerance for {f!r} needs a positive value and a reason"
            for f, t in v.tolerances.items() if not (t.value > 0 and t.reason.strip())]
    if v.threads not in THREADING:
        out.append(f"threads {v.threads!r} is not one of {THREADING}")
    if not v.scaling:
        out.append("needs a scaling note")
    names = [lad.name for lad in v.ladders]
    if len(set(names)) != len(names):
        out.append(f"ladder names {names} must be distinct")
    for lad in v.ladders:
        if lad.family not in v.build:
            out.append(f"ladder {lad.name!r} is for {lad.family!r}, which it does not build")
        if not lad.points or any(not 0 <= i < len(lad.points) for i in lad.quick):
            out.append(f"ladder {lad.name!r} needs points, and quick indices into them")
        if len(set(lad.settings())) != len(lad.points):
            out.append(f"ladder {lad.name!r} has two points with the same setting")
    return out


def register(variant: Variant) -> Variant:
    """Add a complete entry at the end of the display order; ValueError names what is wrong."""
    if variant.id in _REGISTRY:
        raise ValueError(f"variant {variant.id!r} is already registered")
    problems = _problems(variant)
    if problems:
        raise ValueError(f"variant {variant.id!r}: {'; '.join(problems)}")
    _REGISTRY[variant.id] = variant
    return variant


def unregister(variant_id: str) -> None:
    get(variant_id)
    del _REGISTRY[variant_id]


@contextlib.contextmanager
def registered(*variants: Variant) -> Iterator[tuple[Variant, ...]]:
    """Register `variants` for the duration of a `with` block (tests), then remove them."""
    added: list[str] = []
    try:
        for v in variants:
            register(v)
            added.append(v.id)
        yield variants
    finally:
        for vid in added:
            _REGISTRY.pop(vid, None)


def get(variant_id: str) -> Variant:
    if variant_id not in _REGISTRY:
        raise UnknownVariant(f"unknown variant {variant_id!r} (registered: {', '.join(ids())})")
    return _REGISTRY[variant_id]


def variants() -> tuple[Variant, ...]:
    """Every registered variant, in display order."""
    return tuple(_REGISTRY.values())


def ids() -> list[str]:
    return list(_REGISTRY)


def ladders(family: str | None = None) -> dict[str, tuple[Variant, Ladder]]:
    """Every registered accuracy ladder (of `family`, or all), by name, in registry order."""
    return {lad.name: (v, lad) for v in _REGISTRY.values() for lad in v.ladders
            if family is None or lad.family == family}


class FamilyVariants(Sequence[Variant]):
    """The registered variants with an adapter for one operator family, in registry order.

    A live view: a variant registered later (a test's fake) appears in every case of its family.
    """

    def __init__(self, family: str):
        self.family = family

    def _items(self) -> list[Variant]:
        return [v for v in _REGISTRY.values() if self.family in v.build]

    def __getitem__(self, index):  # type: ignore[override]
        return self._items()[index]

    def __len__(self) -> int:
        return len(self._items())

    def __repr__(self) -> str:
        return f"FamilyVariants({self.family!r}: {', '.join(v.id for v in self._items())})"


def for_family(family: str) -> FamilyVariants:
    return FamilyVariants(family)
