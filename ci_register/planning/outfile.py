"""Writing an output file without destroying anything: `check_output` and `write_output`.

`gate-report --out FILE` and `ci_register matrix --output FILE` write where the
user points. A typo there must not eat a history (``--out history.db``), an input
of the same command, or an unrelated file: an SQLite file or an input is never
overwritten; any other existing file only when it looks like this command's own
earlier output, or with ``--force``. The write goes to a temporary file renamed
into place, so a crash mid-write leaves the old file whole.

Stdlib only: `gates` uses it too (gates may import ci_register, not the reverse).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path

__all__ = ["OutputError", "check_output", "write_output"]

_SQLITE_MAGIC = b"SQLite format 3\x00"
_PEEK = 4096


class OutputError(ValueError):
    """The output path would overwrite something it must not; the message names the fix."""


def _same(a: Path, b: Path) -> bool:
    try:
        return a.exists() and b.exists() and a.samefile(b)
    except OSError:
        return False


def check_output(path: Path, *, inputs: Iterable[Path] = (), option: str = "--out",
                 ours: Callable[[bytes], bool] = lambda head: False,
                 force: bool = False) -> None:
    """Raise `OutputError` unless writing `path` destroys nothing that matters.

    `inputs` are the files the command reads (a history, shards, a catalog);
    `ours(head)` says whether the first bytes of an existing file are this
    command's own output (safe to replace).
    """
    if path.is_dir():
        raise OutputError(f"{option} {path}: is a directory; give a file path")
    for source in inputs:
        if _same(path, Path(source)):
            raise OutputError(f"{option} {path}: is an input of this command ({source}); "
                              "write the output to another file")
    if not path.exists() or not path.is_file():
        # Nothing there, or a FIFO, a pipe (/dev/stdout) or a device, written in place:
        # reading its head would wait for a writer or eat what a reader is to get.
        return
    try:
        with path.open("rb") as handle:
            head = handle.read(_PEEK)
    except OSError as exc:
        raise OutputError(f"{option} {path}: cannot read the existing file ({exc.strerror or exc}); "
                          "choose another path") from None
    if head.startswith(_SQLITE_MAGIC):
        raise OutputError(f"{option} {path}: is an SQLite database (a history?); never "
                          "overwritten, write the output to another file")
    if head and not ours(head) and not force:
        raise OutputError(f"{option} {path}: exists and is not an earlier output of this "
                          "command; choose another path, or pass --force to replace it")


def _mode(path: Path) -> int:
    try:
        return path.stat().st_mode & 0o7777
    except OSError:
        mask = os.umask(0o022)
        os.umask(mask)
        return 0o666 & ~mask


def write_output(path: Path, text: str, *, option: str = "--out") -> None:
    """Write `text` to `path` through a temporary file renamed into place.

    A symlink is followed (the link stays a link); a device or pipe (``/dev/stdout``,
    a FIFO) is written in place, never replaced by a regular file.
    """
    path = Path(path)
    if path.exists() and not path.is_file():
        # Opened by the name given: the real path of /dev/stdout on a pipe is
        # /proc/N/fd/pipe:[...], no name anything can open.
        try:
            with path.open("w", encoding="utf-8") as handle:
                handle.write(text)
        except OSError as exc:
            raise OutputError(f"{option} {path}: cannot write ({exc.strerror or exc}); choose a "
                              "writable path") from None
        return
    path = Path(os.path.realpath(path))
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        try:
            # mkstemp makes the file 0600; the output gets the mode an ordinary write
            # would give it: the replaced file's, else 0666 less the umask.
            os.fchmod(fd, _mode(path))
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(text)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError as exc:
        raise OutputError(f"{option} {path}: cannot write ({exc.strerror or exc}); choose a "
                          "writable path") from None
