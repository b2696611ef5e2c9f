#!/usr/bin/env bash
# Configures and builds zerosim into a build folder (default: build/). Extra arguments go to cmake.
set -euo pipefail
cd "$(dirname "$0")/.."
dir="${BUILD_DIR:-build}"
cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-RelWithDebInfo}" -DZEROSIM_RUNTIME=ON "$@" >/dev/null
cmake --build "$dir" -j "$(nproc)"
