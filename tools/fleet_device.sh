#!/usr/bin/env bash
# The gate on a host new to the history: clean and slowed FlashInfer decode runs on a lent GPU.
#
#   bash tools/fleet_device.sh [CLEAN] [BAD] [SLOWDOWN]     # defaults 6, 4, 0.03
#
# Runs suites/kernels/test_flashinfer_decode.py (suite base-b-1gpu, gate in warn mode, no
# confirm reruns) CLEAN times into $OUT/fleet_clean.db, then BAD times with every CUDA-timed
# sample SLOWDOWN longer (SUITELIB_INJECT_SLOWDOWN, suitelib/timing.py) into
# $OUT/fleet_bad.db, each run a separate process on GPU 0. Judge them against the
# committed history with `python benchmarks/fleet_device.py CLEAN_DB BAD_DB`. Needs the
# carried .dev/ folder (tools/device_setup.sh); log in $OUT/fleet.log.
set -o pipefail
clean="${1:-6}" bad="${2:-4}" slow="${3:-0.03}"
out="${OUT:-results/device}"
mkdir -p "$out"
log="$out/fleet.log"
source tools/device_setup.sh .dev >"$log" 2>&1 || { cat "$log"; exit 1; }
nvidia-smi --query-gpu=name,uuid,driver_version,clocks.max.sm,power.limit --format=csv,noheader >>"$log" 2>&1
one() {  # one run: LABEL then environment assignments
    local label="$1" t rc
    shift
    t=$(date +%s)
    env "$@" CUDA_VISIBLE_DEVICES=0 python3 -m ci_register run base-b-1gpu \
        --history "$out/fleet_$label.db" --gate warn --confirm 0 \
        --file suites/kernels/test_flashinfer_decode.py >>"$log" 2>&1
    rc=$?
    echo "RUN $label rc=$rc wall=$(( $(date +%s) - t )) s" | tee -a "$log"
}
for _ in $(seq 1 "$clean"); do one clean SUITELIB_INJECT_SLOWDOWN=; done
for _ in $(seq 1 "$bad"); do one bad SUITELIB_INJECT_SLOWDOWN="$slow"; done
grep -E "passed|failed|RUN " "$log" | tail -30
