#include "kvlm/engine/bench.h"

#include <algorithm>
#include <chrono>
#include <cstdarg>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <random>

#include "kvlm/backend/profile.h"
#include "kvlm/base/error.h"
#include "kvlm/base/file.h"
#include "kvlm/base/half.h"
#include "kvlm/base/probes.h"
#include "kvlm/base/thread_pool.h"
#include "kvlm/io/checkpoint.h"
#include "kvlm/io/convert.h"
#include "kvlm/io/safetensors_writer.h"
#include "kvlm/model/model.h"

namespace kvlm {
namespace {

constexpr SyntheticShape kShapes[] = {
    {"0.5b", 896, 24, 14, 2, 4864, 32000},
    {"1b", 2048, 16, 32, 8, 8192, 32000},
};

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Uniform bf16 values in [-0.05, 0.05] from a fast xorshift: the contents do not matter for speed,
// only that they are finite and not all equal (quantization keeps real ranges).
Tensor random_bf16(const Shape& shape, uint64_t seed) {
  Tensor t = Tensor::empty(shape, DType::kBF16);
  uint16_t* p = t.data<uint16_t>();
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (int64_t i = 0; i < t.numel(); ++i) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    p[i] = f32_to_bf16((float(s >> 40) / float(1 << 24) - 0.5f) * 0.1f);
  }
  return t;
}

Tensor ones_bf16(int64_t n) {
  Tensor t = Tensor::empty({n}, DType::kBF16);
  for (int64_t i = 0; i < n; ++i) t.data<uint16_t>()[i] = f32_to_bf16(1.0f);
  return t;
}

Json synthetic_config(const SyntheticShape& s) {
  return Json{{"architectures", {"LlamaForCausalLM"}}, {"model_type", "llama"},
              {"hidden_size", s.hidden}, {"num_hidden_layers", s.layers},
              {"num_attention_heads", s.heads}, {"num_key_value_heads", s.kv_heads},
              {"intermediate_size", s.intermediate}, {"vocab_size", s.vocab},
              {"max_position_embeddings", 4096}, {"rms_norm_eps", 1e-5}, {"rope_theta", 10000.0},
              {"tie_word_embeddings", true}, {"torch_dtype", "bfloat16"}, {"eos_token_id", 0}};
}

// Multiply-adds of the linear layers for one token (the lm_head included).
// Multiply-adds of the layers' linear layers for one token.
double layer_macs_per_token(const ModelConfig& c) {
  const double q = double(c.num_heads) * c.head_dim, kv = double(c.num_kv_heads) * c.head_dim;
  const double layer = c.hidden_size * (q + 2 * kv) + q * c.hidden_size +
                       3.0 * c.hidden_size * c.intermediate_size;
  return c.num_layers * layer;
}

// Multiply-adds of the vocabulary projection for one row of logits.
double head_macs(const ModelConfig& c) { return double(c.vocab_size) * c.hidden_size; }

// Multiply-adds of attention (q·k and p·v) for a token attending to `keys` positions.
double attention_macs(const ModelConfig& c, double keys) {
  return 2.0 * c.num_layers * c.num_heads * c.head_dim * keys;
}

std::vector<int32_t> random_tokens(int n, int vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> t(size_t(n), 0);
  for (auto& x : t) x = int32_t(rng() % uint32_t(vocab));
  return t;
}

// Prefills `tokens` into `seq` in chunks.
void prefill_chunks(Model& model, KVSequence& seq, const std::vector<int32_t>& tokens, int chunk) {
  for (size_t b = 0; b < tokens.size(); b += size_t(chunk)) {
    const size_t e = std::min(tokens.size(), b + size_t(chunk));
    Batch batch;
    batch.tokens.assign(tokens.begin() + int64_t(b), tokens.begin() + int64_t(e));
    batch.seqs = {{&seq, seq.length(), int32_t(e - b)}};
    model.forward(batch);
  }
}

// Starts a profiled phase (no-op unless profiling).
void begin_profile(const BenchOptions& o) {
  if (o.profile) ops::reset_profile();
}

// Prints and returns time per op kind per step for the phase since begin_profile, each as a share
// of the phase's `seconds`, and the rest of the step: the model's own bookkeeping between ops
// (tensors, views, the batch), which no op kind covers.
Json end_profile(const BenchOptions& o, int steps, double seconds) {
  if (!o.profile) return nullptr;
  const auto ops_time = ops::profile_snapshot();
  const auto print = [&](const char* name, const char* calls, double s) {
    std::printf("    %-12s %13s %9.3f ms/step %5.1f%%\n", name, calls, 1e3 * s / steps, 100 * s / seconds);
  };
  double in_ops = 0;
  Json rows = Json::array();
  for (const auto& t : ops_time) {
    char calls[32];
    std::snprintf(calls, sizeof calls, "%7.1f calls", double(t.calls) / steps);
    print(ops::op_kind_name(t.kind), calls, t.seconds);
    in_ops += t.seconds;
    rows.push_back({{"op", ops::op_kind_name(t.kind)}, {"calls_per_step", double(t.calls) / steps},
                    {"ms_per_step", 1e3 * t.seconds / steps}});
  }
  print("outside ops", "", seconds - in_ops);
  rows.push_back({{"op", "outside ops"}, {"ms_per_step", 1e3 * (seconds - in_ops) / steps}});
  return rows;
}

// The limits that bound a phase, probed right before and right after it: this VM's bandwidth and
// arithmetic rate swing by up to 2x within a minute (one run's opening FMA probe read 230 GFLOP/s
// against 420-466 in the others), so each phase is stated against its own moment. A limit not
// asked for stays 0. The handoff between threads and the threads' relative speeds are probed with
// the read bandwidth and reported beside it: not limits, but what explains how far below it a
// decode step of ~100 short parallel ops runs.
struct Limits {
  double read = 0, fma = 0, int8 = 0, handoff = 0;
  std::vector<double> speeds;
};

Limits probe_limits(ThreadPool& pool, bool read, bool fma, bool int8) {
  return {read ? probe_read_bandwidth(pool) : 0, fma ? probe_fma_peak(pool) : 0,
          int8 ? probe_int8_peak(pool) : 0, read ? probe_handoff(pool) : 0,
          read ? probe_thread_speeds(pool) : std::vector<double>{}};
}

// A phase's limit is the higher of its two probes: a probe that the host interrupts reads low (one
// FMA probe read 109 GFLOP/s beside 390 after the same prefill, and their mean put that prefill at
// 272% of the peak), and the higher one never overstates a phase's fraction of its limit.
Limits best(const Limits& a, const Limits& b) {
  return {std::max(a.read, b.read), std::max(a.fma, b.fma), std::max(a.int8, b.int8), 0, {}};
}

}  // namespace

