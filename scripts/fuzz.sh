#!/usr/bin/env bash
# Builds the reader fuzz targets with clang's libFuzzer and runs each for a bounded time
# (FUZZ_SECONDS, default 20) from a seed corpus of the real reference logs. Exit non-zero if any
# target finds a crash.
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
corpus="build-fuzz/corpus"
rm -rf "$corpus"; mkdir -p "$corpus"
# Seeds: the real logs and tables, split into small pieces so the fuzzer starts from real shapes.
for f in ../shared/reference/deepspeed-v0.14.2-cpu/*/rank0.log ../shared/reference/nccl-tests/*.txt; do
  [ -f "$f" ] && split -l 40 "$f" "$corpus/$(basename "$(dirname "$f")")-$(basename "$f")-"
done
status=0
for t in fuzz_logs fuzz_nccl_tests fuzz_comms_line; do
  mkdir -p "build-fuzz/work-$t"; cp "$corpus"/* "build-fuzz/work-$t/" 2>/dev/null || true
  if build-fuzz/$t -max_total_time="$seconds" -max_len=8192 -timeout=10 -print_final_stats=0 \
       -artifact_prefix="build-fuzz/$t-" "build-fuzz/work-$t" >"build-fuzz/$t.log" 2>&1; then
    echo "fuzz $t: $(grep -Eo '#[0-9]+' "build-fuzz/$t.log" | tail -n 1 | tr -d '#') inputs in ${seconds}s, nothing found"
  else
    echo "fuzz $t: FOUND A PROBLEM (see build-fuzz/$t.log and build-fuzz/$t-*)"; tail -n 30 "build-fuzz/$t.log"; status=1
  fi
done
exit $status
