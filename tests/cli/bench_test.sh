#!/usr/bin/env bash
# End-to-end test of `kvlm bench` on the bundled default model: every figure of the JSON report is
# there and positive, each phase carries the probes taken around it (read bandwidth, the handoff
# between threads and their relative speeds for concurrency 1, the FMA peak for prefill and
# batches, and on the int8 path the int8 peak too; all of them on the instructions KVLM_CPU_ISA
# leaves the kernels), each limit is the higher of its two probes,
# --repeat reports the median of interleaved rounds, --profile accounts for the whole step,
# bench/targets_table.js tabulates reports, and bad options name the problem. $1: the kvlm binary;
# $2: the repository root.
set -euo pipefail
source "$(dirname "$0")/cli_test_lib.sh"

"$kvlm" bench --prompt 8 --context 8 --decode 2 --concurrency 1,2 --json "$tmp/report.json" \
  >"$tmp/out" 2>"$tmp/err" || fail "bench failed: $(cat "$tmp/err")"
grep -Eq '^decode concurrency  1 \(context 8\): .* of the bandwidth limit \(.*; read .* GB/s before, .* after\)( \[handoff .* us before, .* after; thread speeds [0-9./]+ before, [0-9./]+ after\])?$' \
  "$tmp/out" || fail "no bracketed bandwidth limit in: $(cat "$tmp/out")"
node - "$tmp/report.json" <<'JS' || fail "report: $(cat "$tmp/report.json")"
const assert = require("assert");
const r = JSON.parse(require("fs").readFileSync(process.argv[2], "utf8"));
assert(r.probes.read_bandwidth_gbs > 0 && r.probes.fma_peak_gflops > 0);
assert(r.prefill.tokens === 8 && r.prefill.tokens_per_s > 0 && r.prefill.fraction_of_fma_peak > 0);
assert(r.prefill.fma_peak_gflops_before_after.every((g) => g > 0));
assert(!("int8_peak_gops_before_after" in r.prefill));  // bf16 weights: no integer path
const [one, two] = r.decode;
assert(one.concurrency === 1 && two.concurrency === 2);
const [before, after] = one.read_bandwidth_gbs_before_after;
assert(before > 0 && after > 0 && one.fraction_of_bandwidth_limit > 0);
// The handoff between threads is probed with the bandwidth (0 when the pool has one thread).
assert(r.probes.handoff_us >= 0 && one.handoff_us_before_after.every((us) => us >= 0));
assert((r.threads > 1) === (r.probes.handoff_us > 0));
// So are the threads' speeds, each a fraction of the fastest's (1 for it).
const speeds = [r.probes.thread_speeds, ...one.thread_speeds_before_after];
assert(speeds.every((s) => s.length === r.threads && s.every((x) => x > 0 && x <= 1) && s.includes(1)));
assert(!("read_bandwidth_gbs_before_after" in two) && two.fraction_of_fma_peak > 0);
assert(two.fma_peak_gflops_before_after.length === 2 && !("fma_peak_gflops_before_after" in one));
assert(!("int8_peak_gops_before_after" in two));
// Each limit is the higher of its two probes: a probe the host interrupts reads low.
const near = (a, b) => Math.abs(a - b) <= 1e-9 * Math.abs(b);
assert(near(one.bandwidth_limit_tokens_per_s * one.bytes_per_token / 1e9, Math.max(before, after)));
assert(near(two.gflops / two.fraction_of_fma_peak, Math.max(...two.fma_peak_gflops_before_after)));
JS

# Quantized weights take the int8 path: prefill and batches are measured against the int8 peak too
# (AVX-512 VNNI, or AVX2 where the CPU has no VNNI).
"$kvlm" convert "$root/models/default" "$tmp/q4" --q-bits 4 --q-group-size 64 >/dev/null 2>&1 ||
  fail "convert to q4 failed"
"$kvlm" bench "$tmp/q4" --prompt 8 --context 8 --decode 2 --concurrency 1,2 --json "$tmp/q4.json" \
  >"$tmp/out" 2>"$tmp/err" || fail "bench on q4 failed: $(cat "$tmp/err")"
