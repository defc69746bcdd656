#!/usr/bin/env bash
# The H200 runs whose unedited outputs are committed under examples/h200/.
# From the project root on the GPU machine, after `source .devbundle/setup.sh`:
#   bash benchmarks/h200_evidence.sh a OUTDIR   # GPU tests, doctor (good + mismatched CUPTI), Llama sweep
#   bash benchmarks/h200_evidence.sh b OUTDIR   # Qwen3-30B-A3B TP=1 and TP=4
# Mismatched cupti-python wheels are expected in .whl_cupti134/ and .whl_cupti128/ (pip download).
set -u
stage=${1:?stage a or b}; E=${2:?OUTDIR}; mkdir -p "$E"
FI=.devbundle/flashinfer
if [ "$stage" = a ]; then
  python3 -m pytest tests/test_torch_backend.py tests/test_quant_timing.py tests/test_runner.py \
    -q -rs -k "not fake" >"$E/pytest_gpu.txt" 2>&1; echo "pytest rc=$?" | tee -a "$E/pytest_gpu.txt"
  python3 scripts/check_env.py --flashinfer_repo $FI >"$E/doctor_ok.txt" 2>&1; echo "rc=$?" >>"$E/doctor_ok.txt"
  for v in 134 128; do
    python3 -m pip install -q --no-index --no-deps --target /tmp/cupti$v .whl_cupti$v/*.whl
    PYTHONPATH=/tmp/cupti$v:$PYTHONPATH python3 scripts/check_env.py --flashinfer_repo $FI \
      >"$E/doctor_cupti$v.txt" 2>&1; echo "rc=$?" >>"$E/doctor_cupti$v.txt"
  done
  timeout 480 python3 benchmarks/sweep_speed.py --flashinfer_repo $FI --out "$E/llama-3.1-8b_tp1" --budget_s 470 \
    >"$E/sweep_speed.txt" 2>&1; echo "sweep rc=$?" | tee -a "$E/sweep_speed.txt"
else
  for tp in 1 4; do
    timeout 270 python3 scripts/benchmark_model.py qwen3-30b-a3b --no_attention --tp $tp --ms 1 8 64 512 \
      --flashinfer_repo $FI --workdir "$E/qwen3-30b-a3b_tp$tp" --autotune_cache "$E/autotune_cache.json" \
      >"$E/qwen3-30b-a3b_tp$tp.txt" 2>&1; echo "qwen tp$tp rc=$?" | tee -a "$E/qwen3-30b-a3b_tp$tp.txt"
  done
fi
