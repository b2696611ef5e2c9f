#!/usr/bin/env bash
# The golden set: every zerosim command over the shared reference inputs, the main job's configs and
# every shipped topology, each run's standard output, standard error and exit code in one file of
# OUTDIR. A refactor that must not change behaviour runs it before and after and diffs the folders:
#
#   scripts/golden.sh /tmp/golden-before            # on the old tree
#   scripts/golden.sh /tmp/golden-after             # on the new one
#   diff -r /tmp/golden-before /tmp/golden-after    # every difference is listed and justified
#
# ZEROSIM (default build/sim/zerosim) is the binary run; JOBS (default nproc) runs in parallel.
# Paths in the outputs are relative to the repository root, so two checkouts compare equal.
set -uo pipefail
cd "$(dirname "$0")/.."
out="${1:?usage: scripts/golden.sh OUTDIR}"
if [ -e "$out" ] && [ -n "$(ls -A "$out" 2>/dev/null)" ]; then
  echo "golden: $out exists and is not empty; give a new folder" >&2; exit 2
fi
mkdir -p "$out" || exit 1
out="$(cd "$out" && pwd)"
zs="${ZEROSIM:-build/sim/zerosim}"
[ -x "$zs" ] || { echo "golden: $zs is not built (scripts/build.sh)" >&2; exit 2; }
zs="$(cd "$(dirname "$zs")" && pwd)/$(basename "$zs")"
# ../shared is reached as reference/ (a link in a scratch folder) so that outputs name the same paths
# whichever checkout runs them.
work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
ln -s "$(pwd)" "$work/repo"; ln -s "$(cd ../shared/reference && pwd)" "$work/reference"
list="$work/commands"; : > "$list"
add() {  # add NAME ARGS...: one zerosim run
  local name="$1"; shift
  printf '%s\t%s\n' "$name" "$*" >> "$list"
}

R=reference
V=$R/deepspeed-v0.14.2-cpu-variants
C=$R/deepspeed-v0.14.2-cpu
REL=$R/deepspeed-releases-cpu
D=repo/configs/deepspeed
M=repo/configs/models
T=repo/topologies

# 1. Schedules of every reference run, in every format, at the release it ran.
for run in $C/z1_seed_w4 $C/z2_smallbucket_w4 $C/z3_default_w4 \
           $V/hpz2_r0p0_w4 $V/mics2_w4 $V/qgz_l2_w4 $V/qwz_w4 $V/z3_offload_opt_w4 $V/z3_zeroinit_w4; do
  n=$(basename "$run"); model="$(dirname "$run")/model.json"
  extra=""; [ "$n" = z3_zeroinit_w4 ] && extra="--zero-init"
  for f in deepspeed table json; do
    add "schedule-$n-$f" schedule --ds-config $run/ds_config.json --model $model --world 4 --steps 3 \
        --gpus-per-node 4 --deepspeed 0.14.2 --format $f $extra
  done
  add "memory-$n" memory --ds-config $run/ds_config.json --model $model --world 4 --deepspeed 0.14.2 --gpus-per-node 4
  add "explain-$n" explain --ds-config $run/ds_config.json --model $model --world 4 --deepspeed 0.14.2 --gpus-per-node 4
  add "predict-$n-localhost" predict --ds-config $run/ds_config.json --model $model --topology $T/localhost.json \
      --world 4 --steps 3 --deepspeed 0.14.2 --format json $extra
  add "validate-$n" validate "$work/pred-$n.log" $run/rank0.log --what ops --deepspeed 0.14.2
