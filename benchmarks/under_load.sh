#!/usr/bin/env bash
# Run pytest on the given test files N times in a row under a CPU-burning background load (two busy
# processes per core, as the data-safety issue asks), stopping at the first failing pass. One line
# per pass (its number, exit code, seconds and pytest's summary line); the busy processes are
# stopped on any exit. Exit 0 when all N passes passed.
#
#   bash benchmarks/under_load.sh 50 tests/test_cli_model.py tests/run/test_lifetime.py
set -uo pipefail
n=${1:?usage: under_load.sh N TEST_FILE...}; shift
[ $# -gt 0 ] || { echo "under_load.sh: name at least one test file" >&2; exit 2; }
busy=$(( 2 * $(nproc) ))
pids=()
stop() { [ ${#pids[@]} -gt 0 ] && kill "${pids[@]}" 2>/dev/null; wait 2>/dev/null; }
trap stop EXIT
trap 'exit 130' INT TERM
for _ in $(seq "$busy"); do ( while :; do :; done ) & pids+=($!); done
echo "load: $busy busy processes on $(nproc) cores; $n passes of: $*"
for i in $(seq "$n"); do
  t0=$(date +%s)
  out=$(python3 -m pytest -q -p no:cacheprovider "$@" 2>&1); rc=$?
  summary=$(printf '%s\n' "$out" | grep -E '(passed|failed|error)' | tail -1)
  echo "pass $i/$n: exit $rc, $(( $(date +%s) - t0 )) s, $summary"
  if [ $rc -ne 0 ]; then printf '%s\n' "$out" | tail -40; exit 1; fi
done
echo "all $n passes passed"