const SyntheticShape& synthetic_shape(const std::string& name) {
  for (const auto& s : kShapes)
    if (name == s.name) return s;
  throw Error("unknown synthetic shape '" + name + "' (known: 0.5b, 1b)");
}

std::string write_synthetic_model(const SyntheticShape& s, const std::string& dir, int bits) {
  std::filesystem::create_directories(dir);
  const int hd = s.hidden / s.heads;
  SafetensorsWriter w("pt");
  uint64_t seed = 1;
  w.add("model.embed_tokens.weight", random_bf16({s.vocab, s.hidden}, seed++));
  w.add("model.norm.weight", ones_bf16(s.hidden));
  for (int l = 0; l < s.layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    w.add(p + "input_layernorm.weight", ones_bf16(s.hidden));
    w.add(p + "post_attention_layernorm.weight", ones_bf16(s.hidden));
    w.add(p + "self_attn.q_proj.weight", random_bf16({s.heads * hd, s.hidden}, seed++));
    w.add(p + "self_attn.k_proj.weight", random_bf16({s.kv_heads * hd, s.hidden}, seed++));
    w.add(p + "self_attn.v_proj.weight", random_bf16({s.kv_heads * hd, s.hidden}, seed++));
    w.add(p + "self_attn.o_proj.weight", random_bf16({s.hidden, s.heads * hd}, seed++));
    w.add(p + "mlp.gate_proj.weight", random_bf16({s.intermediate, s.hidden}, seed++));
    w.add(p + "mlp.up_proj.weight", random_bf16({s.intermediate, s.hidden}, seed++));
    w.add(p + "mlp.down_proj.weight", random_bf16({s.hidden, s.intermediate}, seed++));
  }
  w.write(dir + "/model.safetensors");
  write_file(dir + "/config.json", synthetic_config(s).dump(2));
  if (bits == 0) return dir;
  ConvertOptions opt;
  opt.src_dir = dir;
  opt.dst_dir = dir + "/q" + std::to_string(bits);
  opt.spec = AffineSpec{bits, 64};
  convert_checkpoint(opt);
  return opt.dst_dir;
}

