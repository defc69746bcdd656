#!/usr/bin/env bash
# Evidence, on the GPU machine, that a run's worker never outlives the run and that stopped runs
# resume into one row per case:
#   1. a run SIGTERMed mid-case: exit 143, the resume line, and no process of it left on the GPU;
#   2. --resume, SIGKILLed mid-case: no process of it left on the GPU;
#   3. --resume to completion, while a second --resume of the same workdir is refused (exit 2,
#      naming the holder's pid); results.json then holds each case id once.
# From the project root (about 4 minutes on an H200; everything goes to stdout):
#   source .devbundle/setup.sh && export PYTHONPATH=$PWD/scripts:$PYTHONPATH && \
#     bash benchmarks/kill_check.sh [WORKDIR]        (default /tmp/kill_check.<pid>; must not exist)
# The runs take the driver checkout FLASHINFER_REPO names (.devslim/setup.sh sets it), else
# .devbundle/flashinfer.
# Every run starts under `timeout`, which leads a process group of its own, and the EXIT trap
# SIGKILLs those groups, so nothing started here outlives the script. The runs' workers are in
# sessions of their own and are NOT killed by the script: that they die with their run is what
# this checks.
set -u
W=${1:-/tmp/kill_check.$$}
LOGS="$W.logs"
RUN=(python3 scripts/benchmark_model.py llama-3.1-8b --tp 1 --ms 8 64
     --flashinfer_repo "${FLASHINFER_REPO:-.devbundle/flashinfer}" --workdir "$W")
STARTED_GROUPS=()
VERDICTS=()

