"""The workload types: what a case, a variant (one library's implementation) and a prepared
benchmark are. Plain data, no library imports.

A case knows nothing about clocks or files (DESIGN.md): `Case.prepare` returns the function to
time, the function that makes fresh input for every iteration, and a validation hook; the runner
decides how to time and where to store. A `Variant` is one registry entry (see registry.py): what
a library needs, where it runs, how close it must come to the reference and why, and one `build`
adapter per operator family it implements.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

DIRECTIONS = ("forward", "adjoint")
SIZE_LABELS = ("small", "medium", "large")
DEVICES = ("cpu", "cuda")
# The array type a variant works on, per device; its input is converted to it untimed.
BACKENDS = ("numpy", "cupy", "torch")
# The clock that times it: "cupy" -> CupyHandler (CuPy events), "torch" -> TorchHandler
# (perf_counter on the CPU, CUDA events on a GPU).
CLOCKS = ("torch", "cupy")
# "native": the library runs num_threads threads; "single": it always runs one on the CPU.
THREADING = ("native", "single")


class VariantUnavailable(Exception):
    """Raised by `prepare` when a variant cannot run here (missing library, no device)."""


@dataclass(frozen=True)
class Size:
    """One problem size: the grid and the number of non-uniform points (None for blocks)."""

    label: str
    grid: tuple[int, ...]
    num_points: int | None = None

    @property
    def problem_size(self) -> int:
        """The x-axis of every scaling chart: prod(grid), as the methodology defines it."""
        return math.prod(self.grid)


@dataclass(frozen=True)
class Tolerance:
    """The relative L2 error a variant may have on one operator family, and why that much.

    `reference` names which of the problem's references it is compared with (None: the case's
    default, its first); e.g. torchlinops reimplements SigPy's NUFFT and is held to SigPy itself.
    """

    value: float
    reason: str
    reference: str | None = None


@dataclass
class Validation:
    """Outcome of comparing a variant's output with the reference on the first input."""

    rel_error: float
    tolerance: float
    reference: str

    @property
    def ok(self) -> bool:
        return bool(self.rel_error <= self.tolerance)


@dataclass(frozen=True)
class StudyPoint:
    """Where a measurement sits on the study axes (DESIGN.md "Study axes"): an accuracy-ladder
    point (`ladder` name and its canonical `setting`; both empty for the suite's default
    setting), the sampling pattern and the coils per call. `time_setup` asks the assembly to
    time the adapter's construction (plan, linop) on its own: the study's setup cost."""

    ladder: str = ""
    setting: str = ""
    sampling: str = "uniform"
    coils: int = 1
    time_setup: bool = False

    @property
    def is_default(self) -> bool:
        return (self.ladder, self.setting, self.sampling, self.coils) == ("", "", "uniform", 1)


DEFAULT_POINT = StudyPoint()


@dataclass
class Prepared:
    """A benchmark ready to time: `fn(data)` is timed, `data_gen_fn()` is not.

    `data_gen_fn()` gives every call a new buffer, copied from a few drawn inputs; `draw_input()`
    draws a new one, for the memory pass, whose peaks count an input's making as they always did.
    `notes` are facts about the benchmark that are not noise (e.g. a library that ignores the
    thread count); noise warnings come from the measurement, never from here.
    """

    fn: Callable[[Any], Any]
    data_gen_fn: Callable[[], Any]
    validate: Callable[[], Validation]
    timer: str = "torch"
    dtype: str = "complex64"
    extra: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    extra_metrics: dict[str, float] = field(default_factory=dict)
    num_points: int | None = None  # the problem's M, when it differs from the size's
    draw_input: Callable[[], Any] | None = None  # None: data_gen_fn


@dataclass(frozen=True, kw_only=True)
class Problem:
    """One (case, direction, size, seed) as every variant sees it.

    `input_shape` is the shape of each (complex64) input in the case's convention; `references`
    maps a name to `reference(x0) -> _common.Reference` (the first is the default); `extra` is
    stored in every record. Operator families subclass it with what their adapters need
    (locations, grid, kernel parameters).
    """

    case_id: str
    direction: str
    size: Size
    seed: int
    input_shape: tuple[int, ...]
    references: Mapping[str, Callable[[Any], Any]]
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def forward(self) -> bool:
        return self.direction == "forward"

    def reference(self, name: str | None) -> Callable[[Any], Any]:
        """The reference called `name` (None: the default); an unknown name is an error."""
        if name is None:
            return next(iter(self.references.values()))
        if name not in self.references:
            raise ValueError(f"{self.case_id}: no reference {name!r} (has "
                             f"{', '.join(self.references)})")
        return self.references[name]

    def extra_for(self, variant: Variant) -> dict[str, Any]:
        """What a record of `variant` on this problem stores in `extra` besides the adapter's."""
        return dict(self.extra)


@dataclass(frozen=True)
class Request:
    """What an adapter is asked to build: one problem, on one device, with a thread count.

    `backend` is the variant's array type on `device`; `settings` holds the parameters of an
    accuracy-ladder point (`Ladder.points`), empty for the suite's default setting. An adapter
    reads what it knows (`settings.get("eps", EPS)`) and falls back to its default.
    """

    case: Case
    direction: str
    size: Size
    device: str
    num_threads: int
    seed: int
    backend: str
    problem: Any
    settings: Mapping[str, Any] = field(default_factory=dict)