namespace {

// Appends printf-style text to `out`.
[[gnu::format(printf, 2, 3)]] void append(std::string& out, const char* fmt, ...) {
  char buf[512];
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, args);
  va_end(args);
  out += buf;
}

// One timed phase: its figures, its line of the printed table, and the rate rounds are ranked by.
struct Sample {
  Json row;
  std::string line;
  double tokens_per_s = 0;
};

// The phases of one loaded model; each call measures one round afresh (new sequences, new probes).
struct Phases {
  const BenchOptions& o;
  ThreadPool& pool;
  Model& model;
  double weight_bytes;
  bool int8;  // quantized weights on the int8 path: the int8 peak bounds prefill and batches too

  Sample prefill() const;
  Sample decode(int C) const;
};

// Prints a phase's line, then (with --profile) its time per op kind over its `steps`, which took
// `seconds`.
void report(const BenchOptions& o, Sample& s, int steps, double seconds) {
  std::printf("%s\n", s.line.c_str());
  if (o.profile) s.row["profile"] = end_profile(o, steps, seconds);
  std::fflush(stdout);
}

// "1.00/0.71": each thread's speed as a fraction of the fastest's.
std::string speeds_text(const std::vector<double>& speeds) {
  std::string text;
  for (double s : speeds) append(text, "%s%.2f", text.empty() ? "" : "/", s);
  return text;
}

// Appends the arithmetic rate's fraction of each peak probed around the phase (none without probes;
// the int8 peak only where it was probed, on the int8 path) to the phase's line and row.
void append_peaks(Sample& out, double flops_per_s, const Limits& before, const Limits& after) {
  const Limits limit = best(before, after);
  const double fma = limit.fma, int8 = limit.int8;
  if (fma <= 0) return;
  out.row["fma_peak_gflops_before_after"] = {before.fma / 1e9, after.fma / 1e9};
  out.row["fraction_of_fma_peak"] = flops_per_s / fma;
  append(out.line, " (%.0f%% of FMA peak; %.0f GFLOP/s before, %.0f after", 100 * flops_per_s / fma,
         before.fma / 1e9, after.fma / 1e9);
  if (int8 > 0) {
    out.row["int8_peak_gops_before_after"] = {before.int8 / 1e9, after.int8 / 1e9};
    out.row["fraction_of_int8_peak"] = flops_per_s / int8;
    append(out.line, "; %.0f%% of int8 peak; %.0f GOP/s before, %.0f after", 100 * flops_per_s / int8,
           before.int8 / 1e9, after.int8 / 1e9);
  }
  out.line += ")";
}

Sample Phases::prefill() const {
  const ModelConfig& c = model.config();
  KVSequence seq(model.kv_pool());
  const auto tokens = random_tokens(o.prompt_tokens, c.vocab_size, 1);
  const Limits before = probe_limits(pool, false, o.probes, o.probes && int8);
  begin_profile(o);
  const auto t0 = Clock::now();
  prefill_chunks(model, seq, tokens, o.prefill_chunk);
  const double s = seconds_since(t0);
  const Limits after = probe_limits(pool, false, o.probes, o.probes && int8);
  const double P = o.prompt_tokens;
  // Prefill computes logits for one row per chunk, not per token.
  const double chunks = std::ceil(P / o.prefill_chunk);
  const double flops =
      2 * (layer_macs_per_token(c) * P + head_macs(c) * chunks + attention_macs(c, P * (P + 1) / 2));
  Sample out;
  out.tokens_per_s = P / s;
  out.row = {{"tokens", o.prompt_tokens}, {"tokens_per_s", P / s}, {"gflops", flops / s / 1e9}};
  append(out.line, "prefill %d tokens: %.1f tok/s, %.1f GFLOP/s", o.prompt_tokens, P / s, flops / s / 1e9);
  append_peaks(out, flops / s, before, after);
  report(o, out, 1, s);
  return out;
}