done
for run in $REL/v0.14.2_z3t $REL/v0.16.2_z3t $REL/v0.18.2_z1_defaultlevel; do
  n=$(basename "$run"); v=${n#v}; v=${v%%_*}
  add "schedule-rel-$n" schedule --ds-config $run/ds_config.json --model $REL/model.json --world 2 --steps 3 \
      --deepspeed $v --format deepspeed
done

# 2. The main job's configs on localhost (2 ranks) and every stage config of configs/.
for s in 1 2 3; do
  add "predict-tiny-zero$s" predict --ds-config $D/tiny-zero$s.json --model $M/tiny-gpt.json \
      --topology $T/localhost.json --world 2 --steps 3 --format json --deepspeed 0.14.2
  add "schedule-tiny-zero$s" schedule --ds-config $D/tiny-zero$s.json --model $M/tiny-gpt.json --world 2 \
      --steps 3 --format json
done
for s in 0 1 2 3; do
  for m in gpt2-small llama-2-7b; do
    add "predict-$m-zero$s-h100x2" predict --ds-config $D/zero$s.json --model $M/$m.json \
        --topology $T/dgx-h100.json --nodes 2 --steps 2 --format json --trace "$out/trace-$m-zero$s.json"
    add "memory-$m-zero$s" memory --ds-config $D/zero$s.json --model $M/$m.json --world 64
    add "explain-$m-zero$s" explain --ds-config $D/zero$s.json --model $M/$m.json --world 16
  done
done

# 3. Every topology, stages 2 and 3, 2 nodes.
for topo in topologies/*.json; do
  t=$(basename "$topo" .json); topo=$T/$t.json
  for s in 2 3; do
    add "predict-topo-$t-zero$s" predict --ds-config $D/zero$s.json --model $M/llama-2-7b.json --topology $topo \
        --nodes 2 --steps 2 --format csv
  done
  add "bench-$t" bench --topology $topo --op all_reduce --min 8 --max 1G
done

# 4. What-ifs, fabric mode, ZeRO++ on a cluster, sweep, need, report.
add "whatif-reduce-scatter" predict --ds-config $D/zero2.json --model $M/llama-2-7b.json --topology $T/dgx-h100.json \
    --nodes 8 --format summary --what-if reduce-scatter
for w in fsdp-full-shard fsdp-shard-grad-op hybrid-shard; do
  add "whatif-$w" predict --ds-config $D/zero3.json --model $M/llama-2-7b.json --topology $T/dgx-h100.json \
      --nodes 4 --format json --what-if $w
  add "whatif-$w-schedule" schedule --ds-config $D/zero3.json --model $M/llama-2-7b.json --world 32 --steps 2 \
      --format json --what-if $w --gpus-per-node 8
done
add "fabric-degraded" predict --ds-config $D/zero3.json --model $M/llama-2-7b.json --topology $T/dgx-h100.json \
    --nodes 4 --format summary --fabric --degrade node1.nic3=0.5 --straggler rank17=0.9 --deepspeed 0.14.2
for run in $V/hpz2_r0p0_w4 $V/mics2_w4 $V/qgz_l2_w4 $V/qwz_w4 $V/z3_offload_opt_w4; do
  n=$(basename "$run")
  add "predict-$n-h100x4" predict --ds-config $run/ds_config.json --model $M/llama-2-7b.json \
      --topology $T/dgx-h100.json --nodes 4 --steps 2 --format json --deepspeed 0.14.2
  add "fabric-$n-h100x4" predict --ds-config $run/ds_config.json --model $M/llama-2-7b.json \
      --topology $T/dgx-h100.json --nodes 4 --steps 2 --format summary --fabric --deepspeed 0.14.2
done
add "sweep" sweep --model $M/llama-2-7b.json --topology $T/dgx-h100.json --stages 0,1,2,3 --nodes 1,2,4 --jobs 1
add "need" need --ds-config $D/zero3.json --model $M/llama-2-70b.json --topology $T/dgx-h100.json --deepspeed 0.14.2 \
    --nodes 64 --zero-init --solve inter-node-bandwidth --exposed-below 5
add "report" report --ds-config $D/zero3.json --model $M/llama-2-7b.json --topology $T/dgx-a100.json --nodes 2 \
    -o "$out/report.html"
add "calibrate" calibrate --topology $T/dgx-a100.json $R/nccl-tests/a100-8gpu-allreduce.txt -o "$out/calibrated.json"

# The validate runs read a predicted log of the run first.
run_one() {
  local name="$1" args="$2"
  cd "$work" || return 1
  # shellcheck disable=SC2086
  { "$zs" $args > "$out/$name.out" 2> "$out/$name.err"; echo "exit $?" > "$out/$name.rc"; }
}
export -f run_one; export zs out work
for run in $C/z1_seed_w4 $C/z2_smallbucket_w4 $C/z3_default_w4 \
           $V/hpz2_r0p0_w4 $V/mics2_w4 $V/qgz_l2_w4 $V/qwz_w4 $V/z3_offload_opt_w4 $V/z3_zeroinit_w4; do
  n=$(basename "$run"); model="$(dirname "$run")/model.json"
  extra=""; [ "$n" = z3_zeroinit_w4 ] && extra="--zero-init"
  (cd "$work" && "$zs" predict --ds-config $run/ds_config.json --model $model --topology $T/localhost.json \
      --world 4 --steps 3 --deepspeed 0.14.2 --format deepspeed $extra -o "$work/pred-$n.log" 2>/dev/null)
done
echo "golden: $(wc -l < "$list") commands into $out" >&2
awk -F'\t' '{print $1"\t"$2}' "$list" | \
  xargs -P "${JOBS:-$(nproc)}" -d '\n' -I{} bash -c 'IFS=$'"'"'\t'"'"' read -r n a <<< "{}"; run_one "$n" "$a"'
# Absolute scratch paths in messages become <work>, <out>.
# The sweep's progress line carries wall-clock seconds.
sed -i -E -e "s#$work#<work>#g" -e "s#$out#<out>#g" -e 's/[0-9.]+ s elapsed, about [0-9.]+ s left/<elapsed>/' \
  "$out"/*.out "$out"/*.err 2>/dev/null
cp "$list" "$out/COMMANDS"; sed -i -e "s#$work#<work>#g" -e "s#$out#<out>#g" "$out/COMMANDS"
echo "golden: done; $(grep -L 'exit 0' "$out"/*.rc | wc -l) commands exited non-zero (their .err says why)" >&2