@dataclass
class Built:
    """An adapter's answer: the call to time, and how to read its output.

    `shape_input(x)` maps a NumPy input in the case's layout to the layout `fn` takes (untimed,
    before the device transfer); `to_reference(y)` maps `fn`'s output, as complex128 NumPy, to
    the case's convention (scaling, squeezing) for validation only, never timed.
    """

    fn: Callable[[Any], Any]
    extra: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    shape_input: Callable[[Any], Any] | None = None
    to_reference: Callable[[Any], Any] | None = None


Adapter = Callable[[Request], Built]


def _format_value(key: str, value: float) -> str:
    """How a ladder parameter is written in a setting string: eps-like values as 1e-03, grid
    factors as 2x, the rest as %g."""
    if key in ("eps", "epsilon"):
        return f"{value:.0e}"
    if key == "grid":
        return f"{value:g}x"
    return f"{value:g}"


@dataclass(frozen=True)
class Ladder:
    """A library's accuracy ladder on one operator family: the settings spanning its range.

    `points` are parameter dicts passed to the adapter as `Request.settings`; `quick` the indices
    of the few points the quick study runs; `tolerance(params)` the validation bound of a point
    (a gross-error gate, not an accuracy target: the error itself is the study's x-axis).
    """

    name: str
    family: str
    points: tuple[Mapping[str, float], ...]
    tolerance: Callable[[Mapping[str, float]], Tolerance]
    quick: tuple[int, ...] = ()
    description: str = ""

    def setting(self, params: Mapping[str, float]) -> str:
        """The canonical setting string of a point, e.g. 'eps=1e-03 upsampfac=2'."""
        return " ".join(f"{k}={_format_value(k, float(v))}" for k, v in params.items())

    def settings(self) -> list[str]:
        return [self.setting(p) for p in self.points]

    def point(self, setting: str) -> Mapping[str, float]:
        """The parameters of the point called `setting`; ValueError lists the valid ones."""
        for p in self.points:
            if self.setting(p) == setting:
                return p
        raise ValueError(f"ladder {self.name!r} has no point {setting!r} (valid: "
                         f"{', '.join(repr(s) for s in self.settings())})")

    def quick_points(self) -> tuple[Mapping[str, float], ...]:
        return tuple(self.points[i] for i in self.quick) or self.points


@dataclass(frozen=True, eq=False)
class Variant:
    """One implementation (a library, or one way of calling it): a registry entry.

    `build` maps an operator family ("nufft", "interp", "blocks") to the adapter that implements
    it, and `tolerances` the same families to their `Tolerance`. `backends` and `clocks` give,
    per device in `devices`, the array type and the clock. `requires` are modules that must be
    importable; `packages` maps a metadata key to the distribution whose version a run records.
    `registry.register` checks an entry is complete; fakes in tests may leave most fields empty.
    """

    id: str
    devices: tuple[str, ...]
    requires: tuple[str, ...] = ()
    title: str = ""
    colour: str = ""
    backends: Mapping[str, str] = field(default_factory=dict)
    clocks: Mapping[str, str] = field(default_factory=dict)
    build: Mapping[str, Adapter] = field(default_factory=dict)
    tolerances: Mapping[str, Tolerance] = field(default_factory=dict)
    scaling: str = ""
    notes: tuple[str, ...] = ()
    threads: str = "native"
    torch_operators: bool = False
    packages: Mapping[str, str] = field(default_factory=dict)
    ladders: tuple[Ladder, ...] = ()

    def ladder(self, family: str) -> Ladder | None:
        """This entry's accuracy ladder on `family` (None: it has none)."""
        return next((lad for lad in self.ladders if lad.family == family), None)

    def backend(self, device: str) -> str:
        """The array type on `device`; a device the entry does not declare is an error."""
        if device not in self.backends:
            raise ValueError(f"variant {self.id!r} declares no array backend for {device!r}")
        return self.backends[device]

    def clock(self, device: str) -> str:
        if device not in self.clocks:
            raise ValueError(f"variant {self.id!r} declares no clock for {device!r}")
        return self.clocks[device]

    def record_notes(self, device: str, num_threads: int) -> list[str]:
        """Facts a record of this variant carries that are not noise."""
        if self.threads == "single" and device == "cpu" and num_threads > 1:
            return [f"{self.id} is single-threaded on the CPU: num_threads does not apply"]
        return []


@dataclass(frozen=True, eq=False)
class Case:
    """An operator family in one dimensionality, e.g. `nufft2d`.

    `prepare(direction, size, variant, device, num_threads, seed)` returns a `Prepared`, or raises
    `VariantUnavailable` with a one-line reason. The catalogue's cases are made by
    `assemble.make_case`: their `variants` is a live view of the registry (every registered
    variant with an adapter for `family`, in registry order) and `prepare` the generic assembly.
    """

    id: str
    title: str
    sizes: tuple[Size, ...]
    variants: Sequence[Variant]
    prepare: Callable[..., Prepared]
    directions: tuple[str, ...] = DIRECTIONS
    direction_titles: Mapping[str, str] = field(default_factory=dict)
    family: str = ""

    def size(self, label: str) -> Size:
        for s in self.sizes:
            if s.label == label:
                return s
        raise KeyError(label)

    def variant(self, vid: str) -> Variant:
        for v in self.variants:
            if v.id == vid:
                return v
        raise KeyError(vid)