Sample Phases::decode(int C) const {
  const ModelConfig& c = model.config();
  std::vector<std::unique_ptr<KVSequence>> seqs;
  for (int i = 0; i < C; ++i) {
    seqs.push_back(std::make_unique<KVSequence>(model.kv_pool()));
    prefill_chunks(model, *seqs.back(), random_tokens(o.decode_context, c.vocab_size, 100 + i),
                   o.prefill_chunk);
  }
  auto next = random_tokens(C, c.vocab_size, 7);
  // One sequence is bound by the read bandwidth, a batch by the FMA peak (and on the int8 path by
  // the int8 peak).
  const bool bracket = C == 1 && o.probes, batched = C > 1 && o.probes;
  const Limits before = probe_limits(pool, bracket, batched, batched && int8);
  begin_profile(o);
  const auto t0 = Clock::now();
  for (int step = 0; step < o.decode_tokens; ++step) {
    Batch batch;
    batch.tokens = next;
    for (auto& s : seqs) batch.seqs.push_back({s.get(), s->length(), 1});
    model.forward(batch);
  }
  const double s = seconds_since(t0);
  const Limits after = probe_limits(pool, bracket, batched, batched && int8);
  const double tps = double(C) * o.decode_tokens / s;
  const double ctx = o.decode_context + o.decode_tokens / 2.0;
  const double kv_bytes = ctx * double(model.kv_pool().bytes_per_token());
  const double flops = 2 * (layer_macs_per_token(c) + head_macs(c) + attention_macs(c, ctx)) * tps;
  Sample out;
  out.tokens_per_s = tps;
  out.row = {{"concurrency", C}, {"tokens_per_s", tps}, {"gflops", flops / 1e9}};
  append(out.line, "decode concurrency %2d (context %d): %.1f tok/s aggregate, %.1f GFLOP/s", C,
         o.decode_context, tps, flops / 1e9);
  if (bracket) {
    const double limit = best(before, after).read / (weight_bytes + kv_bytes);
    out.row["bytes_per_token"] = weight_bytes + kv_bytes;
    out.row["read_bandwidth_gbs_before_after"] = {before.read / 1e9, after.read / 1e9};
    out.row["bandwidth_limit_tokens_per_s"] = limit;
    out.row["fraction_of_bandwidth_limit"] = tps / limit;
    out.row["handoff_us_before_after"] = {before.handoff * 1e6, after.handoff * 1e6};
    out.row["thread_speeds_before_after"] = {before.speeds, after.speeds};
    append(out.line, ", %.0f%% of the bandwidth limit (%.1f tok/s; read %.1f GB/s before, %.1f after)",
           100 * tps / limit, limit, before.read / 1e9, after.read / 1e9);
    if (pool.size() > 1)
      append(out.line, " [handoff %.2f us before, %.2f after; thread speeds %s before, %s after]",
             before.handoff * 1e6, after.handoff * 1e6, speeds_text(before.speeds).c_str(),
             speeds_text(after.speeds).c_str());
  } else {
    append_peaks(out, flops, before, after);
  }
  report(o, out, o.decode_tokens, s);
  return out;
}

// The round with the median rate (the lower middle one of an even count), all its figures from
// that one round (its rate beside the limits probed around it), plus every round's rate; printed
// with those rates when there was more than one round.
Json median_round(const std::vector<Sample>& rounds) {
  std::vector<size_t> order(rounds.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return rounds[a].tokens_per_s < rounds[b].tokens_per_s; });
  const Sample& median = rounds[order[(order.size() - 1) / 2]];
  Json row = median.row;
  if (rounds.size() == 1) return row;
  Json rates = Json::array();
  std::string listed;
  for (const Sample& r : rounds) {
    rates.push_back(r.tokens_per_s);
    append(listed, "%s%.1f", listed.empty() ? "" : ", ", r.tokens_per_s);
  }
  row["tokens_per_s_rounds"] = rates;
  std::printf("%s [rounds: %s tok/s]\n", median.line.c_str(), listed.c_str());
  return row;
}

}  // namespace

void check_bench_options(const BenchOptions& o) {
  const auto at_least = [](const char* flag, int value, int least) {
    check(value >= least, std::string(flag) + " must be at least " + std::to_string(least) + ", got " +
                              std::to_string(value));
  };
  at_least("--prompt", o.prompt_tokens, 1);
  at_least("--context", o.decode_context, 0);
  at_least("--decode", o.decode_tokens, 1);
  at_least("--prefill-chunk", o.prefill_chunk, 1);
  at_least("--repeat", o.repeat, 1);
  check(!o.concurrency.empty(), "--concurrency needs at least one level");
  for (int c : o.concurrency) at_least("--concurrency", c, 1);
}

