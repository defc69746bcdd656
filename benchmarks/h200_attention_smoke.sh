#!/usr/bin/env bash
# FlashInfer's attention routines run directly through the driver on one H200, every sm_90
# backend of each routine, BF16 and FP8 KV cache: the argv the attention cases use and the
# driver's own output (rows, skip lines, errors) for the parser's fixtures. From the project root
# on the GPU machine (one device call, carry [".fi618"]):
#   source .fi618/setup.sh && export PYTHONPATH=$PWD/scripts:$PYTHONPATH
#   bash benchmarks/h200_attention_smoke.sh OUT
# Writes OUT/attention_smoke.tar.gz (every NAME.log = the driver's stdout+stderr, NAME.csv = its
# --output_path, NAME.cmd = the argv) and OUT/attention_smoke_summary.txt. Each step has its own
# timeout inside a total budget (BUDGET_S, default 520 s of the call's 600), and the archive is
# made whatever a step did. A first use of a kernel is a JIT build (FlashInfer compiles the
# attention kernels it has no prebuilt copy of): the decode steps come first, each backend in a
# process of its own as the tool runs it; prefill runs all backends in one process.
# Shapes: Llama-3.1-8B at TP=1 per rank (32 query heads, 8 KV heads, head dim 128), vLLM's default
# KV block of 16 tokens; DeepSeek-V3 at TP=8 for MLA (16 heads, latent 512 + RoPE 64).
set -u
out=${1:?usage: h200_attention_smoke.sh OUT}
mkdir -p "$out"
work="${TMPDIR:-/tmp}/h200_attention_smoke"
rm -rf "$work" && mkdir -p "$work"
D=${FLASHINFER_REPO:-.fi618/flashinfer}/benchmarks
# As the tool's worker runs the driver (its default, said in each run's output): no downloads.
export FLASHINFER_NO_DOWNLOAD=${FLASHINFER_NO_DOWNLOAD-1}
t_start=$(date +%s)
deadline=$((t_start + ${BUDGET_S:-520}))
summary="$out/attention_smoke_summary.txt"
: > "$summary"
say() { echo "$*" | tee -a "$summary"; }
pack() { tar -C "$(dirname "$work")" -czf "$out/attention_smoke.tar.gz" "$(basename "$work")"; }
trap pack EXIT
left() { echo $(( deadline - $(date +%s) )); }
run() {  # run NAME MAX_S ARGS...: one driver process within the budget, output kept
  local name=$1 max=$2; shift 2
  local t; t=$(left); [ "$t" -gt "$max" ] && t=$max
  echo "python3 $D/flashinfer_benchmark.py $* --output_path $work/$name.csv" > "$work/$name.cmd"
  if [ "$t" -le 5 ]; then say "$name: skipped, budget spent"; return 0; fi
  local t0; t0=$(date +%s)
  timeout --signal=TERM --kill-after=10 "$t" python3 "$D/flashinfer_benchmark.py" "$@" \
    --output_path "$work/$name.csv" > "$work/$name.log" 2>&1
  local rc=$?
  say "$name: rc=$rc wall=$(( $(date +%s) - t0 ))s (limit ${t}s)"
  grep -E '^\[(INFO|WARNING|ERROR)\].*(Skipping|requires|not support|No backends|Error)|^\[PERF\]' \
    "$work/$name.log" | grep -v 'args = ' | head -n 12 | sed 's/^/    /' | tee -a "$summary" > /dev/null
  return 0
}
nvidia-smi --query-gpu=name,driver_version,memory.used --format=csv > "$work/nvidia-smi.txt" 2>&1
python3 -c "import flashinfer, torch; print('flashinfer', flashinfer.__version__, 'torch', torch.__version__)" \
  > "$work/versions.txt" 2>&1
cat "$D/../version.txt" >> "$work/versions.txt" 2>/dev/null
say "$(tr '\n' ' ' < "$work/versions.txt")"
timing="--num_iters 10 --dry_run_iters 3 -v"
mha="--num_qo_heads 32 --num_kv_heads 8 --head_dim_qk 128 --head_dim_vo 128 --q_dtype bfloat16"
mla="--num_qo_heads 16 --num_kv_heads 1 --head_dim_ckv 512 --head_dim_kpe 64 --q_dtype bfloat16"
each_backend() {  # each_backend NAME ROUTINE "BACKENDS" SHAPE...: one process per KV dtype and backend
  local name=$1 routine=$2 list=$3; shift 3
  local kv b
  for kv in bfloat16 fp8_e4m3; do
    for b in $list; do
      run "${name}_${kv}_$b" 90 --routine "$routine" --backends "$b" --page_size 16 --batch_size 8 \
        --s_qo 1 --s_kv 1024 "$@" --kv_dtype "$kv" $timing --case_tag "smoke_${name}_${kv}_$b"
    done
  done
}
# Decode first: 8 sequences of one new token each over 1024 cached tokens, each sm_90 backend in
# its own driver process, as the tool runs each case (one backend's exception or skip line stays
# its own), BF16 then FP8 KV cache; then MLA decode the same way.
# shellcheck disable=SC2086  # $mha and $mla are word lists
each_backend decode BatchDecodeWithPagedKVCacheWrapper "fa2 fa2_tc cudnn trtllm-native" $mha
# shellcheck disable=SC2086
each_backend mla_decode BatchMLAPagedAttentionWrapper "fa2 fa3" $mla
for kv in bfloat16 fp8_e4m3; do
  # Prefill: one sequence of 1024 tokens, causal, every sm_90 backend of the paged routine in one
  # process (the driver's multi-backend output).
  run "prefill_$kv" 120 --routine BatchPrefillWithPagedKVCacheWrapper \
    --backends fa2 fa3 cudnn cudnn-native trtllm-fmha-v2 --page_size 16 --batch_size 1 \
    --s_qo 1024 --s_kv 1024 --causal $mha --kv_dtype "$kv" $timing --case_tag "smoke_prefill_$kv"
done
# MLA prefill as vLLM runs it: MHA over up-projected K/V (qk 128 + 64 = 192, v 128), ragged.
run ragged_prefill_mla_bfloat16 90 --routine BatchPrefillWithRaggedKVCacheWrapper \
  --backends fa2 fa3 cudnn cudnn-native trtllm-fmha-v2 --batch_size 1 --s_qo 1024 --s_kv 1024 \
  --causal --num_qo_heads 16 --num_kv_heads 16 --head_dim_qk 192 --head_dim_vo 128 \
  --q_dtype bfloat16 --kv_dtype bfloat16 --out_dtype bfloat16 $timing --case_tag smoke_ragged_mla
# A page size the XQA decode build (trtllm-native on sm_90) refuses: it takes 16/32/64/128.
run decode_bfloat16_page8 60 --routine BatchDecodeWithPagedKVCacheWrapper \
  --backends trtllm-native --page_size 8 --batch_size 8 --s_qo 1 --s_kv 1024 $mha \
  --kv_dtype bfloat16 $timing --case_tag smoke_decode_page8
say "total wall $(( $(date +%s) - t_start ))s"
ls -la "$work" > "$work/listing.txt"
