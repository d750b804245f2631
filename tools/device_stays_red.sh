#!/usr/bin/env bash
# A regression stays red on a host new to the history (issue 52): clean, then slowed, runs.
#
#   bash tools/device_stays_red.sh [CLEAN] [BAD] [WORK] [TARGET]   # defaults 6, 3, 1.03,
#       suites/kernels/test_flashinfer_decode.py::test_batch_decode_fa2_perf
#
# Copies the committed history.db to $OUT/stays_red.db (a host it has never seen), then
# runs TARGET (suite base-b-1gpu, gate enforce, the runner's confirm reruns) CLEAN
# times as it is, then BAD times with the fa2 decode work
# raised by WORK behind the same metric keys (every fa2 request's KV length times WORK,
# the keys and byte counts kept: the same metric, more work). Each run is a separate
# process on GPU 0; its exit code goes to $OUT/stays_red.log ("RUN clean|bad rc=N").
# Every bad run should exit 1 (docs/gates/design.md, "A red stays red").
# The raised work is a patch of the test file for the bad runs only, undone at the end:
# run it on a copy of the tree (the device's), never where the file has local edits.
# Needs the carried .dev/ folder (tools/device_setup.sh).
set -o pipefail
clean="${1:-6}" bad="${2:-3}" work="${3:-1.03}"
target="${4:-suites/kernels/test_flashinfer_decode.py::test_batch_decode_fa2_perf}"
out="${OUT:-results/device}"
mkdir -p "$out"
log="$out/stays_red.log"
db="$out/stays_red.db"
test_file=suites/kernels/test_flashinfer_decode.py
cp history.db "$db"
source tools/device_setup.sh .dev >"$log" 2>&1 || { cat "$log"; exit 1; }
nvidia-smi --query-gpu=name,uuid,driver_version --format=csv,noheader >>"$log" 2>&1
cp "$test_file" "$out/.test_file.orig"
restore() { cp "$out/.test_file.orig" "$test_file"; rm -f "$out/.test_file.orig"; }
trap restore EXIT
one() {
    local label="$1" t rc
    t=$(date +%s)
    CUDA_VISIBLE_DEVICES=0 python3 -m ci_register run base-b-1gpu --history "$db" \
        --gate enforce --file "$target" >>"$log" 2>&1
    rc=$?
    echo "RUN $label rc=$rc wall=$(( $(date +%s) - t )) s" | tee -a "$log"
}
for _ in $(seq 1 "$clean"); do one clean; done
# fa2 only (tensor_cores=False): more KV per request behind the shape's key.
python3 - "$test_file" "$work" <<'PY' || exit 1
import sys
path, work = sys.argv[1], float(sys.argv[2])
src = open(path).read()
old = "        [kv_len] * batch, num_kv_heads=HKV"
new = ("        [kv_len if tensor_cores else int(kv_len * %r)] * batch, num_kv_heads=HKV" % work)
assert src.count(old) == 1, "the decode shape line moved: update tools/device_stays_red.sh"
old_b = "    t = time_decode_blocks(fi, workspace, [kv_len] * batch,"
new_b = ("    t = time_decode_blocks(fi, workspace, [kv_len if tensor_cores else "
         "int(kv_len * %r)] * batch," % work)
assert src.count(old_b) == 1, "the blocks line moved: update tools/device_stays_red.sh"
open(path, "w").write(src.replace(old, new).replace(old_b, new_b))
PY
for _ in $(seq 1 "$bad"); do one bad; done
# The newest run as every surface reports it (headline, verdicts, owners, changes).
python3 -m gates.commands.cli --history "$db" --no-health >"$out/stays_red_report.txt" 2>&1
grep -E "RUN |gate: run|regression|still at" "$log" | cut -c1-200 | tail -60