Json run_bench(const BenchOptions& o) {
  check_bench_options(o);
  Json out;
  ops::set_profiling(o.profile);
  ThreadPool& pool = ThreadPool::global();
  out["threads"] = pool.size();
  if (o.probes) {  // the machine at the start of the run; each phase probes its own limit again
    const double bandwidth = probe_read_bandwidth(pool);
    const double fma = probe_fma_peak(pool), int8 = probe_int8_peak(pool), handoff = probe_handoff(pool);
    const std::vector<double> speeds = probe_thread_speeds(pool);
    out["probes"] = {{"read_bandwidth_gbs", bandwidth / 1e9}, {"fma_peak_gflops", fma / 1e9},
                     {"fma_isa", probe_fma_isa()}, {"int8_peak_gops", int8 / 1e9}, {"int8_isa", probe_int8_isa()},
                     {"handoff_us", handoff * 1e6}, {"thread_speeds", speeds}};
    std::printf("probes (%d threads): read %.2f GB/s, fp32 FMA peak %.1f GFLOP/s (%s), int8 peak "
                "%.1f GOP/s (%s), handoff between threads %.2f us, thread speeds %s\n", pool.size(),
                bandwidth / 1e9, fma / 1e9, probe_fma_isa(), int8 / 1e9, probe_int8_isa(), handoff * 1e6,
                speeds_text(speeds).c_str());
  }

  const auto t_load = Clock::now();
  const int max_c = *std::max_element(o.concurrency.begin(), o.concurrency.end());
  ModelLoadOptions lo;
  lo.kv_quant = o.kv_quant;
  lo.matmul = o.matmul;
  lo.panel_weights = o.panel_weights;
  const Checkpoint ckpt = Checkpoint::open(o.model_dir);
  {
    const ModelConfig c = parse_model_config(ckpt.config(), ckpt.generation_config(),
                                             o.model_dir + "/config.json");
    const int64_t per_token = int64_t(c.num_layers) * 2 * c.num_kv_heads * c.head_dim * 4;
    const int64_t tokens = int64_t(max_c) * (o.decode_context + o.decode_tokens + 32) +
                           o.prompt_tokens + 32;
    lo.kv_budget_bytes = std::max<int64_t>(tokens, 1) * per_token * 2;
  }
  auto model = Model::load(o.model_dir, lo);
  const double load_s = seconds_since(t_load);
  const double weight_bytes = double(ckpt.total_bytes());
  out["model"] = {{"dir", o.model_dir}, {"weight_bytes", weight_bytes}, {"load_seconds", load_s}};
  std::printf("model %s: %.1f MB of weights, loaded in %.3f s\n", o.model_dir.c_str(),
              weight_bytes / 1e6, load_s);

  {  // Throughput is a serving engine's after its first requests, whose writes made the KV pool's
     // pages resident: a first write to a page costs a fault, and the 1B shape's 8 sequences in
     // bf16 had spent 4-9% of each decode step in kv_write.
    const auto t0 = Clock::now();
    model->kv_pool().make_resident();
    std::printf("KV pool of %d blocks made resident in %.3f s\n", model->kv_pool().num_blocks(), seconds_since(t0));
  }
  {  // One short forward first, so that paging in the mmapped weights is not timed as prefill.
    KVSequence seq(model->kv_pool());
    prefill_chunks(*model, seq, random_tokens(8, model->config().vocab_size, 2), o.prefill_chunk);
  }
  // With --matmul int8 the quantized linears run on the integer units: their peak applies too.
  const Phases phases{o, pool, *model, weight_bytes,
                      o.matmul == ops::MatmulPath::kInt8 && ckpt.is_quantized()};
  // Rounds interleave the phases, so that the machine's slow and fast minutes fall on all of them
  // and ratios between phases compare figures measured close together.
  std::vector<Sample> prefills;
  std::vector<std::vector<Sample>> decodes(o.concurrency.size());
  for (int r = 0; r < o.repeat; ++r) {
    if (o.repeat > 1) std::printf("round %d of %d\n", r + 1, o.repeat);
    prefills.push_back(phases.prefill());
    for (size_t i = 0; i < o.concurrency.size(); ++i) decodes[i].push_back(phases.decode(o.concurrency[i]));
  }
  if (o.repeat > 1) std::printf("median of %d rounds:\n", o.repeat);
  out["prefill"] = median_round(prefills);
  Json decode = Json::array();
  for (const std::vector<Sample>& rounds : decodes) decode.push_back(median_round(rounds));
  out["decode"] = decode;
  out["rounds"] = o.repeat;
  ops::set_profiling(false);
  return out;
}

}  // namespace kvlm
