#!/usr/bin/env bash
# Sets up, builds the kvlm binary and runs its main job on the bundled default model.
#   bash scripts/run.sh                          generate a continuation of "The jury said"
#   bash scripts/run.sh serve                    serve the HTTP APIs on 127.0.0.1:8080
#   bash scripts/run.sh <verb> [args...]         any other kvlm verb
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build --target kvlm -j "$(nproc)"
if (($# == 0)); then
  set -- generate --max-tokens 64 "The jury said"
fi
exec build/kvlm "$@"
