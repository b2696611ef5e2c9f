#!/usr/bin/env bash
# Runs the main job 3 times and prints, per stage and run, the op-time error for ops >= 256 KiB with
# its 95% interval, the noise floor and the calibration's standard error, the communication-per-step error and the verdict, then the
# calibration's median |residual| per collective of each run (issue 20's targets: the same verdict
# in every run; op error <= 15% and step error <= 10%, or INCONCLUSIVE with the floor above the
# tolerance and the repeats that would settle it; residuals <= 10%). Each run's out/ is kept in
# out/loop-N/. A benchmark, not a test: several minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p out   # main.sh makes it too, but the first table is redirected there before it runs
# LOOP_REPORT_ONLY=1: print the tables again from the out/loop-N/ folders a previous run kept.
for i in 1 2 3; do
  [ -z "${LOOP_REPORT_ONLY:-}" ] || break
  echo "loop run $i/3 ..." >&2
  scripts/main.sh 2>/dev/null > "out/loop-$i.table"
  rm -rf "out/loop-$i"; mkdir -p "out/loop-$i"
  # The logs and rounds too, so that the statistics can be recomputed offline (fit on some runs,
  # judged on the others).
  cp out/validate-zero*.txt out/calibrate-zero*.txt out/prediction-error-zero*.json out/measured-zero*.json \
    out/predicted-zero*.json out/rounds-zero*.txt out/localhost-calibrated-zero*.json "out/loop-$i/"
done
median() { sort -g | awk '{v[NR]=$1} END {print (NR % 2) ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2}'; }
printf '%-4s %-5s %-22s %-19s %-22s %-13s %s\n' run stage "op error [95%]" "noise stp/med/pred" "step-comm error [95%]" verdict "settled by"
for i in 1 2 3; do
  awk -v run="$i" '$1 ~ /^[1-3]$/ {
      # columns: stage matched err [lo, hi] floor / median-floor / pred-se pred / meas (serr [slo, shi]) verdict checked
      settle = ""; for (f = 18; f < NF; ++f) settle = settle (settle == "" ? "" : " ") $f
      printf "%-4s %-5s %-22s %-19s %-22s %-13s %s\n", run, $1, $3 " " $4 " " $5, $6 " " $7 " " $8 " " $9 " " $10, $14 " " $15 " " $16, $17, settle }' "out/loop-$i.table"
  grep '^machine:' "out/loop-$i.table" | sed "s/^/run $i /"
done
echo
for s in 1 2 3; do
  ops=$(for i in 1 2 3; do awk -v s=$s '$1==s {gsub(/%/, "", $3); print $3}' "out/loop-$i.table"; done)
  comm=$(for i in 1 2 3; do awk -v s=$s '$1==s {gsub(/[(%]/, "", $14); print $14}' "out/loop-$i.table"; done)
  verdicts=$(for i in 1 2 3; do awk -v s=$s '$1==s {print $17}' "out/loop-$i.table"; done | sort -u | tr '\n' ' ')
  printf 'stage %s: op error median %s%%, step-comm error median %s%%, verdicts seen: %s\n' "$s" \
    "$(echo "$ops" | median)" "$(echo "$comm" | median)" "$verdicts"
done
echo
echo "calibration: median |residual| per collective, all rows (< 256 KiB / >= 256 KiB) (as written: the fit as the calibrated file applies it)"
for i in 1 2 3; do
  for s in 1 2 3; do
    printf 'run %s stage %s: %s\n' "$i" "$s" "$(awk '$1 ~ /^(all_reduce|all_gather|reduce_scatter|broadcast)$/ {name = $1; all = $10}
        $1 == "by" && $2 == "size" {printf "%s %s (%s / %s)  ", name, all, $8, $14}
        $1 == "as" && $2 == "written" {printf "as-written %s", $5}' "out/loop-$i/calibrate-zero$s.txt")"
  done
done
