#!/usr/bin/env bash
# FlashInfer's JIT cache carried to a fresh GPU host: cold, warm and restored runs of
# `nox -s base-b-1gpu`, side by side. Run on a lent GPU host with the .dev carry folder
# (tools/build_device_carry.sh); results in benchmarks/results/bench_jit_cache.md.
#
#   bash benchmarks/bench_jit_cache.sh cold [DEV]       # fresh host, empty cache:
#       run 1 (cold: compiles every kernel), run 2 (warm, same host); then the
#       reinstall check: install the packages again as device_setup does (new file
#       times), count what ninja would rebuild with and without the pinned times;
#       then pack the cache into $OUT/jitcache.tar.xz.part-* (15 MiB parts)
#   bash benchmarks/bench_jit_cache.sh restored PARTS_DIR [DEV]   # another fresh host:
#       the parts unpacked into FlashInfer's cache folder, then run 1 (restored) and
#       run 2 (warm, same host)
#
# Each run is its own `python3 -m nox -s base-b-1gpu` process on GPU 0 with a scratch
# history; wall seconds per run and FlashInfer's own JIT build log
# (FLASHINFER_JIT_BUILD_LOG: one line per module build, ninja no-ops included) go to
# $OUT/summary.txt and $OUT/jit.jsonl (at most 8 files come back: the parts are few).
set -uo pipefail
mode="${1:?cold or restored}"
if [ "$mode" = restored ]; then parts="${2:?PARTS_DIR}"; dev="${3:-.dev}"; else dev="${2:-.dev}"; fi
out="${OUT:-/tmp/bench_jit_cache}"
mkdir -p "$out"
summary="$out/summary.txt"
log="$out/runs.log"

source tools/device_setup.sh "$dev" >"$log" 2>&1 || { cat "$log"; exit 1; }
nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader | tee -a "$summary"
nproc | sed 's/^/cpus: /' | tee -a "$summary"
key=$(python3 -m suitelib.flashinfer_cache key) || exit 1
cache=$(python3 -m suitelib.flashinfer_cache path) || exit 1
echo "cache key: $key" | tee -a "$summary"
echo "cache dir: $cache" | tee -a "$summary"

if [ "$mode" = restored ]; then
    t=$(date +%s.%N)
    mkdir -p "$(dirname "$cache")"
    cat "$parts"/jitcache.tar.xz.part-* | xz -dc | tar -x -C "$(dirname "$cache")" || exit 1
    echo "restore: $(du -sm "$cache" | cut -f1) MiB in $(python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$t" "$(date +%s.%N)") s; packed key: $(cat "$parts"/KEY)" | tee -a "$summary"
    [ "$(cat "$parts"/KEY)" = "$key" ] || echo "WARNING: key differs from the packed cache's" | tee -a "$summary"
fi

run() {  # run NAME: one nox process, wall time and JIT builds
    local name=$1 t0 t1 rc
    t0=$(date +%s.%N)
    CUDA_VISIBLE_DEVICES=0 FLASHINFER_JIT_BUILD_LOG="/tmp/jit-$name.jsonl" \
        python3 -m nox -s base-b-1gpu -- --history "/tmp/bench-$mode.db" >>"$log" 2>&1
    rc=$?
    t1=$(date +%s.%N)
    python3 - "$name" "$rc" "$t0" "$t1" "/tmp/jit-$name.jsonl" "$out/jit.jsonl" <<'PY' | tee -a "$summary"
import json, os, sys
name, rc, t0, t1, path, keep = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]), sys.argv[5], sys.argv[6]
rows = [json.loads(x) for x in open(path)] if os.path.exists(path) else []
with open(keep, "a") as f:
    f.writelines(json.dumps({"run": name, **r}) + "\n" for r in rows)
slow = [r for r in rows if r["seconds"] >= 1.0]
print(f"RUN {name}: rc={rc} wall={t1 - t0:.1f} s; JIT builds {len(rows)}, of which {len(slow)} compiled "
      f"(>= 1 s) for {sum(r['seconds'] for r in slow):.1f} s")
PY
}

dirty() {  # how many commands ninja would run over every cached module
    local n=0 f c
    for f in "$cache"/*/cached_ops/*/build.ninja; do
        [ -e "$f" ] || continue
        c=$(ninja -n -C "$(dirname "$f")" -f "$f" 2>/dev/null | grep -c '^\[') || true
        n=$((n + c))
    done
    echo "$n"
}

if [ "$mode" = cold ]; then
    rm -rf "$cache"
    run cold
    run warm
    mods=$(ls -d "$cache"/*/cached_ops/*/ 2>/dev/null | wc -l)
    echo "cached modules: $mods; ninja would run $(dirty) commands (warm cache)" | tee -a "$summary"
    # The issue's case: the same packages installed again, as a new job's set-up does.
    site="${DEVICE_SITE:-/tmp/site}"
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --force-reinstall \
        --target "$site" "$dev"/whl/apache_tvm_ffi-*.whl >>"$log" 2>&1
    echo "reinstalled apache-tvm-ffi (pip dates its files now): ninja would run $(dirty) commands" | tee -a "$summary"
    python3 -m suitelib.flashinfer_cache pin | tee -a "$summary"
    echo "after pin: ninja would run $(dirty) commands" | tee -a "$summary"
    run after-reinstall
    echo "$key" >"$out/KEY"
    tar -C "$(dirname "$cache")" -cf - "$(basename "$cache")" | xz -6 -T0 | split -b 15M -d - "$out/jitcache.tar.xz.part-"
    echo "packed: $(cat "$out"/jitcache.tar.xz.part-* | wc -c) bytes in $(ls "$out"/jitcache.tar.xz.part-* | wc -l) parts, from $(du -sm "$cache" | cut -f1) MiB" | tee -a "$summary"
else
    run restored
    run warm
fi
grep -E "passed|failed" "$log" | tail -6
cat "$summary"
