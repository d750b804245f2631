#!/usr/bin/env bash
# Offline setup of a bare GPU machine (no package registry) from a carried folder.
#
#   source tools/device_setup.sh [CARRY_DIR]      # default CARRY_DIR: .dev
#
# CARRY_DIR holds:
#   whl/*.whl                   wheels the image lacks (apache-tvm-ffi cp312, sqlite-utils,
#                               nox and their dependencies), one version of each
#   flashinfer-*.tar.xz         the unzipped flashinfer-python wheel (xz -9e: ~22 MiB
#                               instead of 97 MiB), unpacked as-is into the site dir
# Build CARRY_DIR with tools/build_device_carry.sh. It installs both into $DEVICE_SITE
# (default /tmp/site), puts that and the repo root on PYTHONPATH, dates the files of
# flashinfer and tvm_ffi 1980-01-01 (suitelib/flashinfer_cache.py: a restored or earlier
# JIT cache then stays valid; pip dates what it installs now, which made ninja rebuild
# every kernel), and keeps NVLink multicast off (NCCL_NVLS_ENABLE=0 and friends), which
# every NCCL program on the shared hosts must. Sourced, so the exports stay.

_ds_main() {
    local dev="${1:-.dev}" site="${DEVICE_SITE:-/tmp/site}"
    if [ ! -d "$dev/whl" ]; then
        echo "device_setup: no $dev/whl; carry the folder (run's carry=[\"$dev\"])" >&2
        return 2
    fi
    mkdir -p "$site" || return 1
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target "$site" "$dev"/whl/*.whl || { echo "device_setup: pip install failed" >&2; return 1; }
    local tarball
    for tarball in "$dev"/flashinfer-*.tar.xz; do
        [ -e "$tarball" ] || { echo "device_setup: no $dev/flashinfer-*.tar.xz" >&2; return 1; }
        tar -xJf "$tarball" -C "$site" || { echo "device_setup: cannot unpack $tarball" >&2; return 1; }
    done
    export PYTHONPATH="$site:$PWD${PYTHONPATH:+:$PYTHONPATH}"
    python3 -m suitelib.flashinfer_cache pin || { echo "device_setup: cannot date FlashInfer's files" >&2; return 1; }
    export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
    export PYTHONUNBUFFERED=1
    python3 - <<'PY' || { echo "device_setup: imports failed" >&2; return 1; }
import importlib
import torch
mods = ["flashinfer", "tvm_ffi", "sqlite_utils", "nox", "pytest", "pytest_timeout"]
vers = {m: getattr(importlib.import_module(m), "__version__", "?") for m in mods}
gpus = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
print("device_setup:", f"torch {torch.__version__} cuda {torch.version.cuda}", vers, gpus)
PY
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
    echo "device_setup: source this file (source tools/device_setup.sh [CARRY_DIR])" >&2
    exit 2
fi
_ds_main "$@"
