#!/usr/bin/env bash
# Runs the main job's loop 3 times and prints, per stage, the op-time error for ops >= 256 KiB and
# the communication-time-per-step error of each run and their medians (targets on this machine:
# <= 15% and <= 10%). A benchmark, not a test: it takes about 3 minutes after the build.
set -euo pipefail
cd "$(dirname "$0")/.."
all=""
for i in 1 2 3; do
  echo "loop run $i/3 ..." >&2
  all+=$(scripts/main.sh 2>/dev/null | awk '$1 ~ /^[1-3]$/ {gsub(/[()%]/, "", $7); gsub(/%/, "", $3); print $1, $3, $7}')$'\n'
done
median() { sort -g | awk '{v[NR]=$1} END {print (NR % 2) ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2}'; }
printf '%-6s %-26s %-8s %-26s %-8s\n' stage "op error >=256K per run %" median "step-comm error per run %" median
for s in 1 2 3; do
  ops=$(echo "$all" | awk -v s=$s '$1==s {print $2}')
  comm=$(echo "$all" | awk -v s=$s '$1==s {print $3}')
  printf '%-6s %-26s %-8s %-26s %-8s\n' "$s" "$(echo $ops)" "$(echo "$ops" | median)" "$(echo $comm)" "$(echo "$comm" | median)"
done
