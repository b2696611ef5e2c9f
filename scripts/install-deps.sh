#!/usr/bin/env bash
# Installs the Debian 12 packages zerosim builds against, only those that are missing.
set -euo pipefail
PACKAGES=(cmake ninja-build g++ pkg-config libsimgrid-dev libeigen3-dev nlohmann-json3-dev libgtest-dev
          libopenmpi-dev openmpi-bin libcli11-dev libbenchmark-dev libyaml-cpp-dev)
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "zerosim: installing ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
