#!/usr/bin/env bash
# The whole test suite: install what is missing, build, run every test; then build and run the
# suite again under AddressSanitizer and UndefinedBehaviorSanitizer (build-asan/).
set -uo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh || exit 1
# The report test opens the HTML report in headless Chromium.
if ! command -v chromium >/dev/null 2>&1; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends chromium >/dev/null || exit 1
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
passed=0; failed=0; status=0
run_suite() {  # $1 = build folder, rest = cmake args
  local dir="$1"; shift
  BUILD_DIR="$dir" scripts/build.sh "$@" || { echo "zerosim: build in $dir failed"; status=1; return; }
  local log; log="$(mktemp)"
  (cd "$dir" && ctest --output-on-failure -j "$(nproc)") 2>&1 | tee "$log"
  local line; line="$(grep -E 'tests passed, [0-9]+ tests failed out of [0-9]+' "$log" | tail -n 1)"
  if [[ "$line" =~ ([0-9]+)\ tests\ failed\ out\ of\ ([0-9]+) ]]; then
    failed=$((failed + BASH_REMATCH[1])); passed=$((passed + BASH_REMATCH[2] - BASH_REMATCH[1]))
    [ "${BASH_REMATCH[1]}" -eq 0 ] || status=1
  else
    status=1
  fi
  rm -f "$log"
}
run_suite build
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  run_suite build-asan -DZEROSIM_SANITIZE=ON -DZEROSIM_BENCHMARKS=OFF -DCMAKE_BUILD_TYPE=Debug "-DCMAKE_CXX_FLAGS_DEBUG=-O0 -g1"
# The readers' fuzz targets (libFuzzer), 8 s each here (scripts/fuzz.sh alone: 20) to keep the suite within
# CI's time; each target counts as one test.
fuzz_out=$(mktemp)
if FUZZ_SECONDS="${FUZZ_SECONDS:-8}" scripts/fuzz.sh | tee "$fuzz_out"; then
  passed=$((passed + $(grep -c 'nothing found' "$fuzz_out")))
else
  failed=$((failed + 1)); status=1
fi
rm -f "$fuzz_out"
echo "zerosim tests (plain and sanitized builds, fuzz targets):"
echo "total: ${passed} passed, ${failed} failed"
exit $status
