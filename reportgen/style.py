"""One source of display order, titles and colours for every chart, table and page.

A run that stores its catalogue (`metadata["catalogue"]`, see `bench_suite.cases.catalogue()`)
says which cases, directions, sizes, variants and devices it measured, in display order, with
their titles and each variant's colour. The report merges the catalogues of the runs it read,
newest first, and falls back to the defaults below (today's names, order and colours) for runs
that lack one, such as the schema-1 runs. Values no catalogue names come last, alphabetically,
and a variant no catalogue colours gets a stable spare colour.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

# Defaults for runs without a catalogue: the display order of the schema-1 runs.
DEFAULT_CASES = ("nufft2d", "nufft3d", "interp2d", "interp3d", "blocks3d")
DEFAULT_DIRECTIONS = ("forward", "adjoint")
DEFAULT_SIZES = ("small", "medium", "large")
DEFAULT_DEVICES = ("cpu", "cuda")
DEFAULT_VARIANT_COLOURS = {
    "torchlinops": "#1f77b4",        # blue
    "torchlinops-linop": "#7fb8e6",  # light blue
    "sigpy": "#ff7f0e",              # orange
    "finufft": "#2ca02c",            # green
    "cufinufft": "#17a589",          # teal (the GPU FINUFFT)
    "torchkbnufft": "#9467bd",       # purple
}
SPARE_COLOURS = ("#8c564b", "#e377c2", "#bcbd22", "#7f7f7f")

# Legible on the site's light and dark themes: mid-grey text and axes on a transparent ground.
GREY = "#8a8a8a"
ALERT = "#d62728"  # mismatches, failures and significant slowdowns
GOOD = "#2ca02c"  # significant speedups


@dataclass(frozen=True)
class Style:
    """Orders, titles and colours for one report build."""

    cases: tuple[str, ...] = DEFAULT_CASES
    directions: tuple[str, ...] = DEFAULT_DIRECTIONS
    sizes: tuple[str, ...] = DEFAULT_SIZES
    devices: tuple[str, ...] = DEFAULT_DEVICES
    variants: tuple[str, ...] = tuple(DEFAULT_VARIANT_COLOURS)
    colours: Mapping[str, str] = field(default_factory=lambda: dict(DEFAULT_VARIANT_COLOURS))
    titles: Mapping[str, str] = field(default_factory=dict)  # case, direction, variant ids

    @classmethod
    def from_catalogues(cls, catalogues: Iterable[Mapping[str, Any] | None]) -> Style:
        """Merge run catalogues (newest first) over the defaults."""
        cats = [c for c in catalogues if c]
        cases = [c for cat in cats for c in cat.get("cases", [])]
        variants = [v for cat in cats for v in cat.get("variants", [])]
        directions = [d for case in cases for d in case.get("directions", [])]
        sizes = [s.get("label") for case in cases for s in case.get("sizes", [])]
        colours: dict[str, str] = {}
        titles: dict[str, str] = {}
        for item in (*cases, *variants, *directions):
            if item.get("title"):
                titles.setdefault(item["id"], str(item["title"]))
        for case in cases:  # a direction's title is the case's own ("gridding", "adjoint NUFFT")
            for d in case.get("directions", []):
                if d.get("title"):
                    titles.setdefault(f"{case['id']}:{d['id']}", str(d["title"]))
        for v in variants:
            if v.get("colour"):
                colours.setdefault(v["id"], v["colour"])
        for vid, colour in DEFAULT_VARIANT_COLOURS.items():
            colours.setdefault(vid, colour)
        return cls(
            cases=_merge([c["id"] for c in cases], DEFAULT_CASES),
            directions=_merge([d["id"] for d in directions], DEFAULT_DIRECTIONS),
            sizes=_merge([*(s for cat in cats for s in cat.get("size_order", [])), *sizes],
                         DEFAULT_SIZES),
            devices=_merge([d for cat in cats for d in cat.get("device_order", [])],
                           DEFAULT_DEVICES),
            variants=_merge([v["id"] for v in variants], tuple(DEFAULT_VARIANT_COLOURS)),
            colours=colours, titles=titles)

    def colour(self, variant: str) -> str:
        """The colour of `variant` on every chart of every page."""
        if variant in self.colours:
            return self.colours[variant]
        return SPARE_COLOURS[sum(map(ord, variant)) % len(SPARE_COLOURS)]

    def title(self, name: str, case: str | None = None) -> str:
        """The catalogue's title of a case, direction or variant id; the id itself otherwise.
        A direction's title depends on its `case` (the same id is "adjoint NUFFT" in one case
        and "gridding" in another)."""
        if case is not None and f"{case}:{name}" in self.titles:
            return self.titles[f"{case}:{name}"]
        return self.titles.get(name, name)

    def order(self, kind: str, values: Iterable[Any]) -> list[Any]:
        """`values` (of kind case, direction, size, variant or device) in display order:
        known ones in order, then the rest alphabetically."""
        return ordered(values, getattr(self, _KINDS[kind]))

    def rank(self, kind: str, value: Any) -> tuple[int, str]:
        """A sort key putting `value` where `order` would."""
        known = getattr(self, _KINDS[kind])
        return (known.index(value), "") if value in known else (len(known), str(value))


_KINDS = {"case": "cases", "direction": "directions", "size": "sizes", "variant": "variants",
          "device": "devices"}


def _merge(first: Sequence[str], fallback: Sequence[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys([*first, *fallback]))


def ordered(values: Iterable[Any], order: Sequence[Any]) -> list[Any]:
    """Known values in the given order, then the rest alphabetically."""
    values = set(values)
    known = [v for v in order if v in values]
    return known + sorted(values - set(known), key=str)


DEFAULT = Style()
