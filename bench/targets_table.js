// The CPU-performance targets of docs/performance.md as a markdown table, from `kvlm bench --json`
// reports (bench/targets.sh writes one per shape and format):
//
//   node bench/targets_table.js "0.5B bf16=0.5b-bf16.json" "0.5B q4=0.5b-q4.json" ...
//
// A column per report: decode at concurrency 1 against its bandwidth limit (with the handoff and
// the threads' speeds probed around it), prefill against the FMA peak (the int8 peak on the int8
// path), concurrency 8 against concurrency 1, concurrency 16 against 8, and the load time. A
// report without one of these phases gets "-" in that row.
"use strict";
const fs = require("fs");

function fail(message) {
  console.error(`targets_table: ${message}`);
  process.exit(1);
}

const columns = process.argv.slice(2).map((arg) => {
  const eq = arg.indexOf("=");
  if (eq <= 0) fail(`expected LABEL=REPORT.json, got '${arg}'`);
  const file = arg.slice(eq + 1);
  try {
    return { label: arg.slice(0, eq), report: JSON.parse(fs.readFileSync(file, "utf8")) };
  } catch (e) {
    return fail(`${file}: ${e.message}`);
  }
});
if (columns.length === 0) fail("no reports given (LABEL=REPORT.json ...)");

const pct = (x) => `${Math.round(100 * x)}%`;
const span = (values, digits) => {
  const [lo, hi] = [Math.min(...values), Math.max(...values)].map((x) => x.toFixed(digits));
  return lo === hi ? lo : `${lo}-${hi}`;
};
const decodeAt = (r, c) => (r.decode || []).find((d) => d.concurrency === c);

function decodeOne(r) {
  const d = decodeAt(r, 1);
  if (!d || d.fraction_of_bandwidth_limit === undefined) return "-";
  let cell = `${d.tokens_per_s.toFixed(1)} tok/s, ${pct(d.fraction_of_bandwidth_limit)}`;
  if (r.threads > 1) {
    const speeds = (d.thread_speeds_before_after || []).map((s) => s.map((x) => x.toFixed(2)).join("/"));
    cell += ` (handoff ${span(d.handoff_us_before_after, 2)} µs; speeds ${[...new Set(speeds)].join(", ")})`;
  }
  return cell;
}

function prefill(r) {
  const p = r.prefill;
  if (!p || p.fraction_of_fma_peak === undefined) return "-";
  const int8 = p.fraction_of_int8_peak !== undefined;
  return `${p.tokens_per_s.toFixed(1)} tok/s, ${int8 ? `${pct(p.fraction_of_int8_peak)} int8` : pct(p.fraction_of_fma_peak)}`;
}

function ratio(r, c, base, text) {
  const d = decodeAt(r, c), b = decodeAt(r, base);
  return d && b ? `${d.tokens_per_s.toFixed(1)}, ${text(d.tokens_per_s / b.tokens_per_s)}` : "-";
}

const rows = [
  ["decode c=1, ≥80% of bandwidth limit", decodeOne],
  ["prefill, ≥60% of FMA peak (int8 path: int8 peak)", prefill],
  ["decode c=8, ≥4x c=1", (r) => ratio(r, 8, 1, (x) => `${x.toFixed(2)}x`)],
  ["decode c=16 ≥ c=8", (r) => ratio(r, 16, 8, (x) => (x >= 1 ? "yes" : "no"))],
  ["start to ready, < 1 s", (r) => (r.model ? `${r.model.load_seconds.toFixed(3)} s` : "-")],
];
const line = (cells) => `| ${cells.join(" | ")} |`;
console.log(line(["Target", ...columns.map((c) => c.label)]));
console.log(line(["---", ...columns.map(() => "---")]));
for (const [name, cell] of rows) console.log(line([name, ...columns.map((c) => cell(c.report))]));
