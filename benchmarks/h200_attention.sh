#!/usr/bin/env bash
# The whole step on one H200 rank with attention: Llama-3.1-8B and Qwen3-30B-A3B at TP=1, M = 1 8 64,
# GEMM + MoE rows of the fast and vLLM-default backends, and attention rows of every sm_90 backend
# of FlashInfer's driver at KV lengths 1024 and 32768, BF16 and FP8 KV cache. From the project root
# on the GPU machine (carry [".fi618"]):
#   source .fi618/setup.sh && export PYTHONPATH=$PWD/scripts:$PYTHONPATH
#   bash benchmarks/h200_attention.sh OUT
# Writes OUT/attention_runs.tar.gz (each model's results.json, combined_results.csv, report.md, the
# comparison report.md, the console logs, a driver attention line run directly) and
# OUT/attention_summary.txt. Every step has its own timeout inside the call's budget (BUDGET_S,
# default 540 s), each step's log is kept, and the archive is made whatever a step did. A sweep the
# budget cut keeps its rows: call again on the still-warm machine and it continues with --resume
# (workdirs/attention/, git-ignored).
set -u
out=${1:?usage: h200_attention.sh OUT}
mkdir -p "$out"
W=workdirs/attention
mkdir -p "$W"
FI=${FLASHINFER_REPO:-.fi618/flashinfer}
t_start=$(date +%s)
deadline=$((t_start + ${BUDGET_S:-540}))
summary="$out/attention_summary.txt"
: > "$summary"
say() { echo "$*" | tee -a "$summary"; }
pack() {
  (cd "$W" && find . -name results.json -o -name combined_results.csv -o -name report.md \
     -o -name '*.txt' -o -name '*.log' -o -name '*.csv' | tar -czf - -T -) \
    > "$out/attention_runs.tar.gz"
}
trap pack EXIT
left() { echo $(( deadline - $(date +%s) )); }
step() {  # step NAME MAX_S CMD...: one step within the budget, its log in W/NAME.txt
  local name=$1 max=$2; shift 2
  local t; t=$(left); [ "$t" -gt "$max" ] && t=$max
  if [ "$t" -le 10 ]; then say "$name: skipped, budget spent"; return 0; fi
  local t0; t0=$(date +%s)
  timeout --signal=INT --kill-after=20 "$t" "$@" >> "$W/$name.txt" 2>&1
  local rc=$?
  say "$name: rc=$rc wall=$(( $(date +%s) - t0 ))s (limit ${t}s)"
  tail -n 3 "$W/$name.txt" | sed 's/^/    /' | tee -a "$summary" > /dev/null
  return 0
}
say "flashinfer checkout $(cat "$FI/version.txt" 2>/dev/null) in $FI"

CACHE="$W/autotune_cache.json"
# Seeds: FlashInfer's tactics from a cold Llama-3.1-8B run of the same FlashInfer (0.6.18.post1) on
# the H200 (FlashInfer ignores, and never saves to, a file another version tuned: the run refuses
# one), and the Triton tile choices (autotune_cache.json.triton/, any FlashInfer) of the
# vLLM-default runs, so the fused-MoE and block-FP8 rows time the seeded tiles instead of tuning.
SEED=${SEED_CACHE:-examples/h200/flashinfer_versions/v0.6.18/llama-3.1-8b_tp1/autotune_cache.json}
TILES=${SEED_TILES:-examples/h200/vllm_default/cache/autotune_cache.json.triton}
seed_ok() {  # the seed was tuned by the installed FlashInfer: the run's own check (run/autotune_file.py)
  python3 - "$1" <<'PY'
import sys
from benchmark_model_kernels.env.versions import flashinfer_wheel
from benchmark_model_kernels.run.autotune_file import stale_reason
sys.exit(1 if stale_reason(sys.argv[1], flashinfer_wheel()["version"], None) else 0)
PY
}
if [ ! -f "$CACHE" ]; then
  if [ -f "$SEED" ] && seed_ok "$SEED"; then cp "$SEED" "$CACHE"
  else say "autotune seed $SEED: not used (absent, or tuned by another FlashInfer); tuning from empty"; fi
  [ -d "$TILES" ] && cp -r "$TILES" "$CACHE.triton"
fi
# GEMM/MoE: vLLM's defaults (torch = cuBLAS, triton MoE) and FlashInfer's fast ones; attention:
# every sm_90 backend of the decode routine (fa2 fa2_tc cudnn trtllm-native; cudnn is both).
BACKENDS="torch triton cudnn cublaslt cublas fa2 fa2_tc trtllm-native"

# First a driver attention line run directly, as the smoke script does, for comparison with the
# tool's row of the same shape (it also builds those two decode kernels once).
step driver_line 60 python3 "$FI/benchmarks/flashinfer_benchmark.py" \
  --routine BatchDecodeWithPagedKVCacheWrapper --backends fa2_tc trtllm-native --page_size 16 \
  --batch_size 8 --s_qo 1 --s_kv 1024 --num_qo_heads 32 --num_kv_heads 8 --head_dim_qk 128 \
  --head_dim_vo 128 --q_dtype bfloat16 --kv_dtype bfloat16 --num_iters 30 --dry_run_iters 5 -v \
  --case_tag direct_decode --output_path "$W/driver_line.csv"
# Both models in one sweep: one sub-workdir per model and a report comparing them; the plans'
# attention entries come from the planner (plan.attention). A second call resumes the sweep.
RESUME=""; ls "$W"/sweep/*/results.json >/dev/null 2>&1 && RESUME=--resume
# shellcheck disable=SC2086  # BACKENDS is a word list
step sweep $(( $(left) - 45 )) python3 scripts/benchmark_model.py llama-3.1-8b qwen3-30b-a3b --tp 1 --ms 1 8 64 \
  --kv_lens 1024 32768 --kv_dtypes bf16 fp8 --dtypes bf16 fp8 --backends $BACKENDS \
  --flashinfer_repo "$FI" --workdir "$W/sweep" --autotune_cache "$CACHE" $RESUME
# The report of whatever was measured (the run writes it too, unless the limit cut it).
step report 40 python3 scripts/report.py "$W"/sweep/*/ --out "$W/sweep" --force
python3 - "$W" <<'EOF' | tee -a "$summary"
import collections, glob, json, os, sys
for path in sorted(glob.glob(os.path.join(sys.argv[1], "sweep", "*", "results.json"))):
    res = json.load(open(path))
    att = [r for r in res["rows"] if r["kind"] == "attention"]
    print(path, "rows:", len(res["rows"]), "attention:", dict(collections.Counter(r["status"] for r in att)))
    for r in att:
        if r["status"] != "ok":
            print("   ", r["status"], r["case_id"], r["reason"][:240])
    ok = sorted((r for r in att if r["status"] == "ok"), key=lambda r: r["case_id"])
    for r in ok[:12]:
        print("    ok", r["case_id"], f"{r['median_us']:.2f} us", f"{r.get('pct_peak_bandwidth')} % HBM",
              "samples", r.get("n_samples"))
EOF
say "GPU processes left: $(nvidia-smi --query-compute-apps=pid,process_name --format=csv,noheader 2>&1 | tr '\n' ' ')"
say "total wall $(( $(date +%s) - t_start ))s"
