#!/usr/bin/env bash
# Builds the reader fuzz targets with clang's libFuzzer and runs each for a bounded time
# (FUZZ_SECONDS, default 20) from a seed corpus of the real files: the reference logs and tables,
# configs/, topologies/, tests/fixtures/ and a schedule IR written by zerosim. Exit non-zero if any
# target finds a crash. Each target prints one line; a clean one ends in "nothing found".
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v clang++ >/dev/null 2>&1 || [ ! -d /usr/lib/llvm-14/lib/clang ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends clang libclang-rt-14-dev >/dev/null
fi
if ! { CC=clang CXX=clang++ cmake -S fuzz -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >build-fuzz.log 2>&1 &&
       cmake --build build-fuzz -j "$(nproc)" >>build-fuzz.log 2>&1; }; then
  echo "fuzz: building the fuzz targets failed:"; tail -n 30 build-fuzz.log; exit 1
fi
seconds="${FUZZ_SECONDS:-20}"
seeds="build-fuzz/seeds"
rm -rf "$seeds"; mkdir -p "$seeds"/{logs,nccl,json-logs,topology,ds-config,model,schedule}
ref=../shared/reference
# Logs and tables, split into small pieces so the fuzzer starts from real shapes.
for f in "$ref"/deepspeed-*/*/rank0.log; do
  [ -f "$f" ] && split -l 40 "$f" "$seeds/logs/$(basename "$(dirname "$f")")-rank0-"
done
for f in "$ref"/nccl-tests*/*.txt; do
  [ -f "$f" ] && split -l 40 "$f" "$seeds/nccl/$(basename "$f")-"
done
cp tests/fixtures/*.json "$seeds/json-logs/"
cp topologies/*.json "$seeds/topology/"
# And each bounded figure just inside and just outside its range, 0, -1, 1e308 and NaN as text
# (topologies/README.md "Bounds"; issue 33).
command -v python3 >/dev/null 2>&1 && python3 scripts/topology_bound_seeds.py topologies/dgx-a100.json "$seeds/topology"
cp configs/deepspeed/*.json "$seeds/ds-config/"
for f in "$ref"/deepspeed-*/*/ds_config.json; do [ -f "$f" ] && cp "$f" "$seeds/ds-config/$(basename "$(dirname "$f")").json"; done
cp configs/models/*.json "$seeds/model/"
mkdir -p "$seeds/neox"
for f in "$ref"/gpt-neox-configs/*.yml tests/cli/inputs/neox-*.yml; do [ -f "$f" ] && cp "$f" "$seeds/neox/"; done
for f in "$ref"/deepspeed-*/model.json; do [ -f "$f" ] && cp "$f" "$seeds/model/$(basename "$(dirname "$f")").json"; done
# A schedule IR and a prediction as zerosim writes them (when the main build is there).
zerosim=build/sim/zerosim
if [ -x "$zerosim" ]; then
  "$zerosim" schedule --ds-config configs/deepspeed/tiny-zero1.json --model configs/models/tiny-gpt.json --world 2 \
    --steps 1 --format json -o "$seeds/schedule/tiny-zero1.json" >/dev/null 2>&1 || true
  "$zerosim" predict --ds-config configs/deepspeed/tiny-zero1.json --model configs/models/tiny-gpt.json \
    --topology topologies/localhost.json --world 2 --steps 1 --format json -o "$seeds/json-logs/predicted.json" >/dev/null 2>&1 || true
fi
# target, seed folders, largest input (the JSON documents are larger than a log's piece)
targets=(
  "fuzz_logs logs nccl json-logs 8192"
  "fuzz_nccl_tests nccl 8192"
  "fuzz_comms_line logs 8192"
  "fuzz_zerorun_log json-logs 65536"
  "fuzz_topology topology 16384"
  "fuzz_ds_config ds-config 16384"
  "fuzz_model model 16384"
  "fuzz_schedule_json schedule 262144"
  "fuzz_neox neox 16384"
)
status=0
for entry in "${targets[@]}"; do
  read -r -a words <<<"$entry"
  t=${words[0]}; max_len=${words[-1]}
  work="build-fuzz/work-$t"; rm -rf "$work"; mkdir -p "$work"
  for d in "${words[@]:1:${#words[@]}-2}"; do cp "$seeds/$d"/* "$work/" 2>/dev/null || true; done
  if build-fuzz/$t -max_total_time="$seconds" -max_len="$max_len" -timeout=10 -rss_limit_mb=2048 -print_final_stats=0 \
       -artifact_prefix="build-fuzz/$t-" "$work" >"build-fuzz/$t.log" 2>&1; then
    echo "fuzz $t: $(grep -Eo '#[0-9]+' "build-fuzz/$t.log" | tail -n 1 | tr -d '#') inputs in ${seconds}s, nothing found"
  else
    echo "fuzz $t: FOUND A PROBLEM (see build-fuzz/$t.log and build-fuzz/$t-*)"; tail -n 30 "build-fuzz/$t.log"; status=1
  fi
done
exit $status
