"""FlashInfer's JIT cache: the key names what a cached object depends on, and pinned
file times keep ninja from rebuilding after the same packages are installed again."""

from __future__ import annotations

import importlib
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from suitelib import flashinfer_cache as fc


def _dist(site: Path, name: str, version: str, package: str, files: dict[str, str]) -> None:
    """An installed distribution as pip leaves it: package files plus dist-info/RECORD."""
    di = site / f"{name.replace('-', '_')}-{version}.dist-info"
    di.mkdir(parents=True)
    (di / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    record = []
    for rel, text in files.items():
        p = site / package / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
        record.append(f"{package}/{rel},,")
    record += [f"{di.name}/METADATA,,", f"{di.name}/RECORD,,"]
    (di / "RECORD").write_text("\n".join(record) + "\n")


@pytest.fixture
def site(tmp_path, monkeypatch):
    site = tmp_path / "site"
    _dist(site, "flashinfer-python", "0.7.4", "flashinfer", {"data/include/fi.h": "#define FI 1\n"})
    _dist(site, "apache-tvm-ffi", "0.1.15.post2", "tvm_ffi", {"include/tvm.h": "#define TVM 1\n"})
    cuda = tmp_path / "cuda"
    (cuda / "bin").mkdir(parents=True)
    nvcc = cuda / "bin" / "nvcc"
    nvcc.write_text("#!/bin/sh\necho 'Cuda compilation tools, release 13.0, V13.0.88'\n")
    nvcc.chmod(0o755)
    monkeypatch.syspath_prepend(str(site))
    importlib.invalidate_caches()
    monkeypatch.setenv("CUDA_HOME", str(cuda))
    monkeypatch.setenv("FLASHINFER_CUDA_ARCH_LIST", "9.0a")
    monkeypatch.setenv("FLASHINFER_WORKSPACE_BASE", str(tmp_path / "ws"))
    return site


def test_key_names_versions_cuda_arch_python_and_layout(site, monkeypatch):
    k = fc.key()
    py = f"{sys.version_info.major}.{sys.version_info.minor}"
    assert k.startswith(f"flashinfer-jit-0.7.4-tvmffi0.1.15.post2-cuda13.0.88-sm90a-py{py}-"), k
    assert fc.cache_dir() == site.parent / "ws" / ".cache" / "flashinfer" / "0.7.4"
    # Another CUDA folder enters every command line: another cache, not a useless one.
    other = site.parent / "cuda2"
    shutil.copytree(site.parent / "cuda", other)
    monkeypatch.setenv("CUDA_HOME", str(other))
    assert fc.key() != k
    monkeypatch.setenv("FLASHINFER_CUDA_ARCH_LIST", "8.0 9.0a")
    assert "-sm80+sm90a-" in fc.key()


def test_key_fails_in_one_line_without_the_package(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(fc, "PACKAGES", ("no-such-dist-xyz", "apache-tvm-ffi"))
    with pytest.raises(fc.CacheError, match="no-such-dist-xyz is not installed.*pip install no-such-dist-xyz"):
        fc.key()
    assert fc.main(["key"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("flashinfer_cache: no-such-dist-xyz is not installed")


def test_pin_dates_every_installed_file(site):
    n = fc.pin_times()
    assert n == 6  # two package files and two dist-info files each
    for p in (site / "flashinfer" / "data" / "include" / "fi.h", site / "tvm_ffi" / "include" / "tvm.h"):
        assert p.stat().st_mtime == fc.PINNED_TIME


@pytest.mark.skipif(not (shutil.which("ninja") and shutil.which("cc")), reason="needs ninja and a C compiler")
def test_reinstalled_headers_rebuild_everything_unless_pinned(site, tmp_path):
    """What FlashInfer's JIT does, in small: ninja compiles a source that includes a
    package header (depfile), then the package is installed again (pip dates files now).
    -MD as nvcc's --generate-dependencies-with-compile: -isystem headers are recorded."""
    header = site / "tvm_ffi" / "include" / "tvm.h"
    build = tmp_path / "build"
    build.mkdir()
    (build / "k.c").write_text('#include "tvm.h"\nint k(void) { return TVM; }\n')
    (build / "build.ninja").write_text(
        f"rule cc\n  command = cc -MD -MF $out.d -isystem {header.parent} -c $in -o $out\n"
        "  depfile = $out.d\n  deps = gcc\nbuild k.o: cc k.c\n")

    def would_run() -> int:
        r = subprocess.run(["ninja", "-n", "-C", str(build)], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        return sum(line.startswith("[") for line in r.stdout.splitlines())

    fc.pin_times()
    old = time.time() - 3600  # the sources were written before the build, as FlashInfer's are
    os.utime(build / "k.c", (old, old))
    subprocess.run(["ninja", "-C", str(build)], check=True, capture_output=True, timeout=60)
    assert would_run() == 0
    header.write_text(header.read_text())  # the same file, installed again (a later job)
    later = time.time() + 60
    os.utime(header, (later, later))
    assert would_run() == 1  # the cache is worth nothing: everything rebuilds
    fc.pin_times()
    assert would_run() == 0  # pinned: the cached object is up to date
