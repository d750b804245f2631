#!/usr/bin/env bash
# Run-to-run noise of FlashInfer decode on a lent GPU (issue 56), in one device call:
#
#   [MODES=perm,paced] [SUITE=1] bash tools/gpu_noise.sh PROCS [--diag|-] [DEADLINE_S]
#
# 1. tools/device_setup.sh .dev (carried wheels and FlashInfer);
# 2. suites/kernels/test_flashinfer_decode.py once through pytest, recorded into
#    $OUT/suite.db: the suite for real, and FlashInfer's JIT compiles every decode
#    kernel here, once, so the timed processes below start on a warm cache;
#    (SUITE=0 leaves this step out: the first process compiles then);
# 3. PROCS fresh processes of `benchmarks/gpu_noise.py proc --modes $MODES` (--diag: the
#    diagnostics too; `-`: none), one after another, each appending a line to $OUT/procs.jsonl; no new process
#    starts once DEADLINE_S (default 400) seconds have passed since the start;
# 4. `gpu_noise.py summarize` into $OUT/summary.{json,md} and $OUT/series.json (the samples
#    as benchmarks/series.py's suite model reads them); nvidia-smi's clocks, power and
#    performance state before and after in $OUT/smi.txt. Everything is logged to
#    $OUT/noise.log.
set -o pipefail
procs="${1:-16}"
diag="${2:-}"
[ "$diag" = "-" ] && diag=""
modes="${MODES:-perm,paced}"
deadline="${3:-400}"
out="${OUT:-results/gpu_noise}"
mkdir -p "$out"
log="$out/noise.log"
t0=$(date +%s)
export GATES_COMMIT="${GATES_COMMIT:-$(cat .dev/COMMIT 2>/dev/null || echo unknown)}" GATES_BRANCH="${GATES_BRANCH:-noise}"
source tools/device_setup.sh .dev >>"$log" 2>&1 || { cat "$log"; exit 1; }
{ echo "== start"; nvidia-smi -q -d CLOCK,PERFORMANCE,POWER,TEMPERATURE; } >"$out/smi.txt" 2>&1
nvidia-smi --query-gpu=name,uuid,driver_version,clocks.sm,clocks.mem,power.draw,power.limit --format=csv | tee -a "$log"
if [ "${SUITE:-1}" != 0 ]; then
    echo "== suite (cold JIT cache)" | tee -a "$log"
    timeout 300 python3 -m pytest suites/kernels/test_flashinfer_decode.py -q -p no:cacheprovider -p gates.record.plugin \
        --gates-suite base-b-1gpu --gates-history "$out/suite.db" 2>&1 | tail -25 | tee -a "$log"
    echo "suite rc=$? at $(( $(date +%s) - t0 )) s" | tee -a "$log"
    # One file back, not three: fold the history's write-ahead log into it.
    python3 -c "import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); c.execute('pragma wal_checkpoint(TRUNCATE)'); c.execute('pragma journal_mode=DELETE'); c.close()" "$out/suite.db" 2>&1 | tee -a "$log"
fi
for i in $(seq 0 $((procs - 1))); do
    if [ $(( $(date +%s) - t0 )) -gt "$deadline" ]; then
        echo "deadline: stopped before process $i" | tee -a "$log"
        break
    fi
    timeout 120 python3 benchmarks/gpu_noise.py proc --out "$out/procs.jsonl" --index "$i" --modes "$modes" $diag 2>&1 | tee -a "$log"
done
{ echo "== end"; nvidia-smi -q -d CLOCK,PERFORMANCE,POWER,TEMPERATURE; } >>"$out/smi.txt" 2>&1
python3 benchmarks/gpu_noise.py summarize "$out/procs.jsonl" --json "$out/summary.json" \
    --md "$out/summary.md" --series-json "$out/series.json" 2>&1 | tee -a "$log"
echo "total $(( $(date +%s) - t0 )) s" | tee -a "$log"
