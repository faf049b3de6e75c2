"""The one-line message a findings script gives for a case, direction, size or variant the suite
does not have, before it starts any process."""

from __future__ import annotations


def unknown_choice(case_id: str, direction: str, size: str, variant: str) -> str | None:
    """What is unknown among the four names, in one line, or None when the suite has them all."""
    from bench_suite.cases import CASES

    case = CASES.get(case_id)
    if case is None:
        return f"unknown case {case_id!r}; cases: {', '.join(CASES)}"
    for what, value, known in (("direction", direction, case.directions),
                               ("size", size, [s.label for s in case.sizes]),
                               ("variant", variant, [v.id for v in case.variants])):
        if value not in known:
            return f"{case_id} has no {what} {value!r}; it has {', '.join(known)}"
    return None