grep -q '^decode concurrency  2 (context 8): .* of FMA peak; .*; .* of int8 peak; .* GOP/s before, .* after)$' \
  "$tmp/out" || fail "no int8 peak for the int8 batch in: $(cat "$tmp/out")"
node - "$tmp/q4.json" <<'JS' || fail "report: $(cat "$tmp/q4.json")"
const assert = require("assert");
const r = JSON.parse(require("fs").readFileSync(process.argv[2], "utf8"));
const [one, two] = r.decode;
const near = (a, b) => Math.abs(a - b) <= 1e-9 * Math.abs(b);
for (const phase of [r.prefill, two]) {
  assert(phase.fraction_of_int8_peak > 0 && phase.int8_peak_gops_before_after.every((g) => g > 0));
  assert(near(phase.gflops / phase.fraction_of_int8_peak, Math.max(...phase.int8_peak_gops_before_after)));
}
assert(!("int8_peak_gops_before_after" in one));  // one sequence is bound by the read bandwidth
JS

# bench/targets_table.js turns reports into the targets table of docs/performance.md: a column per
# report, "-" where a report lacks the phase (c=8 and c=16 here), a clear error for a bad argument.
node "$root/bench/targets_table.js" "exact=$tmp/report.json" "int8=$tmp/q4.json" >"$tmp/table" 2>"$tmp/err" ||
  fail "targets_table failed: $(cat "$tmp/err")"
grep -q '^| Target | exact | int8 |$' "$tmp/table" || fail "no header in: $(cat "$tmp/table")"
grep -Eq '^\| decode c=1, ≥80% of bandwidth limit \| [0-9.]+ tok/s, [0-9]+% .*\| [0-9.]+ tok/s, [0-9]+% .*\|$' \
  "$tmp/table" || fail "no c=1 row in: $(cat "$tmp/table")"
grep -Eq '^\| prefill, ≥60% of FMA peak \(int8 path: int8 peak\) \| [0-9.]+ tok/s, [0-9]+% \| [0-9.]+ tok/s, [0-9]+% int8 \|$' \
  "$tmp/table" || fail "no prefill row in: $(cat "$tmp/table")"
grep -q '^| decode c=8, ≥4x c=1 | - | - |$' "$tmp/table" || fail "no empty c=8 row in: $(cat "$tmp/table")"
if node "$root/bench/targets_table.js" "$tmp/report.json" >"$tmp/out" 2>&1; then fail "a bare path was accepted"; fi
grep -qx "targets_table: expected LABEL=REPORT.json, got '$tmp/report.json'" "$tmp/out" ||
  fail "unclear error: $(cat "$tmp/out")"

# Rounds interleave the phases; each figure comes from its median round, with every round's rate.
"$kvlm" bench --prompt 8 --context 8 --decode 2 --concurrency 1,2 --repeat 3 --no-probes \
  --json "$tmp/rounds.json" >"$tmp/out" 2>"$tmp/err" || fail "bench --repeat failed: $(cat "$tmp/err")"
[[ $(grep -c '^round [123] of 3$' "$tmp/out") -eq 3 ]] || fail "not three rounds in: $(cat "$tmp/out")"
[[ $(grep -c '^decode concurrency  2 ' "$tmp/out") -eq 4 ]] || fail "not 3 rounds and a median of c=2: $(cat "$tmp/out")"
grep -q '^median of 3 rounds:$' "$tmp/out" || fail "no medians in: $(cat "$tmp/out")"
grep -qE '^prefill 8 tokens: .* \[rounds: [0-9.]+, [0-9.]+, [0-9.]+ tok/s\]$' "$tmp/out" ||
  fail "no rounds listed for prefill in: $(cat "$tmp/out")"
node - "$tmp/rounds.json" <<'JS' || fail "report: $(cat "$tmp/rounds.json")"
const assert = require("assert");
const r = JSON.parse(require("fs").readFileSync(process.argv[2], "utf8"));
assert(r.rounds === 3);
for (const phase of [r.prefill, ...r.decode]) {
  const rates = phase.tokens_per_s_rounds;
  assert(rates.length === 3 && rates.every((t) => t > 0));
  assert(phase.tokens_per_s === [...rates].sort((a, b) => a - b)[1]);  // the median round's figures
}
JS

