#!/usr/bin/env bash
# The CPU-performance target matrix of docs/performance.md: the synthetic 0.5B and 1B shapes in
# bf16, MLX q8 and q4 (prefill 512, decode at concurrency 1, 8 and 16, each against
# the probes of its own run), then the bundled model, each the median of three interleaved rounds
# (ROUNDS=n to change). Extra arguments go to every run (for example --pin-threads). Run it on an
# otherwise idle machine; build/kvlm must exist (scripts/build.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
kvlm=${KVLM:-build/kvlm}
rounds=${ROUNDS:-3}
for run in "0.5b bf16" "0.5b q8" "0.5b q4" "1b bf16" "1b q8" "1b q4"; do
  read -r shape weights <<<"$run"
  echo "=== synthetic $shape $weights"
  "$kvlm" bench --synthetic "$shape" --weights "$weights" --prompt 512 --context 128 --decode 32 \
    --concurrency 1,8,16 --repeat "$rounds" "$@"
done
echo "=== bundled model"
"$kvlm" bench --prompt 256 --context 128 --decode 32 --concurrency 1,8,16 --repeat "$rounds" "$@"
