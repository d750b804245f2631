"""FlashInfer's JIT kernels, carried between runs: the cache's folder, its key, and the
file times that keep a restored cache valid.

FlashInfer compiles a kernel the first time a process asks for it and keeps the build
under ``$FLASHINFER_WORKSPACE_BASE/.cache/flashinfer/<version>/<arch>/`` (default base:
``$HOME``): ``generated/`` (sources it wrote, rewritten only when their text changes)
and ``cached_ops/<module>/`` (``build.ninja``, objects, the ``.so``, ninja's
``.ninja_log`` and ``.ninja_deps``). Whether a cached module is reused is decided by
ninja alone (``flashinfer/jit/core.py``: ``JitSpecNvcc.build`` always runs ninja, "the
freshness of the JIT-path .so is owned by ninja's dependency scan"). Ninja rebuilds an
object when

1. its command line changed (the ``.ninja_log`` hash): the commands hold absolute paths
   of the Python headers, CUDA, and the flashinfer and tvm_ffi packages' include
   folders, and the nvcc flags for the GPU architecture;
2. any input is newer than the output: the source and every header the compiler
   reported (``.ninja_deps``), FlashInfer's own headers and tvm_ffi's among them.

pip writes every file of a wheel it installs with the time of the install, so a fresh
install of the same flashinfer-python or apache-tvm-ffi makes every header "newer" than
every cached object and ninja rebuilds all of them: a restored cache is worth nothing.
:func:`pin_times` sets the times of those two packages' files to 1980-01-01 (the
earliest time a wheel can record), older than any build. That is safe because the
cache :func:`key` names both packages' versions (and CUDA's, the GPU architecture and
the Python and package locations that enter the command lines): a different package is a
different cache, never a stale one.

    python -m suitelib.flashinfer_cache key      # the cache key, one line
    python -m suitelib.flashinfer_cache path     # the folder to cache
    python -m suitelib.flashinfer_cache github   # key=... and path=... for $GITHUB_OUTPUT
    python -m suitelib.flashinfer_cache pin      # pin both packages' file times

Nothing here imports flashinfer or torch (seconds, and a GPU): versions come from the
installed distributions' metadata, the GPU from ``nvidia-smi``, CUDA from ``nvcc``.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

__all__ = ["CacheError", "PACKAGES", "PINNED_TIME", "cache_dir", "cuda_release", "gpu_arch", "key", "main",
           "pin_times"]

PACKAGES = ("flashinfer-python", "apache-tvm-ffi")  # whose headers every kernel includes
PINNED_TIME = 315532800  # 1980-01-01T00:00:00Z, the earliest time a wheel can record
_TIMEOUT_S = 30


class CacheError(Exception):
    """What is missing to name the cache (a package, nvcc, a GPU): one line with the fix."""


def cache_dir(version: str | None = None) -> Path:
    """FlashInfer's cache folder for the installed version (every architecture in it)."""
    base = Path(os.environ.get("FLASHINFER_WORKSPACE_BASE") or Path.home())
    return base / ".cache" / "flashinfer" / (version or _version("flashinfer-python"))


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        raise CacheError(f"{dist} is not installed in {sys.executable}; "
                         f"pip install {dist}") from None


def _cuda_home() -> Path:
    # As flashinfer.jit.cpp_ext.get_cuda_path finds it.
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    if home:
        return Path(home)
    nvcc = shutil.which("nvcc")
    return Path(nvcc).resolve().parents[1] if nvcc else Path("/usr/local/cuda")


def cuda_release() -> str:
    """nvcc's version, e.g. ``13.0.88`` (the compiler that built the cached objects)."""
    nvcc = _cuda_home() / "bin" / "nvcc"
    try:
        out = subprocess.run([str(nvcc), "--version"], capture_output=True, text=True,
                             timeout=_TIMEOUT_S, check=True).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        raise CacheError(f"cannot run {nvcc} --version ({exc}); "
                         "set CUDA_HOME to the CUDA toolkit FlashInfer compiles with") from None
    m = re.search(r"V(\d+\.\d+\.\d+)", out) or re.search(r"release (\d+\.\d+)", out)
    if not m:
        raise CacheError(f"no version in `{nvcc} --version`: {out.strip()[:200]!r}")
    return m.group(1)