cleanup() {
  local g
  for g in "${STARTED_GROUPS[@]}"; do kill -KILL -- "-$g" 2>/dev/null; done
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

header() { printf '\n===== %s (t=%ds)\n' "$1" "$SECONDS"; }

check() {  # NAME CONDITION...: record and print PASS or FAIL of the condition
  local name=$1; shift
  if "$@"; then VERDICTS+=("PASS  $name"); echo "PASS  $name"
  else VERDICTS+=("FAIL  $name"); echo "FAIL  $name"; fi
}

gpu_apps() {
  echo "--- nvidia-smi --query-compute-apps=pid,process_name --format=csv"
  nvidia-smi --query-compute-apps=pid,process_name --format=csv
  echo "--- nvidia-smi --query-gpu=memory.used --format=csv"
  nvidia-smi --query-gpu=memory.used --format=csv
}

gpu_app_count() { nvidia-smi --query-compute-apps=pid --format=csv,noheader | grep -c '[0-9]'; }

start_run() {  # LIMIT_S LOG [FLAGS...]: a run in the background; sets TIMEOUT_PID and RUN_PID
  local limit=$1 log=$2; shift 2
  timeout -s KILL "$limit" "${RUN[@]}" "$@" >"$log" 2>&1 &
  TIMEOUT_PID=$!
  STARTED_GROUPS+=("$TIMEOUT_PID")
  RUN_PID=""
  local i
  for i in $(seq 100); do
    RUN_PID=$(ps -o pid= --ppid "$TIMEOUT_PID" | tr -d ' ' | head -1)
    [ -n "$RUN_PID" ] && break
    sleep 0.05
  done
  echo "started (timeout ${limit}s): pid $RUN_PID: ${RUN[*]} $*"
}

rows() {  # rows in results.json now (0 while there is none)
  python3 -c 'import json, sys
try: print(len(json.load(open(sys.argv[1]))["rows"]))
except (OSError, ValueError): print(0)' "$W/results.json"
}

wait_rows() {  # N LIMIT_S: wait until results.json holds N rows (or the run ends, or LIMIT_S pass)
  local want=$1 limit=$2 start=$SECONDS
  while [ "$(rows)" -lt "$want" ] && [ $((SECONDS - start)) -lt "$limit" ] && kill -0 "$RUN_PID" 2>/dev/null; do
    sleep 1
  done
  echo "results.json holds $(rows) rows"
}

worker_pid() { grep -o 'worker pid [0-9]*' "$W/cases/worker.log" 2>/dev/null | tail -1 | grep -o '[0-9]*$'; }

is_gone() { ! kill -0 "$1" 2>/dev/null || [ "$(ps -o stat= -p "$1" | cut -c1)" = Z ]; }

stop_mid_case() {  # SIGNAL EXPECTED_RC LOG: signal the run in a case, then show what is left
  local sig=$1 expected=$2 log=$3 worker rc
  sleep 2  # into the next case
  worker=$(worker_pid)
  echo "run pid $RUN_PID, worker pid $worker; before the signal:"
  gpu_apps
  echo "--- kill -$sig $RUN_PID"
  kill "-$sig" "$RUN_PID"
  wait "$TIMEOUT_PID"; rc=$?
  echo "exit code: $rc (expected $expected)"
  echo "--- last lines of the run's output"; tail -n 3 "$log"
  sleep 3
  echo "3 s later:"
  gpu_apps
  ps -o pid,stat,cmd -p "$worker" || echo "(worker pid $worker: no such process)"
  check "$sig: exit code $expected" [ "$rc" = "$expected" ]
  check "$sig: worker pid $worker gone" is_gone "$worker"
  check "$sig: GPU compute apps back to the $BASELINE_APPS before the runs" [ "$(gpu_app_count)" -le "$BASELINE_APPS" ]
}

if [ -e "$W" ]; then echo "error: WORKDIR=$W exists; give a new path"; exit 2; fi
mkdir -p "$LOGS"
header "0. the GPU before any run"
nvidia-smi --query-gpu=name,driver_version --format=csv
gpu_apps
BASELINE_APPS=$(gpu_app_count)

header "1. a run, SIGTERMed mid-case once it has 5 rows"
start_run 180 "$LOGS/1_sigterm.log"
wait_rows 5 150
stop_mid_case TERM 143 "$LOGS/1_sigterm.log"
check "TERM: the resume line printed" grep -q "continue with the same command plus --resume" "$LOGS/1_sigterm.log"
ROWS_AFTER_TERM=$(rows)
check "TERM: results.json kept its $ROWS_AFTER_TERM rows" [ "$ROWS_AFTER_TERM" -ge 5 ]

header "2. --resume, SIGKILLed mid-case once it has 3 more rows"
start_run 180 "$LOGS/2_sigkill.log" --resume
wait_rows $((ROWS_AFTER_TERM + 3)) 120
stop_mid_case KILL 137 "$LOGS/2_sigkill.log"

header "3. --resume to completion; meanwhile a second --resume of the same workdir"
start_run 420 "$LOGS/3_complete.log" --resume
for _ in $(seq 300); do grep -q "^pid $RUN_PID$" "$W/run.lock" 2>/dev/null && break; sleep 0.2; done
echo "--- run.lock"; cat "$W/run.lock"
echo "--- the second --resume (foreground)"
timeout -s KILL 120 "${RUN[@]}" --resume >"$LOGS/3_second.out" 2>"$LOGS/3_second.err"; SECOND_RC=$?
echo "exit code: $SECOND_RC (expected 2)"
echo "stderr:"; cat "$LOGS/3_second.err"
check "second --resume refused with exit code 2" [ "$SECOND_RC" = 2 ]
check "its error names the holder pid $RUN_PID" grep -q "pid $RUN_PID" "$LOGS/3_second.err"
WORKER=$(worker_pid)
wait "$TIMEOUT_PID"; rc=$?
echo "the completing run's exit code: $rc (0: every row ok/unsupported; 1: some row failed)"
echo "--- last lines of its output"; tail -n 4 "$LOGS/3_complete.log"
check "completing run finished (exit 0 or 1)" [ "$rc" -le 1 ]
echo "--- results.json"
python3 - "$W/results.json" <<'EOF'
import collections, json, sys
res = json.load(open(sys.argv[1]))
ids = collections.Counter(r["case_id"] for r in res["rows"])
statuses = collections.Counter(r["status"] for r in res["rows"])
dups = sorted(c for c, n in ids.items() if n > 1)
print(f"{len(res['rows'])} rows, {len(ids)} distinct case ids, statuses {dict(statuses)}; "
      f"incomplete note: {res['notes'].get('incomplete', 'none')}; duplicate case ids: {dups or 'none'}")
sys.exit(1 if dups else 0)
EOF
check "results.json: no duplicate case ids" [ $? = 0 ]
sleep 3
gpu_apps
check "completed run: worker pid $WORKER gone" is_gone "$WORKER"
check "completed run: GPU compute apps back to the $BASELINE_APPS before the runs" [ "$(gpu_app_count)" -le "$BASELINE_APPS" ]

header "summary"
printf '%s\n' "${VERDICTS[@]}"
echo "logs: $LOGS; workdir: $W"
! printf '%s\n' "${VERDICTS[@]}" | grep -q '^FAIL'
