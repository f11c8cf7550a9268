#!/usr/bin/env bash
# End-to-end test of `kvlm perplexity` on the bundled default model.
# $1: the kvlm binary; $2: the repository root.
set -euo pipefail
source "$(dirname "$0")/cli_test_lib.sh"

cat >"$tmp/text.txt" <<'TEXT'
The jury further said in term-end presentments that the City Executive Committee, which had
over-all charge of the election, deserves the praise and thanks of the City of Atlanta for the
manner in which the election was conducted. The September-October term jury had been charged by
Fulton Superior Court Judge Durwood Pye to investigate reports of possible irregularities in the
hard-fought primary which was won by Mayor-nominate Ivan Allen Jr.
TEXT

"$kvlm" perplexity --file "$tmp/text.txt" --context 32 --stride 16 >"$tmp/out" 2>"$tmp/err" ||
  fail "perplexity failed: $(cat "$tmp/err")"
ppl="$(sed -n 's/^perplexity: //p' "$tmp/out")"
[[ -n "$ppl" ]] || fail "no perplexity line: $(cat "$tmp/out")"
awk -v p="$ppl" 'BEGIN { exit !(p > 1 && p < 8192) }' || fail "perplexity $ppl is not within (1, vocab)"
grep -q '^mean NLL: ' "$tmp/out" || fail "no mean NLL line"

# The same run with the model folder named explicitly gives the same numbers.
"$kvlm" perplexity "$root/models/default" --file "$tmp/text.txt" --context 32 --stride 16 >"$tmp/out2" 2>/dev/null
cmp -s "$tmp/out" "$tmp/out2" || fail "explicit model folder gave a different result"

rc=0
"$kvlm" perplexity --file "$tmp/missing.txt" >/dev/null 2>"$tmp/err" || rc=$?
[[ $rc -eq 1 ]] && grep -q "error:" "$tmp/err" || fail "a missing file should exit 1 with an error line (rc $rc)"
rc=0
"$kvlm" perplexity --file "$tmp/text.txt" --context 16 --stride 32 >/dev/null 2>"$tmp/err" || rc=$?
[[ $rc -eq 1 ]] && grep -q "stride" "$tmp/err" || fail "stride > context should exit 1 naming the stride (rc $rc)"

echo "perplexity: ok"
