"""SIGINT and SIGTERM at any moment of a run: stop, keep what was measured, say how to resume.

Why more than Python's own KeyboardInterrupt: SIGTERM would end the process with no word; an
interrupt raised inside a library call can be swallowed there (torch.compile runs code whose
exceptions are printed as "Exception ignored in ..." and dropped), and the run then went on and
replaced `latest/`; and a signal that lands in the middle of writing a file must not cut the write.

So `handled()` turns both signals into `Interrupted` (a KeyboardInterrupt, which the runner
already treats as "stop and keep") and remembers that a stop was asked for; `raise_if_requested()`
raises it again after a library swallowed it (the results writer calls it after every record);
`held()` delays both signals until a block (a file write) is complete; `ignore_further()`
shields the last save after a stop from a second Ctrl-C, and (for the process that is the command)
the rest of its exit: Python restores the default handlers while it finalizes, and a late Ctrl-C
then killed the process without a word.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator
from typing import Any

SIGNALS = (signal.SIGINT, signal.SIGTERM)
WORDS = {signal.SIGINT: "interrupted", signal.SIGTERM: "terminated"}

_requested: int | None = None


class Interrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM during a run; `exit_code` is the shell's 128 + signal (130, 143)."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = int(signum)

    @property
    def exit_code(self) -> int:
        return 128 + self.signum

    @property
    def word(self) -> str:
        return WORDS.get(self.signum, "stopped")


def as_interrupted(exc: BaseException | None) -> Interrupted:
    """A plain KeyboardInterrupt (Python's own SIGINT handler) counts as SIGINT."""
    if isinstance(exc, Interrupted):
        return exc
    return Interrupted(_requested or signal.SIGINT)


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def _install(handler: Callable[[int, Any], None] | int) -> dict[int, Any]:
    return {s: signal.signal(s, handler) for s in SIGNALS}


def _restore(previous: dict[int, Any]) -> None:
    for s, h in previous.items():
        # None: the handler was not set from Python; the default is the closest we can restore.
        signal.signal(s, signal.SIG_DFL if h is None else h)


def _raise(signum: int, frame: Any) -> None:  # noqa: ARG001 - signal handler signature
    global _requested
    _requested = signum
    raise Interrupted(signum)


@contextlib.contextmanager
def handled(keep_ignoring_after_stop: bool = False) -> Iterator[None]:
    """Within the block, SIGINT and SIGTERM raise `Interrupted` and are remembered. After the
    block the previous handlers return, except with `keep_ignoring_after_stop` when a signal
    stopped the block: both stay ignored (the process is about to exit)."""
    global _requested
    if not _main_thread():
        yield
        return
    _requested = None
    previous = _install(_raise)
    try:
        yield
    finally:
        if keep_ignoring_after_stop and _requested is not None:
            _install(signal.SIG_IGN)
        else:
            _restore(previous)
        _requested = None


def requested() -> int | None:
    """The signal that asked this run to stop, or None."""
    return _requested


def raise_if_requested() -> None:
    """Raise `Interrupted` again when a stop was asked for (the first one may have been
    swallowed by a library). A no-op outside `handled()`."""
    if _requested is not None:
        raise Interrupted(_requested)


@contextlib.contextmanager
def held() -> Iterator[None]:
    """SIGINT and SIGTERM that arrive inside the block are delivered when it ends, to the
    handlers in force before it: a write is never cut in half."""
    if not _main_thread():
        yield
        return
    pending: list[int] = []
    previous = _install(lambda signum, frame: pending.append(signum))
    try:
        yield
    finally:
        _restore(previous)
        for signum in dict.fromkeys(pending):
            signal.raise_signal(signum)


def ignore_further() -> None:
    """Ignore SIGINT and SIGTERM from now on (until `handled()` ends): a stop is under way."""
    if _main_thread():
        _install(signal.SIG_IGN)
