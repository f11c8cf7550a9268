#!/usr/bin/env bash
# End-to-end test of the KV codec flags (--kv-quant, --kv-group-size, --kv-config) on perplexity,
# generate and kv-eval with the bundled default model (head_dim 64).
# $1: the kvlm binary; $2: the repository root.
set -euo pipefail
source "$(dirname "$0")/cli_test_lib.sh"

cat >"$tmp/text.txt" <<'TEXT'
The jury further said in term-end presentments that the City Executive Committee, which had
over-all charge of the election, deserves the praise and thanks of the City of Atlanta for the
manner in which the election was conducted.
TEXT

ppl() { sed -n 's/^perplexity: //p' "$1"; }

# off is the default: the same numbers with and without the flag.
"$kvlm" perplexity --file "$tmp/text.txt" --context 32 --stride 16 >"$tmp/default" 2>/dev/null
"$kvlm" perplexity --file "$tmp/text.txt" --context 32 --stride 16 --kv-quant off >"$tmp/off" 2>/dev/null
cmp -s "$tmp/default" "$tmp/off" || fail "--kv-quant off differs from the default"

# A compressed cache changes the perplexity a little, not a lot.
"$kvlm" perplexity --file "$tmp/text.txt" --context 32 --stride 16 --kv-quant turbo:k4v2 >"$tmp/turbo" 2>/dev/null
awk -v a="$(ppl "$tmp/off")" -v b="$(ppl "$tmp/turbo")" 'BEGIN { d = b / a; exit !(d != 1 && d > 0.8 && d < 1.25) }' ||
  fail "turbo:k4v2 perplexity $(ppl "$tmp/turbo") is not near off's $(ppl "$tmp/off")"

# kv_config.json: layer 0 at 4 bits, the rest exact.
echo '[{"layer_idx": 0, "bits": 4, "group_size": 32}]' >"$tmp/kv_config.json"
"$kvlm" perplexity --file "$tmp/text.txt" --context 32 --stride 16 --kv-quant config \
  --kv-config "$tmp/kv_config.json" >"$tmp/config" 2>/dev/null || fail "--kv-quant config failed"
[[ -n "$(ppl "$tmp/config")" ]] || fail "no perplexity with --kv-quant config"

# Bad values exit 1 with the message naming the value, the file, the entry or the field.
expect_error "--kv-quant: unknown value 'turbo:k8'" perplexity --file "$tmp/text.txt" --kv-quant turbo:k8
expect_error "--kv-quant 7 --kv-group-size 64: MLX affine KV takes bits 2, 3, 4, 5, 6 or 8" \
  generate --kv-quant 7 -n 1 "Hello"
echo '[{"layer_idx": 0, "bits": 4}, {"layer_idx": 99, "bits": 8}]' >"$tmp/bad.json"
expect_error "$tmp/bad.json: entry 1: field 'layer_idx': 99 is outside the model's layers 0..7" \
  perplexity --file "$tmp/text.txt" --kv-quant config --kv-config "$tmp/bad.json"
expect_error "--kv-config $tmp/bad.json: needs --kv-quant config" \
  perplexity --file "$tmp/text.txt" --kv-quant 8 --kv-config "$tmp/bad.json"

# generate runs over a compressed cache.
"$kvlm" generate --kv-quant turbo -n 4 --temp 0 "Once upon a time" >"$tmp/gen" 2>/dev/null || fail "generate --kv-quant turbo failed"
[[ -s "$tmp/gen" ]] || fail "generate printed nothing"

# kv-eval against the bf16 cache.
"$kvlm" kv-eval --file "$tmp/text.txt" --context 32 --stride 16 --kv-quant turbo:k8v3 >"$tmp/eval" 2>/dev/null ||
  fail "kv-eval failed"
grep -q '^scheme: turbo:k8v3$' "$tmp/eval" || fail "kv-eval scheme line: $(cat "$tmp/eval")"
grep -q '^baseline: bf16$' "$tmp/eval" || fail "kv-eval baseline line"
grep -q '^bits per element: 6.250 (baseline 16.000)$' "$tmp/eval" || fail "kv-eval bits line: $(cat "$tmp/eval")"
grep -q '^KV bytes per token: 1600 (baseline 4096)$' "$tmp/eval" || fail "kv-eval bytes line"
kl="$(sed -n 's/^mean KL: //p' "$tmp/eval")"
awk -v k="$kl" 'BEGIN { exit !(k > 0 && k < 0.5) }' || fail "kv-eval mean KL $kl out of range"
grep -q '^| turbo:k8v3 | 6.25 | 1600 | ' "$tmp/eval" || fail "kv-eval table row"

echo "kv_quant: ok"