# The peak probes time what the kernels run: with KVLM_CPU_ISA=avx2 the AVX2 units, also on an
# AVX-512 CPU.
if grep -qw avx2 /proc/cpuinfo; then
  KVLM_CPU_ISA=avx2 "$kvlm" bench "$tmp/q4" --prompt 8 --context 8 --decode 2 --concurrency 1 \
    --json "$tmp/avx2.json" >"$tmp/out" 2>"$tmp/err" || fail "bench with KVLM_CPU_ISA=avx2 failed: $(cat "$tmp/err")"
  node -e 'const p = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8")).probes;
           require("assert")(p.fma_isa === "avx2" && p.int8_isa === "avx2" && p.int8_peak_gops > 0);' \
    "$tmp/avx2.json" || fail "probes under KVLM_CPU_ISA=avx2: $(cat "$tmp/avx2.json")"
fi
# Without probes there are no limits to report against.
"$kvlm" bench --prompt 8 --context 8 --decode 2 --concurrency 1 --no-probes >"$tmp/out" 2>&1 ||
  fail "bench --no-probes failed: $(cat "$tmp/out")"
grep -qE 'bandwidth limit|FMA peak' "$tmp/out" && fail "--no-probes still reported a limit"

# --profile: each op kind's time per step as a share of the step, and the rest of the step; the
# shares cover the step (up to the rounding of the printed shares).
"$kvlm" bench --prompt 8 --context 8 --decode 4 --concurrency 1 --no-probes --profile \
  --json "$tmp/profile.json" >"$tmp/out" 2>&1 || fail "bench --profile failed: $(cat "$tmp/out")"
grep -Eq '^    linear +[0-9.]+ calls +[0-9.]+ ms/step +[0-9.]+%$' "$tmp/out" || fail "no linear row in: $(cat "$tmp/out")"
grep -Eq '^    outside ops +-?[0-9.]+ ms/step +-?[0-9.]+%$' "$tmp/out" || fail "no outside-ops row in: $(cat "$tmp/out")"
awk '/^decode concurrency  1/ { on = 1; next } on && /%$/ { sum += $NF } END { exit !(sum > 99 && sum < 101) }' \
  "$tmp/out" || fail "the decode shares do not sum to 100%: $(cat "$tmp/out")"
node - "$tmp/profile.json" <<'JS' || fail "report: $(cat "$tmp/profile.json")"
const assert = require("assert");
const r = JSON.parse(require("fs").readFileSync(process.argv[2], "utf8"));
const rows = r.decode[0].profile;
assert(rows.some((p) => p.op === "linear" && p.calls_per_step > 0 && p.ms_per_step > 0));
assert(rows[rows.length - 1].op === "outside ops" && !("calls_per_step" in rows[rows.length - 1]));
const step_ms = 1e3 / r.decode[0].tokens_per_s;  // one sequence: one token per step
const sum = rows.reduce((s, p) => s + p.ms_per_step, 0);
assert(Math.abs(sum - step_ms) <= 1e-6 * step_ms, `${sum} ms of ops and the rest against a ${step_ms} ms step`);
JS

# A rejected synthetic run leaves no temporary folder behind.
mkdir "$tmp/scratch"
TMPDIR="$tmp/scratch" expect_error "--weights must be bf16, q4 or q8, got 'q5'" bench --synthetic 0.5b --weights q5
TMPDIR="$tmp/scratch" expect_error "unknown synthetic shape '7b' (known: 0.5b, 1b)" bench --synthetic 7b
[[ -z "$(ls -A "$tmp/scratch")" ]] || fail "a rejected synthetic run left $(ls "$tmp/scratch") behind"
TMPDIR="$tmp/missing" expect_error "cannot create a temporary folder $tmp/missing/kvlm-bench-XXXXXX" \
  bench --synthetic 0.5b --weights q4
expect_error "--repeat must be at least 1, got 0" bench --synthetic 0.5b --repeat 0
expect_error "--concurrency must be at least 1, got 0" bench --concurrency 1,0
expect_error "--decode must be at least 1, got 0" bench --decode 0
echo "bench: ok"
