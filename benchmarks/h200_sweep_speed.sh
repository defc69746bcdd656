#!/usr/bin/env bash
# The H200 runs behind examples/h200/sweep_speed/: benchmarks/sweep_speed.py against its targets.
# From the project root on the GPU machine, after `source .fi618/setup.sh && export
# PYTHONPATH=$PWD/scripts:$PYTHONPATH` (carry [".fi618"], 19 MB: FlashInfer 0.6.18.post1 and its
# driver, made by make_flashinfer_bundles.sh; FLASHINFER_REPO names another driver checkout, e.g.
# .devbundle/flashinfer after `source .devbundle/setup.sh`). No tileiras is needed: on sm_90 the
# planner skips the cutile rows, tileiras having no sm_90 target.
#   bash benchmarks/h200_sweep_speed.sh llama OUTDIR    # Llama-3.1-8B TP=1 cold, warm, cached
#   bash benchmarks/h200_sweep_speed.sh models OUTDIR   # the 8 bundled models at TP=1 (optional)
#   bash benchmarks/h200_sweep_speed.sh llama-warm OUTDIR  # warm and cached only, in less device
#       time: one untimed pass without autotuning or checks fills the JIT caches and the tool's
#       kept plan and capability answer, and the committed 0.6.18 autotune cache of a cold
#       Llama-3.1-8B run on the H200 (examples/h200/flashinfer_versions/v0.6.18/) stands in
#       for this machine's cold run
# SWEEP_SPEED_ARGS adds flags of sweep_speed.py, e.g. SWEEP_SPEED_ARGS="--profile warm cached
# --py_spy /tmp/pyspy/bin/py-spy" (py-spy from a carried wheel: pip install --no-deps --target).
# Each fits one 10-minute device call. The models sweep needs more than one: call it again on
# the same (still warm) machine and it continues with --resume, adding up the wall times.
# The workdirs stay in workdirs/sweep_speed/ (git-ignored, kept between calls); OUTDIR gets the
# console, the record (sweep_speed_*.json) and one archive of each run's results.json, CSV and
# report.md (a device call returns at most 8 files).
set -u
what=${1:?llama, llama-warm or models}; E=${2:?OUTDIR}; mkdir -p "$E"
W=workdirs/sweep_speed
FI=${FLASHINFER_REPO:-.fi618/flashinfer}
case $what in
  llama) runs="cold warm cached"; dirs="cold warm cached"
         rm -rf "$W"/pycache "$W"/profile_*.txt "$W"/cold "$W"/warm "$W"/cached "$W"/result_cache "$W"/user_cache "$W"/sweep_speed_cold_warm_cached.json ;;
  llama-warm) runs="warm cached"; dirs="warm cached"
         rm -rf "$W"/pycache "$W"/profile_*.txt "$W"/cold "$W"/warm "$W"/cached "$W"/result_cache "$W"/user_cache "$W"/prewarm ;;
  models) runs="models"; dirs="models" ;;
  *) echo "error: first argument: llama, llama-warm or models" >&2; exit 2 ;;
esac
# Bytecode: where the machine's Python packages hold none and cannot be written, every process
# compiles torch's, transformers' and FlashInfer's sources again (seconds a run: a py-spy sample of
# a cached run on the H200 spent a third of its time in source_to_code). A pip install writes
# bytecode at install time; keeping it under the workdir gives the runs after the first the same.
if [ -z "${PYTHONPYCACHEPREFIX:-}" ]; then
  torch_dir=$(python3 -c "import importlib.util, os; print(os.path.dirname(importlib.util.find_spec('torch').origin))")
  if ! ls "$torch_dir"/__pycache__/*.pyc >/dev/null 2>&1 && [ ! -w "$torch_dir" ]; then
    export PYTHONPYCACHEPREFIX="$PWD/$W/pycache"
  fi
fi
echo "bytecode: torch at ${torch_dir:-?}; PYTHONPYCACHEPREFIX=${PYTHONPYCACHEPREFIX:-unset, the packages keep their own}" \
  | tee -a "$E/sweep_speed_$what.txt"
if [ "$what" = llama-warm ]; then
  seed=examples/h200/flashinfer_versions/v0.6.18/llama-3.1-8b_tp1
  mkdir -p "$W"/cold && cp "$seed"/autotune_cache.json "$W"/cold/ && cp -r "$seed"/autotune_cache.json.triton "$W"/cold/
  echo "prewarm: JIT caches, kept plan and capability answer (not timed against a target)" | tee -a "$E/sweep_speed_$what.txt"
  XDG_CACHE_HOME="$PWD/$W/user_cache" timeout 400 python3 scripts/benchmark_model.py llama-3.1-8b --no_attention --tp 1 --ms 1 8 64 512 \
    --flashinfer_repo "$FI" --workdir "$W"/prewarm --no_autotune --no_check --no_cache >>"$E/sweep_speed_$what.txt" 2>&1
  echo "prewarm rc=$?" | tee -a "$E/sweep_speed_$what.txt"
fi
python3 benchmarks/sweep_speed.py --flashinfer_repo "$FI" --out "$W" --runs $runs \
  --budget_s "${BUDGET_S:-560}" ${SWEEP_SPEED_ARGS:-} >>"$E/sweep_speed_$what.txt" 2>&1
rc=$?
echo "sweep_speed rc=$rc" | tee -a "$E/sweep_speed_$what.txt"
cp "$W"/sweep_speed_*.json "$E/" 2>/dev/null
# The autotune caches before and after warm: keys warm added are shapes it tuned again.
(cd "$W" && ls cold/autotune_cache.json warm/autotune_cache.json 2>/dev/null | tar -cJf - -T -) >"$E/autotune_caches.tar.xz"
ls "$W"/profile_*.txt >/dev/null 2>&1 && (cd "$W" && tar -cJf - profile_*.txt) >"$E/sweep_speed_profiles.tar.xz"
# shellcheck disable=SC2086  # $dirs is a word list
(cd "$W" && find $dirs -name results.json -o -name combined_results.csv -o -name report.md \
  | tar -cJf - -T -) >"$E/sweep_speed_${what}_results.tar.xz"
tail -5 "$E/sweep_speed_$what.txt"
exit $rc
