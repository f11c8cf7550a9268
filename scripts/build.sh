#!/usr/bin/env bash
# Configures and builds kvlm in ./build (Release, tests included).
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DKVLM_BUILD_TESTS=ON >/dev/null
cmake --build build -j "$(nproc)"
