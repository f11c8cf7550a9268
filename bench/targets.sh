#!/usr/bin/env bash
# The CPU-performance target matrix of docs/performance.md: the synthetic 0.5B and 1B shapes in
# bf16, MLX q8 and q4 (prefill 512, decode at concurrency 1, 8 and 16, each against
# the probes of its own run), then the bundled model, each the median of three interleaved rounds
# (ROUNDS=n to change). Extra arguments go to every run (for example --pin-threads). Ends with the
# targets as a markdown table (bench/targets_table.js); the JSON reports stay in $REPORTS
# (default build/targets). Run it on an otherwise idle machine; build/kvlm must exist
# (scripts/build.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
kvlm=${KVLM:-build/kvlm}
rounds=${ROUNDS:-3}
reports=${REPORTS:-build/targets}
mkdir -p "$reports"
columns=()
for run in "0.5b bf16" "0.5b q8" "0.5b q4" "1b bf16" "1b q8" "1b q4"; do
  read -r shape weights <<<"$run"
  echo "=== synthetic $shape $weights"
  json="$reports/$shape-$weights.json"
  "$kvlm" bench --synthetic "$shape" --weights "$weights" --prompt 512 --context 128 --decode 32 \
    --concurrency 1,8,16 --repeat "$rounds" --json "$json" "$@"
  columns+=("${shape^^} $weights=$json")
done
echo "=== bundled model"
"$kvlm" bench --prompt 256 --context 128 --decode 32 --concurrency 1,8,16 --repeat "$rounds" \
  --json "$reports/bundled.json" "$@"
columns+=("bundled=$reports/bundled.json")
echo "=== targets"
node bench/targets_table.js "${columns[@]}"
