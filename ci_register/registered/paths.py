"""Which files a catalog's [collect] globs select (pure path logic and one folder walk).

Globs are path globs as pathlib and ``glob.glob(recursive=True)`` read them: ``*`` and
``?`` stay within one folder, ``**/`` spans any number of folders, none included.

They are matched with RE2 (google-re2, also pathspec's linear backend), not Python's
``re``: ``re`` backtracks on a glob such as ``*a*a*a*a*a*a*a*a*a*a*a*ab`` (seconds at 28
characters, 10x per 4 more: ``benchmarks/results/bench_libraries.md``, the same pattern
through pathspec's ``re`` backend); RE2 takes microseconds at any length
(``tests/test_hostile_collect.py::test_a_hostile_glob_matches_in_linear_time``).
pathspec itself is not used here: a [collect] glob is a pathlib glob relative to the test
folder (``*.py`` is the top folder only), where gitignore's ``*.py`` matches at any depth.
"""

from __future__ import annotations

import errno
import functools
import json
import os
import re
import stat
from collections.abc import Iterable
from pathlib import Path

__all__ = ["NotRegularFile", "find_test_files", "glob_match", "glob_regex", "py_files",
           "read_json", "read_regular", "selected"]

_SKIP_DIRS = {"__pycache__", ".git", ".nox", ".venv", "node_modules"}


class NotRegularFile(OSError):
    """A path named like a source file is a FIFO, a device or a folder: never read."""


def read_regular(path: str | os.PathLike[str], limit: int | None = None) -> bytes:
    """The bytes of a regular file (at most ``limit``); `NotRegularFile` for anything else.

    Opened with ``O_NONBLOCK`` and checked with ``fstat`` on the open descriptor: a FIFO
    named ``test_x.py`` would block a plain ``open`` forever, and a check before the open
    could be raced by a swap."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotRegularFile(errno.EINVAL, "not a regular file (a FIFO, device or folder)",
                                 os.fspath(path))
        os.set_blocking(fd, True)
        with os.fdopen(fd, "rb", closefd=True) as handle:
            fd = -1
            return handle.read() if limit is None else handle.read(limit)
    finally:
        if fd >= 0:
            os.close(fd)


# The runner's plan of a 1,000-file suite is under 1 MB.
MAX_PLAN_BYTES = 64 << 20


def read_json(path: str | os.PathLike[str], limit: int = MAX_PLAN_BYTES) -> object:
    """The JSON value of a regular UTF-8 file of at most ``limit`` bytes.

    `OSError` (`NotRegularFile` for a FIFO, device or folder) or `ValueError` (too big, not
    UTF-8, not JSON), each with a message fit to follow the path in a one-line error."""
    data = read_regular(path, limit + 1)
    if len(data) > limit:
        raise ValueError(f"over {limit >> 20} MiB" if limit >= 1 << 20 else f"over {limit} bytes")
    try:
        return json.loads(data.decode("utf-8"))
    except RecursionError:  # json recurses per nested array or object
        raise ValueError("arrays or objects nested too deeply to read") from None


def _excluded(rel: str, patterns: Iterable[str]) -> bool:
    return any(glob_match(rel, p) for p in patterns)


def glob_regex(glob: str, *, classes: bool = True) -> str:
    """The regex (unanchored) of a path glob: ``*`` and ``?`` stay within one folder,
    ``**/`` spans any number of folders (none included), ``**`` anything. ``[abc]`` and
    ``[!abc]`` are character classes as in pathlib; ``classes=False`` takes ``[``
    literally (GitHub's CODEOWNERS has no ranges; `gates.report.owners` uses this too)."""
    out, i = [], 0
    while i < len(glob):
        if glob.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif glob.startswith("**", i):
            out.append(".*")
            i += 2
        elif glob[i] == "*":
            out.append("[^/]*")
            i += 1
        elif glob[i] == "?":
            out.append("[^/]")
            i += 1
        elif classes and glob[i] == "[" and "]" in glob[i + 2:]:
            j = glob.index("]", i + 2)
            body = glob[i + 1:j]
            out.append("[" + ("^" + re.escape(body[1:]) if body[:1] == "!" else re.escape(body)) + "]")
            i = j + 1
        else:
            out.append(re.escape(glob[i]))
            i += 1
    return "".join(out)


@functools.lru_cache(maxsize=256)
def _glob_regex(glob: str):
    """A path glob as pathlib and ``glob.glob(recursive=True)`` read it (an RE2 pattern)."""
    try:
        import re2  # noqa: PLC0415 - google-re2, a dependency; loaded when globs are matched
    except ImportError:
        # A GPU image's own Python may lack it (`ci_register run` needs only RUN_NEEDS
        # there); the globs are then the catalog's own, written by the project, not data.
        return re.compile(glob_regex(glob) + r"\Z")
    return re2.compile(glob_regex(glob))


def glob_match(rel: str, glob: str) -> bool:
    """Whether a posix path relative to the test folder matches a [collect] glob."""
    glob = glob[2:] if glob.startswith("./") else glob
    if not rel.isascii() and not _utf8(rel):
        # A file name of bytes that are not UTF-8 (lone surrogates here): RE2 cannot take
        # it; the pattern is linear on it anyway.
        return re.compile(glob_regex(glob) + r"\Z").match(rel) is not None
    return _glob_regex(glob).fullmatch(rel) is not None


def _utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def py_files(root: Path) -> list[tuple[str, str]]:
    """(full path, posix path relative to root) of every .py file under root, skipping
    caches, virtualenvs and hidden folders; sorted, strings (pathlib per file is slow)."""
    found: list[tuple[str, str]] = []
    top = str(root)
    for dirpath, dirnames, filenames in os.walk(top):
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS and not d.startswith("."))
        rel_dir = os.path.relpath(dirpath, top).replace(os.sep, "/")
        prefix = "" if rel_dir == "." else rel_dir + "/"
        for fn in sorted(filenames):
            if fn.endswith(".py"):
                found.append((os.path.join(dirpath, fn), prefix + fn))
    return found


def selected(rel: str, catalog_globs: Iterable[str], exclude: Iterable[str]) -> bool:
    return any(glob_match(rel, g) for g in catalog_globs) and not _excluded(rel, exclude)


def find_test_files(root: Path, globs: Iterable[str], exclude: Iterable[str] = ()) -> list[Path]:
    """Files under root matching any glob, skipping caches and virtualenvs."""
    globs, exclude = list(globs), list(exclude)
    return [Path(full) for full, rel in py_files(root) if selected(rel, globs, exclude)]
