#!/usr/bin/env bash
# Build the carried folder that tools/device_setup.sh installs on a bare GPU host.
#
#   bash tools/build_device_carry.sh [DEST]          # default DEST: .dev
#
# DEST/whl/*.whl          the wheels the device image lacks (Python 3.12, x86_64), one
#                         version of each: apache-tvm-ffi (cp312), sqlite-utils, nox and
#                         their dependencies, at the versions pinned below
# DEST/flashinfer-V.tar.xz  the flashinfer-python wheel unzipped and packed with xz -9e
#                         (97 MiB wheel -> ~22 MiB); file times are the wheel's own, so
#                         a re-extraction leaves FlashInfer's JIT cache up to date
# DEST/MANIFEST           names, sizes and sha256 of what is in DEST
#
# The image's own packages (KINDS.md: torch, numpy, scipy, pytest, pytest-timeout,
# requests, tabulate, pyyaml, tqdm, nvidia-ml-py, ninja, attrs, humanize, click ...) are
# not carried, except where a wheel below needs a newer one (click, packaging, filelock).
# Downloads go through pip (PyPI or the index pip is configured with); DEST stays under
# the 64 MiB a device call can carry (checked at the end).
set -euo pipefail

dest="${1:-.dev}"
py="${PYTHON:-python3}"
FLASHINFER=0.7.4
WHEELS=(
    "apache-tvm-ffi==0.1.15.post2"   # flashinfer 0.7.4: >=0.1.11,<0.2; cp312 binary
    "sqlite-utils==4.2.1" "sqlite-fts4==1.0.3" "click-default-group==1.2.4" "click==8.5.1"
    "nox==2026.10.20" "argcomplete==3.7.2" "colorlog==6.12.0" "dependency-groups==1.3.2"
    "virtualenv==21.15.13" "distlib==0.4.4" "platformdirs==4.14.9" "python-discovery==1.9.7"
    "packaging==26.4" "filelock==4.3.2"
)
PLATFORM=(--only-binary=:all: --no-deps --python-version 3.12 --implementation cp
          --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64
          --platform manylinux_2_24_x86_64 --platform manylinux_2_17_x86_64
          --platform manylinux2014_x86_64 --platform manylinux1_x86_64)

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$dest/whl"
rm -f "$dest"/whl/*.whl "$dest"/flashinfer-*.tar.xz "$dest/READY"
"$py" -m pip download -q "${PLATFORM[@]}" -d "$dest/whl" "${WHEELS[@]}"
"$py" -m pip download -q "${PLATFORM[@]}" -d "$work" "flashinfer-python==$FLASHINFER"

# Unzip keeps each member's time from the wheel; tar keeps those, sorted by name with
# numeric root ownership, so the same wheel gives the same tarball.
mkdir "$work/tree"
(cd "$work/tree" && "$py" -m zipfile -e "$work"/flashinfer_python-"$FLASHINFER"-*.whl . >/dev/null)
"$py" - "$work"/flashinfer_python-"$FLASHINFER"-*.whl "$work/tree" <<'PY'
# python -m zipfile does not restore member times; set them from the wheel.
import os, sys, time, zipfile
whl, root = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(whl) as z:
    times = [time.mktime(i.date_time + (0, 0, -1)) for i in z.infolist()]
    for info, t in zip(z.infolist(), times):
        os.utime(os.path.join(root, info.filename), (t, t))
newest = max(times)  # folders: one fixed time, so the tarball is the same every build
for folder, _, _ in os.walk(root):
    os.utime(folder, (newest, newest))
PY
tar --sort=name --owner=0 --group=0 --numeric-owner -C "$work/tree" -cf - . \
    | xz -9e -T1 >"$dest/flashinfer-$FLASHINFER.tar.xz"

(cd "$dest" && find whl flashinfer-*.tar.xz -type f -exec sha256sum {} + | sort -k2) >"$dest/MANIFEST"
size=$(du -sb "$dest" | cut -f1)
echo "build_device_carry: $dest holds $((size / 1048576)) MiB ($(ls "$dest"/whl | wc -l) wheels + FlashInfer $FLASHINFER)"
if [ "$size" -ge $((64 * 1048576)) ]; then
    echo "build_device_carry: $dest is over the 64 MiB a device call carries" >&2
    exit 1
fi
