#!/usr/bin/env bash
# End-to-end test of `kvlm generate` on the bundled default model.
# $1: the kvlm binary; $2: the repository root.
set -euo pipefail
source "$(dirname "$0")/cli_test_lib.sh"

# The README's main command: a plain continuation on the default model.
"$kvlm" generate --max-tokens 8 --temp 0 "The jury said" >"$tmp/out" 2>"$tmp/err" ||
  fail "generate exited $?: $(cat "$tmp/err")"
grep -q '[^[:space:]]' "$tmp/out" || fail "generate printed no text"
grep -q 'prompt: .* tokens/s' "$tmp/err" || fail "no prefill speed on stderr: $(cat "$tmp/err")"
grep -q 'generation: .* tokens/s' "$tmp/err" || fail "no decode speed on stderr: $(cat "$tmp/err")"

# Greedy output is reproducible, and naming the default model's folder gives the same text.
"$kvlm" generate "$root/models/default" --max-tokens 8 --temp 0 "The jury said" >"$tmp/out2" 2>/dev/null
cmp -s "$tmp/out" "$tmp/out2" || fail "greedy output differs between runs"

# A fixed seed reproduces a sampled continuation.
"$kvlm" generate --max-tokens 12 --temp 0.8 --top-p 0.9 --seed 7 "Once upon a time" >"$tmp/s1" 2>/dev/null
"$kvlm" generate --max-tokens 12 --temp 0.8 --top-p 0.9 --seed 7 "Once upon a time" >"$tmp/s2" 2>/dev/null
cmp -s "$tmp/s1" "$tmp/s2" || fail "the same seed gave different text"

# Sampling defaults come from generation_config.json when it sets do_sample, and a flag wins.
sampling="$tmp/sampling-model"
mkdir "$sampling"
for f in "$root"/models/default/*; do ln -s "$f" "$sampling/"; done
rm "$sampling/generation_config.json"
echo '{"do_sample": true, "temperature": 0.9, "top_k": 20, "eos_token_id": [0, 2]}' >"$sampling/generation_config.json"
"$kvlm" generate "$sampling" --verbose --seed 3 --max-tokens 16 "The jury said" >"$tmp/g1" 2>"$tmp/err"
grep -q "temperature 0.9, top_p 0, top_k 20" "$tmp/err" || fail "generation_config.json defaults not used: $(cat "$tmp/err")"
"$kvlm" generate --seed 3 --temp 0.9 --top-k 20 --max-tokens 16 "The jury said" >"$tmp/g2" 2>/dev/null
cmp -s "$tmp/g1" "$tmp/g2" || fail "generation_config.json sampling differs from the same flags"
"$kvlm" generate "$sampling" --temp 0 --max-tokens 8 "The jury said" >"$tmp/g3" 2>/dev/null
cmp -s "$tmp/g3" "$tmp/out" || fail "--temp 0 did not override generation_config.json"

# --matmul: the bundled model is dense, so int8 leaves it exact; a 4-bit conversion runs both
# paths (greedy text from either), and a bad value names the flag.
"$kvlm" generate --matmul int8 --max-tokens 8 --temp 0 "The jury said" >"$tmp/m1" 2>/dev/null
cmp -s "$tmp/m1" "$tmp/out" || fail "--matmul int8 changed the dense model's output"
"$kvlm" convert "$root/models/default" "$tmp/q4" --q-bits 4 --q-group-size 64 >/dev/null 2>&1 ||
  fail "convert to q4 failed"
for path in exact int8; do
  "$kvlm" generate "$tmp/q4" --matmul "$path" --max-tokens 8 --temp 0 "The jury said" >"$tmp/q4_$path" 2>"$tmp/err" ||
    fail "generate --matmul $path on q4 failed: $(cat "$tmp/err")"
  grep -q '[^[:space:]]' "$tmp/q4_$path" || fail "--matmul $path printed no text"
done
rc=0
"$kvlm" generate --matmul fast "hi" >/dev/null 2>"$tmp/err" || rc=$?
[[ $rc -ne 0 ]] || fail "--matmul fast was accepted"
grep -qF -- "--matmul: unknown value 'fast' (expected exact or int8)" "$tmp/err" ||
  fail "bad --matmul message: $(cat "$tmp/err")"

# The chat template path runs (the default model has a ChatML template).
"$kvlm" generate --chat --system "Be brief." --max-tokens 4 "Hello" >/dev/null 2>"$tmp/err" ||
  fail "--chat failed: $(cat "$tmp/err")"

# Bad input: one clear line on stderr, exit status 1.
expect_error "does not exist" generate "$tmp/no-such-model" "hi"
expect_error "no config.json" generate "$tmp" "hi"
expect_error "--system needs --chat" generate --system "x" "hi"
rc=0
"$kvlm" generate --top-p 2 "hi" >/dev/null 2>&1 || rc=$?
[[ $rc -ne 0 ]] || fail "--top-p 2 was accepted"

echo "generate: ok"
