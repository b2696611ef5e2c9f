#!/usr/bin/env bash
# The NCCL backend on a real GPU, in one command: builds build-gpu/ (CUDA + NCCL from
# CUDAToolkit_ROOT, default /usr/local/cuda), then, when a CUDA device is visible, runs at world 1:
#   - zerorun bench --backend nccl for all_reduce, all_gather, reduce_scatter, broadcast
#     (float, bfloat16, half), each table must say "# Out of bounds values : 0 OK";
#   - zerorun stages 0-3 on configs/models/tiny-gpt.json with --backend nccl (every op checked);
#   - the GoogleTest cases that need a GPU (NcclGpu.*, NcclHost.*);
# and prints a short report. Without a GPU it says so and exits 0 after the build.
# Exit: 0 all passed (or no GPU), 1 a check failed, 2 the build failed.
set -uo pipefail
cd "$(dirname "$0")/.."
dir="${BUILD_DIR:-build-gpu}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cuda="${CUDAToolkit_ROOT:-/usr/local/cuda}"
mkdir -p "$dir"

cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DZEROSIM_BENCHMARKS=OFF \
  -DCUDAToolkit_ROOT="$cuda" >"$dir/gpu-check.cmake.log" 2>&1 || { cat "$dir/gpu-check.cmake.log"; echo "gpu-check: cmake failed"; exit 2; }
grep "zerorun:" "$dir/gpu-check.cmake.log"
cmake --build "$dir" -j "$(nproc)" --target zerorun zerorun_tests nccl_id_exchange zerosim \
  || { echo "gpu-check: build failed"; exit 2; }
if ! grep -q "NCCL backend enabled" "$dir/gpu-check.cmake.log"; then
  echo "gpu-check: built WITHOUT the NCCL backend (see the cmake line above); nothing to run"; exit 1
fi

if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "gpu-check: no GPU here (nvidia-smi missing or shows no device): built only, no GPU test run"
  exit 0
fi
nvidia-smi -L

zr="$dir/runtime/zerorun"
mpi=(mpirun --allow-run-as-root --oversubscribe --bind-to none -np 1)
results=(); fails=0
check() {  # $1 = name, rest = command; passes when the command exits 0 (zerorun exits 1 on any wrong result)
  local name="$1"; shift
  local out; out="$("$@" 2>&1)"; local rc=$?
  echo "$out" > "$dir/gpu-check.$name.log"
  if [ $rc -eq 0 ]; then results+=("PASS  $name"); else results+=("FAIL  $name (exit $rc, $dir/gpu-check.$name.log)"); fails=$((fails + 1)); fi
}
for op in all_reduce all_gather reduce_scatter broadcast; do
  for t in float bfloat16 half; do
    check "bench-$op-$t" bash -c "set -o pipefail; ${mpi[*]} $zr bench --backend nccl --op $op --dtype $t --min 8 --max 64M -f 4 -n 5 -w 2 | tee /dev/stderr | grep -q '# Out of bounds values : 0 OK'"
  done
done
tmp="$(mktemp -d)"
for s in 0 1 2 3; do
  check "stage$s-tiny-gpt" "${mpi[@]}" "$zr" --backend nccl --ds-config "tests/runtime/configs/z$s.json" \
    --model configs/models/tiny-gpt.json --steps 2 --quiet -o "$tmp/z$s.log" --json "$tmp/z$s.json.out"
done
check "gtest-nccl" "$dir/tests/runtime/zerorun_tests" --gtest_filter='Nccl*'

echo
echo "gpu-check report ($(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)):"
printf '  %s\n' "${results[@]}"
echo "  $(( ${#results[@]} - fails )) passed, $fails failed"
[ $fails -eq 0 ]
