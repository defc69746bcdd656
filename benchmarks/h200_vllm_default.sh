#!/usr/bin/env bash
# The H200 runs behind examples/h200/vllm_default/ (issue: the kernels vLLM runs). From the project
# root on the GPU machine, after `source .devbundle/setup.sh && source .tilebundle/setup.sh` (the
# tileiras compiler for the cutile rows) and `export PYTHONPATH=$PWD/scripts:$PYTHONPATH`:
#   bash benchmarks/h200_vllm_default.sh a OUTDIR   # doctor, Llama-3.1-8B TP1, Qwen3-30B-A3B TP1
#   bash benchmarks/h200_vllm_default.sh b OUTDIR   # Qwen3-30B-A3B TP1 EP8 and TP4, roofline target
#   bash benchmarks/h200_vllm_default.sh c OUTDIR   # Llama --resume (what stage a's limit cut), GPU tests
# (one stage per device call: each fits its 10-minute limit; stage c expects stage a's Llama
# workdir at OUTDIR/llama-3.1-8b_tp1).
# The bundle and tileiras together exceed the device's 64 MiB carry limit; they travelled as
#   .fixz/fisite.tar.xz: the .devbundle/whl/*.whl unzipped into one folder `fisite`, tar | xz -6
#     (16 MB), unpacked by .fixz/setup.sh into $TMPDIR/fi-site (then the same env as
#     .devbundle/setup.sh), carried with .devbundle/flashinfer (the driver);
#   .tilebundle/tileiras.tar.xz: nvidia-cuda-tileiras 13.2 unzipped, tar | xz -9e (25 MB),
#     unpacked by .tilebundle/setup.sh and put on PATH.
# Both folders are git-ignored. With only .devbundle carried the runs are the same except that the
# cutile rows of stage a fail as set-up (no tileiras) instead of naming tileiras' missing sm_90.
# Every run shares OUTDIR/cache/autotune_cache.json (FlashInfer's tuning; the Triton tiles in
# autotune_cache.json.triton/), seeded from SEED_CACHE when given (a directory holding them).
set -u
stage=${1:?stage a or b}; E=${2:?OUTDIR}; mkdir -p "$E/cache"
FI=.devbundle/flashinfer
CACHE="$E/cache/autotune_cache.json"
if [ -n "${SEED_CACHE:-}" ] && [ ! -f "$CACHE" ]; then
  cp -r "$SEED_CACHE"/. "$E/cache/"
fi
run() {  # run NAME TIMEOUT ARGS...: one benchmark_model.py run, console appended to NAME.txt
  local name=$1 limit=$2; shift 2
  local t0=$SECONDS
  timeout "$limit" python3 scripts/benchmark_model.py "$@" --no_attention --ms 1 8 64 512 --flashinfer_repo $FI \
    --workdir "$E/$name" --autotune_cache "$CACHE" >>"$E/$name.txt" 2>&1
  echo "$name rc=$? wall_s=$((SECONDS - t0))" | tee -a "$E/$name.txt"
}
if [ "$stage" = a ]; then
  python3 scripts/check_env.py --flashinfer_repo $FI >"$E/doctor.txt" 2>&1; echo "rc=$?" >>"$E/doctor.txt"
  run llama-3.1-8b_tp1 270 llama-3.1-8b --tp 1
  run qwen3-30b-a3b_tp1 290 qwen3-30b-a3b --tp 1
elif [ "$stage" = b ]; then
  run qwen3-30b-a3b_tp1_ep8 300 qwen3-30b-a3b --tp 1 --ep 8
  run qwen3-30b-a3b_tp4 160 qwen3-30b-a3b --tp 4
  timeout 100 python3 benchmarks/triton_moe_roofline.py --autotune_cache "$CACHE" \
    --schemes bf16 fp8_per_tensor fp8_per_token fp8_block128 \
    --out "$E/triton_moe_roofline.json" >"$E/triton_moe_roofline.txt" 2>&1
  echo "roofline rc=$?" | tee -a "$E/triton_moe_roofline.txt"
else
  run llama-3.1-8b_tp1 300 llama-3.1-8b --tp 1 --resume
  timeout 120 python3 -m pytest -q tests/run/test_triton_moe_gpu.py tests/run/test_triton_fp8_gemm_gpu.py \
    >"$E/pytest_triton_gpu.txt" 2>&1; echo "pytest rc=$?" | tee -a "$E/pytest_triton_gpu.txt"
fi
nvidia-smi --query-compute-apps=pid,process_name --format=csv >"$E/gpu_after_$stage.txt" 2>&1