def gpu_arch() -> str:
    """The architectures FlashInfer compiles for: FLASHINFER_CUDA_ARCH_LIST when set, else
    the visible GPUs' compute capabilities (``sm90``, ``sm80+sm90``)."""
    listed = os.environ.get("FLASHINFER_CUDA_ARCH_LIST", "").split()
    if listed:
        return "+".join("sm" + a.replace(".", "") for a in sorted(set(listed)))
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=compute_cap", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=_TIMEOUT_S, check=True).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        raise CacheError(f"nvidia-smi failed ({exc}); on a machine without a "
                         "GPU set FLASHINFER_CUDA_ARCH_LIST (e.g. '9.0a')") from None
    caps = sorted({c.strip().replace(".", "") for c in out.splitlines() if c.strip()})
    if not caps:
        raise CacheError("nvidia-smi lists no GPU")
    return "+".join(f"sm{c}" for c in caps)


def _package_folder(dist: str) -> Path:
    # The folder whose path enters the compile commands (its include/ and data/).
    files = importlib.metadata.distribution(dist).files or []
    top = next((f.parts[0] for f in files if len(f.parts) > 1 and not f.parts[0].endswith(
        (".dist-info", ".data")) and f.parts[0] != ".."), None)
    if top is None:
        raise CacheError(f"{dist} lists no package folder in its RECORD")
    return Path(importlib.metadata.distribution(dist).locate_file(top)).resolve()


def key() -> str:
    """``flashinfer-jit-<fi>-tvmffi<tv>-cuda<nvcc>-<arch>-py<X.Y>-<where>``: everything a
    cached object's validity depends on; ``where`` hashes the absolute paths that enter
    the compile commands (Python headers, CUDA, both packages), so another layout gets its
    own cache instead of one whose every command line differs."""
    fi, tv = (_version(d) for d in PACKAGES)
    where = "\n".join([sysconfig.get_path("include"), str(_cuda_home()),
                       *(str(_package_folder(d)) for d in PACKAGES)])
    digest = hashlib.sha256(where.encode()).hexdigest()[:8]
    py = f"{sys.version_info.major}.{sys.version_info.minor}"
    return f"flashinfer-jit-{fi}-tvmffi{tv}-cuda{cuda_release()}-{gpu_arch()}-py{py}-{digest}"


def pin_times(dists: tuple[str, ...] = PACKAGES, when: int = PINNED_TIME) -> int:
    """Set every installed file of ``dists`` to ``when``; returns how many files were set.

    Run it after installing the packages and before the first kernel build: a reinstall
    of the same wheels then leaves every cached object up to date (see the module's
    docstring for why that is safe)."""
    count = 0
    for dist in dists:
        _version(dist)  # a one-line error when it is not installed
        d = importlib.metadata.distribution(dist)
        for f in d.files or []:
            path = Path(d.locate_file(f))
            if path.is_file():
                os.utime(path, (when, when), follow_symlinks=False)
                count += 1
    return count


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m suitelib.flashinfer_cache",
                                 description="FlashInfer's JIT cache: key, folder, file times.")
    ap.add_argument("command", choices=["key", "path", "github", "pin"])
    args = ap.parse_args(argv)
    try:
        return _command(args.command)
    except CacheError as exc:
        print(f"flashinfer_cache: {exc}", file=sys.stderr)
        return 2


def _command(command: str) -> int:
    if command == "key":
        print(key())
    elif command == "path":
        print(cache_dir())
    elif command == "github":
        print(f"key={key()}")
        print(f"path={cache_dir()}")
    else:
        n = pin_times()
        print(f"flashinfer_cache: {n} files of {', '.join(PACKAGES)} dated 1980-01-01")
    return 0


if __name__ == "__main__":
    sys.exit(main())
