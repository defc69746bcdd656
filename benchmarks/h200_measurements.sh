#!/usr/bin/env bash
# Percentiles, correctness checks, eager vs CUDA graph with launch counts, and the model sweep, on
# one H200. From the project root on the GPU machine (one device call, under 9 minutes of wall time):
#   source .devbundle/setup.sh && export PYTHONPATH=$PWD/scripts:$PYTHONPATH
#   bash benchmarks/h200_measurements.sh OUTDIR
# It writes, all under OUTDIR:
#   pytest_measurements_gpu.txt  the GPU tests: every backend's check passes on real kernels, and a
#                                deliberately corrupted torch, Triton or driver output is `incorrect`
#   sweep/                       benchmark_model.py llama-3.1-8b qwen3-30b-a3b --tp 1 --ms $MS
#                                --modes graph eager: one sub-workdir per model (results.json,
#                                combined_results.csv, report.md) and sweep/report.md comparing them
#                                (fig_comparison.png, fig_speedup.png: the model-sweep bars)
#   sweep.txt                    the run's console; all_runs.csv: both CSVs concatenated
#   summary.txt                  per model: rows per status, ok rows whose check did not pass,
#                                eager rows without a launch count
# A run the time limit cut keeps its rows: call again with RESUME=1 to finish it (the GPU tests are
# not repeated). MS sets the token counts (default "1 64": decode, and the sweep's fixed token
# count; "1 8 64" needs a second call with RESUME=1); SEED_CACHE (default
# examples/h200/vllm_default/cache) seeds FlashInfer's autotuner and the Triton tiles. The cutile
# rows run only when tileiras is on PATH (after source .tilebundle/setup.sh); without it they would
# fail as set-up. NVFP4 is left out: an H200 runs none of its kernels.
set -u
E=${1:?OUTDIR}; mkdir -p "$E/cache"
FI=${FLASHINFER_REPO:-.devbundle/flashinfer}
MS=${MS:-1 64}
CACHE="$E/cache/autotune_cache.json"
SEED=${SEED_CACHE:-examples/h200/vllm_default/cache}
if [ -d "$SEED" ] && [ ! -f "$CACHE" ]; then cp -r "$SEED"/. "$E/cache/"; fi
BACKENDS="torch cudnn cublaslt tinygemm cublas triton"
if command -v tileiras >/dev/null 2>&1; then BACKENDS="$BACKENDS cutile"; fi
RESUME_FLAG=""; if [ "${RESUME:-0}" = 1 ]; then RESUME_FLAG="--resume"; fi

t0=$SECONDS
if [ -z "$RESUME_FLAG" ]; then
  FLASHINFER_REPO=$FI timeout 150 python3 -m pytest -q -rs tests/run/test_measurements_gpu.py \
    tests/run/test_correctness.py tests/run/test_timing.py >"$E/pytest_measurements_gpu.txt" 2>&1
  echo "pytest rc=$? wall_s=$((SECONDS - t0))" | tee -a "$E/pytest_measurements_gpu.txt"
fi

t1=$SECONDS
# shellcheck disable=SC2086  # MS and BACKENDS are lists of words
timeout 330 python3 scripts/benchmark_model.py llama-3.1-8b qwen3-30b-a3b --no_attention --tp 1 --ms $MS \
  --dtypes bf16 fp8 --backends $BACKENDS --modes graph eager --flashinfer_repo "$FI" \
  --workdir "$E/sweep" --autotune_cache "$CACHE" $RESUME_FLAG >>"$E/sweep.txt" 2>&1
echo "sweep rc=$? wall_s=$((SECONDS - t1))" | tee -a "$E/sweep.txt"

# The report of whatever was measured (the run writes it too, unless the limit cut it).
timeout 40 python3 scripts/report.py "$E"/sweep/*/ --out "$E/sweep" --force >>"$E/sweep.txt" 2>&1
echo "report rc=$?" | tee -a "$E/sweep.txt"

csvs=("$E"/sweep/*/combined_results.csv)
if [ -f "${csvs[0]}" ]; then
  head -n 1 "${csvs[0]}" >"$E/all_runs.csv" && tail -q -n +2 "${csvs[@]}" >>"$E/all_runs.csv"
fi
python3 - "$E/sweep" >"$E/summary.txt" 2>&1 <<'EOF'
import collections, glob, json, os, sys
for path in sorted(glob.glob(os.path.join(sys.argv[1], "*", "results.json"))):
    res = json.load(open(path))
    rows = res["rows"]
    status = collections.Counter((r["status"], r.get("mode", "")) for r in rows)
    unchecked = [r["case_id"] for r in rows if r["status"] == "ok" and r.get("check") != "passed"]
    no_count = [r["case_id"] for r in rows if r["status"] == "ok" and r.get("mode") == "eager"
                and r.get("launches_per_call") is None]
    no_spread = [r["case_id"] for r in rows if r["status"] == "ok" and not r.get("n_samples")]
    print(os.path.basename(os.path.dirname(path)), res.get("run_id"), dict(sorted(status.items())))
    print(f"  ok rows whose check did not pass: {len(unchecked)} {unchecked[:8]}")
    print(f"  ok eager rows without a launch count: {len(no_count)} {no_count[:8]}")
    print(f"  ok rows without percentiles: {len(no_spread)} {no_spread[:8]}")
EOF
cat "$E/summary.txt"
echo "total wall_s=$((SECONDS - t0))"
nvidia-smi --query-compute-apps=pid,process_name --format=csv >"$E/gpu_after.txt" 2>&1
