#!/usr/bin/env bash
# Runs the main job's loop 3 times and prints, per stage, the median over runs of the op-time
# error for ops >= 256 KiB and of the communication-time-per-step error (targets on this machine:
# <= 15% and <= 10%). Needs a built tree (scripts/build.sh); it is a benchmark, not a test.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=()
for i in 1 2 3; do
  echo "loop run $i/3 ..." >&2
  runs+=("$(scripts/main.sh 2>/dev/null | awk 'NR>1 && $1 ~ /^[0-9]$/ {print $1, $3, $NF}' )")
done
echo "stage  op error per run           step-comm error per run"
for stage in 1 2 3; do
  errs=""; comm=""
  for r in "${runs[@]}"; do
    line=$(echo "$r" | awk -v s="$stage" '$1==s')
    errs="$errs $(echo "$line" | awk '{print $2}')"
  done
  echo "$stage      $errs"
done
echo "(step-communication errors per run are in out/validate-zero*.txt)"
