#!/usr/bin/env bash
# H200 evidence for the FlashInfer releases this tool supports, one part per device call (each
# under 9 minutes; the carry holds the tracked tree plus ONE bundle of
# benchmarks/make_flashinfer_bundles.sh):
#
#   v0.6.18  carry [".fi618"]: flashinfer-python 0.6.18.post1 with benchmarks/ of the 0.6.18
#            release branch: the doctor, the full Llama-3.1-8B TP=1 sweep (M = 1 8 64 512, every
#            recipe and backend) with the run's default FLASHINFER_NO_DOWNLOAD, and the driver
#            output fixtures of tests/fixtures/driver/capture.sh for this release.
#   v0.7     carry [".fi07"]: flashinfer-python 0.7.4 without a driver (0.7 ships no benchmarks/
#            and no 0.7 tag is in the mirror): the doctor (its checkout line says what is
#            missing and prints the clone), FlashInfer's capability answers, the Llama-3.1-8B
#            plan on sm_90 under them (a dry run: the driver rows 0.7 would add), and the
#            Llama-3.1-8B sweep with --no_driver: the library-side rows (torch and triton, BF16
#            and FP8 with activation quantization) timed against the 0.7 wheel, every driver row
#            failed with the driver it needs.
#
# Usage, from the project root on the GPU machine: bash benchmarks/h200_flashinfer_versions.sh OUT PART
# Writes OUT/<PART>.tar.gz (everything) and OUT/<PART>_summary.txt: only 8 files come back per call.
set -uo pipefail
out=${1:?usage: h200_flashinfer_versions.sh OUT v0.6.18|v0.7}
part=${2:?usage: h200_flashinfer_versions.sh OUT v0.6.18|v0.7}
t_start=$(date +%s)
deadline=$((t_start + ${BUDGET_S:-520}))   # the device call allows 600 s; leave room to pack
# A fixed folder: a second call on the still-warm machine resumes a sweep the first one ran out
# of time in (finished rows kept, FlashInfer's JIT cache warm).
work="${TMPDIR:-/tmp}/h200_flashinfer_versions/$part"
mkdir -p "$work" "$out"
resume_of() { [ -f "$1/results.json" ] && echo --resume; }
summary="$out/${part}_summary.txt"
: > "$summary"
say() { echo "$*" | tee -a "$summary"; }
left() { echo $(( deadline - $(date +%s) )); }
step() {  # step NAME SECONDS_MAX CMD...: run with a timeout within the budget, log to work/NAME.txt
  local name=$1 max=$2; shift 2
  local t=$(left); [ "$t" -gt "$max" ] && t=$max
  if [ "$t" -le 5 ]; then say "$name: skipped, budget spent"; return 0; fi
  local t0=$(date +%s)
  timeout --signal=TERM --kill-after=15 "$t" "$@" > "$work/$name.txt" 2>&1
  local rc=$?
  say "$name: rc=$rc wall=$(( $(date +%s) - t0 ))s (limit ${t}s)"
  tail -n 3 "$work/$name.txt" | sed 's/^/    /' | tee -a "$summary" > /dev/null
  return 0
}
unset FLASHINFER_NO_DOWNLOAD   # the run's default (1, said in its output) is what is under test
nvidia-smi --query-gpu=name,driver_version,memory.used,utilization.gpu --format=csv > "$work/nvidia-smi.txt" 2>&1

case "$part" in
v0.6.18)
  # shellcheck disable=SC1091
  source .fi618/setup.sh || { say "bundle .fi618 missing: carry it"; exit 1; }
  repo=.fi618/flashinfer
  say "checkout: $(cat $repo/version.txt) at $(cat $repo/COMMIT)"
  step doctor 90 python3 scripts/check_env.py --flashinfer_repo "$repo"
  step sweep 400 python3 scripts/benchmark_model.py llama-3.1-8b --no_attention --tp 1 --flashinfer_repo "$repo" \
    --workdir "$work/llama-3.1-8b_tp1" --ms 1 8 64 512 $(resume_of "$work/llama-3.1-8b_tp1")
  [ -f "$work/llama-3.1-8b_tp1/results.json" ] && python3 - "$work/llama-3.1-8b_tp1/results.json" <<'EOF' | tee -a "$summary"
import collections, json, sys
res = json.load(open(sys.argv[1]))
rows = res["rows"]
print("rows:", dict(collections.Counter(r["status"] for r in rows)))
print("notes.downloads:", res["notes"].get("downloads"))
print("notes.capabilities:", res["notes"].get("capabilities"))
v = res["environment"].get("versions", {})
print("versions:", {k: v.get(k) for k in ("flashinfer_wheel", "flashinfer_checkout", "flashinfer_cubin",
                                           "flashinfer_jit_cache", "cupti_python", "torch")})
for r in rows:
    if r["status"] == "failed":
        print("FAILED", r["case_id"], r["reason"][:300])
EOF
  rm -rf "$work/fixtures/v0.6.18" && mkdir -p "$work/fixtures/v0.6.18"
  # The driver run directly (not through the runner): no-download set here, as capture.sh says.
  step fixtures 100 env FLASHINFER_REPO="$repo" FLASHINFER_NO_DOWNLOAD=1 \
    bash tests/fixtures/driver/capture.sh "$work/fixtures/v0.6.18"
  ;;
v0.7)
  # shellcheck disable=SC1091
  source .fi07/setup.sh || { say "bundle .fi07 missing: carry it"; exit 1; }
  step doctor 90 python3 scripts/check_env.py
  step capabilities 60 env PYTHONPATH="scripts:$PYTHONPATH" \
    python3 -m benchmark_model_kernels.cases.capability_probe
  rm -rf "$work/llama-3.1-8b_tp1_dry"
  step dry_run_sm90 60 python3 scripts/benchmark_model.py llama-3.1-8b --no_attention --tp 1 --dry_run \
    --assume_cc 9.0 --workdir "$work/llama-3.1-8b_tp1_dry"
  # Every recipe and backend without a checkout: torch and triton rows timed against the 0.7 wheel,
  # each driver row failed with the driver it needs (exit 1 is expected).
  step library_rows 300 python3 scripts/benchmark_model.py llama-3.1-8b --no_attention --tp 1 --no_driver \
    --workdir "$work/llama-3.1-8b_tp1_library" --ms 1 8 64 512 $(resume_of "$work/llama-3.1-8b_tp1_library")
  [ -f "$work/llama-3.1-8b_tp1_library/results.json" ] && python3 -c "
import collections, json, sys
res = json.load(open(sys.argv[1]))
rows = res['rows']
print('rows:', dict(collections.Counter(r['status'] for r in rows)))
print('by backend:', dict(collections.Counter((r['backend'], r['status']) for r in rows)))
print('flashinfer:', res['environment'].get('versions', {}).get('flashinfer_wheel'))
print('notes.capabilities:', res['notes'].get('capabilities'))
lib = [r for r in rows if r['backend'] in ('torch', 'triton') and r['status'] == 'failed']
[print('FAILED library row', r['case_id'], r['reason'][:300]) for r in lib]
drv = next((r for r in rows if r['status'] == 'failed' and r['backend'] not in ('torch', 'triton')), None)
print('a driver row:', drv and drv['reason'])
" "$work/llama-3.1-8b_tp1_library/results.json" | tee -a "$summary"
  ;;
*) say "unknown part $part (v0.6.18 or v0.7)"; exit 2 ;;
esac
say "total wall $(( $(date +%s) - t_start ))s"
tar -C "$(dirname "$work")" -czf "$out/$part.tar.gz" "$part"
ls -la "$out"
