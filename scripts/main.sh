#!/usr/bin/env bash
# The main job, on this machine: install what is missing, build, then close the loop on the
# default config (the tiny GPT of configs/models/tiny-gpt.json, 4 ranks):
#   1. calibrate the localhost topology from a zerorun bench sweep (real MPI collectives);
#   2. for ZeRO stages 1, 2 and 3: predict the schedule's op times (zerosim predict), run it for real
#      (mpirun -np 4 zerorun), and validate the prediction against the measurement;
#   3. print one table: stage, ops matched, median op-time error (ops >= 256 KiB), communication
#      time per step predicted against measured, verdict.
# Everything it writes goes to out/. RANKS=2 scripts/main.sh runs the loop without oversubscribing
# a 2-core machine.
set -euo pipefail
cd "$(dirname "$0")/.."
say() { echo "zerosim main: $*" >&2; }
scripts/install-deps.sh
say "building (build/) ..."
scripts/build.sh >/dev/null
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
OUT=out; mkdir -p "$OUT"
ZEROSIM=build/sim/zerosim
ZERORUN=build/runtime/zerorun
RANKS=${RANKS:-4}
STEPS=5
MPIRUN=(mpirun -np "$RANKS" --oversubscribe --bind-to none --mca mpi_yield_when_idle 1)

# Measured as the run will time its ops: each call alone after a barrier, the shortest call over
# ranks, with cold caches as a training step's compute leaves them (--fenced); sizes up to a little
# above the largest op of the tiny model.
# Two rounds of half the calls each, some seconds apart: a shared 2-core machine drifts by 20-30%
# over tens of seconds, and one sweep per collective would carry its moment's drift into the fit.
say "1/3 measuring collectives with zerorun bench on $RANKS ranks (fenced calls) ..."
tables=()
for round in 1 2; do
  for op in all_reduce all_gather reduce_scatter broadcast; do
    "${MPIRUN[@]}" "$ZERORUN" bench --backend mpi --op "$op" --min 1K --max 8M --fenced -n 10 > "$OUT/bench-$op-$round.txt"
    tables+=("$OUT/bench-$op-$round.txt")
  done
done
say "    calibrating topologies/localhost.json -> $OUT/localhost-calibrated.json"
"$ZEROSIM" calibrate --topology topologies/localhost.json --world "$RANKS" "${tables[@]}" -o "$OUT/localhost-calibrated.json"

say "2/3 predict, run and validate ZeRO stages 1, 2, 3 ..."
rows=()
for stage in 1 2 3; do
  cfg="configs/deepspeed/tiny-zero$stage.json"
  say "    stage $stage: predict"
  for fmt in deepspeed json; do
    ext=log; [ "$fmt" = json ] && ext=json
    "$ZEROSIM" predict --ds-config "$cfg" --model configs/models/tiny-gpt.json --topology "$OUT/localhost-calibrated.json" \
      --world "$RANKS" --steps "$STEPS" --format "$fmt" -o "$OUT/predicted-zero$stage.$ext" 2>/dev/null
  done
  say "    stage $stage: run with every collective's result checked (mpirun -np $RANKS zerorun)"
  checks=ok
  "${MPIRUN[@]}" "$ZERORUN" --backend mpi --ds-config "$cfg" --model configs/models/tiny-gpt.json --steps "$STEPS" \
    --compute-scale 0 --quiet -o /dev/null --json "$OUT/checked-zero$stage.json" || checks=FAILED
  say "    stage $stage: timed run (zerorun --sync-each-op --op-time skew-free --no-verify)"
  # Op times are what is compared; compute segments would only add scheduling noise on 2 cores.
  # skew-free: with more ranks than cores a rank often leaves the fence late, and its peers' calls
  # would time that wait; the shortest call over ranks is the collective's own time. --no-verify:
  # the checks recompute every rank's gradients between ops and slow the collectives around them
  # by 20-40% on 2 cores; the run above checked the same schedule.
  "${MPIRUN[@]}" "$ZERORUN" --backend mpi --ds-config "$cfg" --model configs/models/tiny-gpt.json --steps "$STEPS" \
    --sync-each-op --op-time skew-free --no-verify --compute-scale 0 --quiet \
    -o "$OUT/measured-zero$stage.log" --json "$OUT/measured-zero$stage.json"
  say "    stage $stage: validate"
  # The JSON logs carry full-precision times (the DeepSpeed lines print 10 us steps, a large part
  # of a 0.1 ms op); the .log files beside them are the same runs in DeepSpeed's format.
  "$ZEROSIM" validate "$OUT/predicted-zero$stage.json" "$OUT/measured-zero$stage.json" --min-bytes 256K \
    -o "$OUT/validate-zero$stage.txt" || true
  row=$("$ZEROSIM" validate "$OUT/predicted-zero$stage.json" "$OUT/measured-zero$stage.json" --min-bytes 256K --format row || true)
  rows+=("$stage	$row	$checks")
done

say "3/3 results (details in $OUT/validate-zero*.txt)"
printf '%-6s %-12s %-22s %-30s %-8s %s\n' "stage" "ops matched" "median op error >=256K" "comm per step pred / meas ms" \
  "verdict" "results checked"
for r in "${rows[@]}"; do
  IFS=$'\t' read -r stage matched missing extra resized swapped err pred meas serr verdict checks <<<"$r"
  structure="$matched"; [ "$missing$extra$resized$swapped" = "0000" ] || structure="$matched (!)"
  printf '%-6s %-12s %-22s %-30s %-8s %s\n' "$stage" "$structure" "$(awk "BEGIN{printf \"%.1f%%\", $err*100}")" \
    "$pred / $meas ($(awk "BEGIN{printf \"%.0f%%\", $serr*100}"))" "$verdict" "$checks"
done
