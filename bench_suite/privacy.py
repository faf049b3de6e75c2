"""Keep local paths, user and host names out of everything a run stores (results are published).

`scrub(text)` rewrites a string: the repository root becomes `.`, the Python environment
`<python>`, the home directory `~`, the user name `<user>` and the host name `<host>`. Commands
keep their arguments with paths made relative the same way.
"""

from __future__ import annotations

import functools
import getpass
import os
import socket
import sys
from collections.abc import Sequence
from pathlib import Path


@functools.cache
def _repository_root() -> str | None:
    here = Path.cwd().resolve()
    for candidate in (here, *here.parents):
        if (candidate / ".git").exists():
            return str(candidate)
    return None


@functools.cache
def _replacements() -> list[tuple[str, str]]:
    """(local text, public text), longest first so a path inside another is caught first."""
    pairs: list[tuple[str, str]] = []
    root = _repository_root()
    if root:
        pairs += [(root + os.sep, ""), (root, ".")]
    for prefix in {sys.prefix, sys.base_prefix, sys.exec_prefix}:
        if prefix and prefix != os.sep:
            pairs.append((prefix, "<python>"))
    home = os.path.expanduser("~")
    if home and home != os.sep:
        pairs.append((home, "~"))
    for name, public in ((_user(), "<user>"), (_host(), "<host>")):
        if name and len(name) >= 3:  # a one-letter name would rewrite ordinary words
            pairs.append((name, public))
    return sorted(pairs, key=lambda p: len(p[0]), reverse=True)


def _user() -> str | None:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return None


def _host() -> str | None:
    try:
        return socket.gethostname()
    except OSError:
        return None


def scrub(text: str) -> str:
    """`text` without local paths, user or host names (see the module doc)."""
    for local, public in _replacements():
        text = text.replace(local, public)
    return text


def command_line(argv: Sequence[str]) -> str:
    """The command as typed, program name without its directory, paths scrubbed."""
    if not argv:
        return ""
    return " ".join([Path(argv[0]).name, *(scrub(a) for a in argv[1:])])


PATH_LIKE_SUFFIXES = ("_DIR", "_PATH", "_HOME", "_FILE")


def environment_variable(name: str, value: str) -> str:
    """Thread settings and policies by value; anything that names a location by name only."""
    if name.endswith(PATH_LIKE_SUFFIXES) or os.sep in value:
        return "(set)"
    return scrub(value)
