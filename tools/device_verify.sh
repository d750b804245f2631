#!/usr/bin/env bash
# Verify the GPU suites end to end on a lent GPU host, through nox, as CI would.
#
#   bash tools/device_verify.sh RUNS_1GPU [RUNS_2GPU]
#
# Runs `nox -s base-b-2gpu` RUNS_2GPU times (default 1; when 2+ GPUs are visible),
# then `nox -s base-b-1gpu` RUNS_1GPU times, each a separate process, on GPU 0 only.
# Histories (seeded from .dev/seed/*.db if present) accumulate in $OUT/base-b-1gpu.db and $OUT/base-b-2gpu.db (so later runs
# are gated against earlier ones); logs go to $OUT/runs.log. Needs the carried .dev/
# folder (tools/device_setup.sh).
set -o pipefail
runs="${1:-5}"
two="${2:-1}"
out="${OUT:-results/device}"
mkdir -p "$out"
log="$out/runs.log"
# Histories carried in .dev/seed/ continue there, so new runs are gated against them.
for f in .dev/seed/*.db; do [ -e "$f" ] && cp "$f" "$out/"; done
export GATES_COMMIT="${GATES_COMMIT:-$(cat .dev/COMMIT 2>/dev/null)}" GATES_BRANCH="${GATES_BRANCH:-main}"
source tools/device_setup.sh .dev >"$log" 2>&1 || { cat "$log"; exit 1; }
nvidia-smi --query-gpu=name,compute_cap,memory.total,driver_version --format=csv,noheader >>"$log" 2>&1
ngpu=$(nvidia-smi -L 2>/dev/null | wc -l)
echo "GPUs visible: $ngpu" | tee -a "$log"
if [ "$ngpu" -ge 2 ]; then
    for i in $(seq 1 "$two"); do
        t=$(date +%s)
        python3 -m nox -s base-b-2gpu -- --history "$out/base-b-2gpu.db" >>"$log" 2>&1
        echo "RUN base-b-2gpu #$i rc=$? wall=$(( $(date +%s) - t )) s" | tee -a "$log"
    done
fi
for i in $(seq 1 "$runs"); do
    t=$(date +%s)
    CUDA_VISIBLE_DEVICES=0 python3 -m nox -s base-b-1gpu -- --history "$out/base-b-1gpu.db" >>"$log" 2>&1
    echo "RUN base-b-1gpu #$i rc=$? wall=$(( $(date +%s) - t )) s" | tee -a "$log"
done
grep -E "passed|failed|error|verdict|regression|RUN " "$log" | tail -40
