"""Which files a catalog's [collect] globs select (pure path logic and one folder walk).

Globs are path globs as pathlib and ``glob.glob(recursive=True)`` read them: ``*`` and
``?`` stay within one folder, ``**/`` spans any number of folders, none included.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Iterable
from pathlib import Path

__all__ = ["find_test_files", "glob_match", "glob_regex", "py_files", "selected"]

_SKIP_DIRS = {"__pycache__", ".git", ".nox", ".venv", "node_modules"}


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
def _glob_regex(glob: str) -> re.Pattern[str]:
    """A path glob as pathlib and ``glob.glob(recursive=True)`` read it."""
    return re.compile(glob_regex(glob) + r"\Z")


def glob_match(rel: str, glob: str) -> bool:
    """Whether a posix path relative to the test folder matches a [collect] glob."""
    return _glob_regex(glob[2:] if glob.startswith("./") else glob).match(rel) is not None


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
