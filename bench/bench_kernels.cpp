// Kernel benchmarks: the linear kernel on every ISA path and weight format for the three shape
// classes (decode M=1, batched decode M=8, prefill M=128), on the synthetic 0.5B MLP shape
// (4864 x 896), single-threaded, and the int8 path (LinearInt8) on the q4/q8 weights; plus
// RMSNorm, the gated activation, RoPE, softmax, attention over the paged cache (decode and
// prefill, per KV codec), the sampler and one thread-pool round, on the same shape's attention
// (14 query heads, 2 kv heads, head_dim 64) and vocabulary (32000). Counters: bytes of weights
// read per second and FLOP/s.
//
//   bench_kernels --benchmark_filter=Linear
#include <benchmark/benchmark.h>

#include <atomic>
#include <cstring>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "kvlm/backend/cpu/attention_kernels.h"
#include "kvlm/backend/cpu/linear_int8.h"
#include "kvlm/backend/cpu/linear_rows.h"
#include "kvlm/base/half.h"
#include "kvlm/base/probes.h"
#include "kvlm/base/thread_pool.h"
#include "kvlm/engine/sampler.h"
#include "kvlm/quant/affine.h"

namespace kvlm {
namespace {

constexpr int64_t kOut = 4864, kIn = 896;

struct Weights {
  Tensor dense, packed4, scales4, biases4, packed8, scales8, biases8;
  ops::Weight bf16, q4, q8, bf16_panels, q4_rows;
};

Tensor random_f32(const Shape& shape, uint32_t seed) {
  Tensor t = Tensor::empty(shape, DType::kF32);
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 0.05f);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = d(rng);
  return t;
}

const Weights& weights() {
  static const Weights w = [] {
    Weights out;
    const Tensor f = random_f32({kOut, kIn}, 1);
    out.dense = Tensor::empty({kOut, kIn}, DType::kBF16);
    for (int64_t i = 0; i < f.numel(); ++i) out.dense.data<uint16_t>()[i] = f32_to_bf16(f.data<float>()[i]);
    const AffineWeight a4 = affine_quantize(f, {4, 64}, DType::kBF16);
    const AffineWeight a8 = affine_quantize(f, {8, 64}, DType::kBF16);
    out.packed4 = a4.packed, out.scales4 = a4.scales, out.biases4 = a4.biases;
    out.packed8 = a8.packed, out.scales8 = a8.scales, out.biases8 = a8.biases;
    out.bf16 = ops::dense_weight(out.dense);
    out.q4_rows = ops::affine_weight(out.packed4, out.scales4, out.biases4, {4, 64});
    out.q4 = ops::panel_weight(out.q4_rows);
    out.q8 = ops::panel_weight(ops::affine_weight(out.packed8, out.scales8, out.biases8, {8, 64}));
    out.bf16_panels = ops::panel_weight(out.bf16);
    return out;
  }();
  return w;
}

double weight_bytes(const ops::Weight& w) {
  if (w.affine_panels.defined()) return double(w.affine_panels.nbytes());
  double b = double(w.weight.nbytes());
  if (w.quant) b += double(w.scales.nbytes() + w.biases.nbytes());
  return b;
}

ops::Weight int8_path(ops::Weight w) {
  w.matmul = ops::MatmulPath::kInt8;
  return ops::int8_weight(w);
}

// A random [out, in] weight in MLX affine codes (group 64) on the int8 path.
ops::Weight random_int8_weight(int bits, int64_t out, uint32_t seed, int64_t in = kIn) {
  const AffineWeight a = affine_quantize(random_f32({out, in}, seed), {bits, 64}, DType::kBF16);
  return int8_path(ops::affine_weight(a.packed, a.scales, a.biases, {bits, 64}));
}

// Args: ISA, format (0 bf16, 1 q4, 2 q8, 3 bf16 in panel order, 4 q4 rows dequantized a panel at a
// time per call; q4 and q8 in affine panels, as a model loads them), M.
void Linear(benchmark::State& state) {
  const auto isa = cpu::Isa(state.range(0));
  if (!cpu::isa_supported(isa)) return state.SkipWithError("ISA not supported here");
  const Weights& ws = weights();
  const ops::Weight* formats[] = {&ws.bf16, &ws.q4, &ws.q8, &ws.bf16_panels, &ws.q4_rows};
  const ops::Weight& w = *formats[state.range(1)];
  const int64_t M = state.range(2);
  const Tensor x = random_f32({M, kIn}, 2);
  std::vector<float> y(size_t(M * kOut));
  for (auto _ : state) {
    const cpu::LinearKernel kernel(isa, w, x.data<float>(), M);  // x packed once per call, as in ops::linear
    kernel({x.data<float>(), M, &w, 0, kOut, y.data(), kOut});
    benchmark::DoNotOptimize(y.data());
  }
  const char* names[] = {" bf16", " q4", " q8", " bf16 panels", " q4 rows"};
  state.SetLabel(std::string(cpu::isa_name(isa)) + names[state.range(1)]);
  state.counters["weight_GB/s"] = benchmark::Counter(weight_bytes(w) * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * M * kOut * kIn * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(Linear)->ArgsProduct({{0, 1, 2}, {0, 1, 2, 3, 4}, {1, 8, 128}})->Unit(benchmark::kMillisecond);

// The int8 path against the same q4 and q8 weights, its activation quantization included (as in
// ops::linear, once per call). Args: ISA, format (1 q4, 2 q8), M.
void LinearInt8(benchmark::State& state) {
  const auto isa = cpu::Isa(state.range(0));
  if (!cpu::isa_supported(isa)) return state.SkipWithError("ISA not supported here");
  static const ops::Weight q4 = int8_path(weights().q4_rows), q8 = int8_path(weights().q8);
  const ops::Weight& w = state.range(1) == 1 ? q4 : q8;
  const int64_t M = state.range(2);
  const Tensor x = random_f32({M, kIn}, 2);
  std::vector<float> y(size_t(M * kOut));
  for (auto _ : state) {
    const cpu::LinearKernel kernel(isa, w, x.data<float>(), M);
    kernel({x.data<float>(), M, &w, 0, kOut, y.data(), kOut});
    benchmark::DoNotOptimize(y.data());
  }
  state.SetLabel(std::string(cpu::isa_name(isa)) + (state.range(1) == 1 ? " q4 int8" : " q8 int8"));
  state.counters["weight_GB/s"] = benchmark::Counter(weight_bytes(w) * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["GOP/s"] = benchmark::Counter(2.0 * M * kOut * kIn * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(LinearInt8)->ArgsProduct({{0, 1, 2}, {1, 2}, {1, 8, 128}})->Unit(benchmark::kMillisecond);

// The int8 path's quantization of one decode token's activations (one thread), 4-bit layout,
// group 64. Arg: width (896: the 0.5B hidden size, the input of q/k/v, o and gate/up; 4864: its
// MLP width, the input of down).
void QuantizeInt8(benchmark::State& state) {
  const int64_t in = state.range(0);
  const Tensor x = random_f32({1, in}, 13);
  for (auto _ : state) benchmark::DoNotOptimize(cpu::quantize_int8_acts(cpu::cpu_isa(), x.data<float>(), 1, in, 64, 4));
}
BENCHMARK(QuantizeInt8)->Arg(896)->Arg(4864)->Unit(benchmark::kMicrosecond);

// The exact path's packing of a batch's activations into the AVX-512 panels' 8-token groups, once
// per linear call (all pool threads; 8 tokens are one group, packed by the caller). Args: width
// (the bundled model's 384, the 0.5B shape's 896 and 4864), tokens.
void PackX(benchmark::State& state) {
  const int64_t in = state.range(0), T = state.range(1);
  const Tensor x = random_f32({T, in}, 13);
  for (auto _ : state) benchmark::DoNotOptimize(cpu::pack_x(x.data<float>(), T, in, 8));
}
BENCHMARK(PackX)->ArgsProduct({{384, 896, 4864}, {8, 16}})->Unit(benchmark::kMicrosecond);


// One decode token through the 0.5B shape's q/k/v projections (896 x 896, 128 x 896, 128 x 896;
// q4 on the int8 path, 0.6 MB, from the caches), to show what a small decode linear pays besides
// its arithmetic. Arg 0: ops::linear_many on all pool threads (activations quantized, one pool
// round, fresh outputs); arg 1: each weight's kernel on the calling thread over all its rows.
void LinearDecodeCall(benchmark::State& state) {
  static const ops::Weight q = random_int8_weight(4, kIn, 20), k = random_int8_weight(4, 128, 21),
                           v = random_int8_weight(4, 128, 22);
  const ops::Weight* qkv[] = {&q, &k, &v};
  const Tensor x = random_f32({1, kIn}, 23);
  std::vector<float> y(static_cast<size_t>(kIn));
  for (auto _ : state) {
    if (state.range(0) == 0) {
      benchmark::DoNotOptimize(ops::linear_many(x, qkv));
      continue;
    }
    for (const ops::Weight* w : qkv) {
      const cpu::LinearKernel kernel(cpu::cpu_isa(), *w, x.data<float>(), 1);
      kernel({x.data<float>(), 1, w, 0, w->out_features, y.data(), w->out_features});
    }
    benchmark::DoNotOptimize(y.data());
  }
  state.SetLabel(state.range(0) == 0 ? "linear_many, all threads" : "kernels, one thread");
  state.counters["weight_GB/s"] = benchmark::Counter(
      (weight_bytes(q) + weight_bytes(k) + weight_bytes(v)) * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(LinearDecodeCall)->Arg(0)->Arg(1)->UseRealTime()->Unit(benchmark::kMicrosecond);

// Copies of a weight whose `data` tensors take >= 1 GB together (at least two), for benchmarks
// that read weights from memory: each call takes the next copy. Against the 32 MB L3 of this
// machine, 160 MB of copies still found part of each weight in it: bf16 2048 x 8192 at one token
// read 73-76 GB/s from 160 MB and 54-72 from 512 MB, measured back to back, where the model's
// linears, 2 GB of weights, read 55-65. Only the last set of copies asked for is kept, so a run
// of every shape holds ~1 GB, not 1 GB per shape; the weight made for each `key` is kept, so that
// interleaved runs only copy it again.
const std::vector<ops::Weight>& cold_copies(const std::string& key, const std::function<ops::Weight()>& make,
                                            Tensor ops::Weight::*data) {
  constexpr size_t kColdBytes = size_t(1) << 30;
  static std::map<std::string, ops::Weight> made;
  static std::string held;
  static std::vector<ops::Weight> ws;
  if (held == key) return ws;
  ws.clear();
  auto it = made.find(key);
  if (it == made.end()) it = made.emplace(key, make()).first;
  const ops::Weight& w = it->second;
  const Tensor& src = w.*data;
  for (size_t bytes = 0; bytes < kColdBytes || ws.size() < 2; bytes += src.nbytes()) {
    ops::Weight c = w;
    c.*data = Tensor::empty_streamed(src.shape(), src.dtype());
    std::memcpy((c.*data).raw(), src.raw(), src.nbytes());
    ws.push_back(c);
  }
  held = key;
  return ws;
}

// A bf16 [out, in] weight with a fixed pattern of values, in rows or in panel order.
ops::Weight bf16_pattern_weight(int64_t out, int64_t in, bool panels) {
  Tensor t = Tensor::empty({out, in}, DType::kBF16);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<uint16_t>()[i] = f32_to_bf16(float(i % 97) * 1e-3f);
  const ops::Weight w = ops::dense_weight(t);
  return panels ? ops::panel_weight(w) : w;
}

// ops::linear (all pool threads) from memory on the lm_head of the 0.5B shape (32000 x 896) in
// bf16 (57 MB) in rows or panel order, or 4 (q4) or 2 (q8) times as many rows in MLX affine codes
// on the int8 path (64 and 61 MB), each call on the next of cold_copies. Args: M, layout (0 bf16
// rows, 1 bf16 panels, 2 q4 int8, 3 q8 int8).
void LinearFromMemory(benchmark::State& state) {
  const int64_t layout = state.range(1);
  const std::vector<ops::Weight>& ws = cold_copies(
      "head " + std::to_string(layout),
      [&] {
        if (layout < 2) return bf16_pattern_weight(32000, kIn, layout == 1);
        return layout == 2 ? random_int8_weight(4, 4 * 32000, 4) : random_int8_weight(8, 2 * 32000, 8);
      },
      layout < 2 ? &ops::Weight::weight : &ops::Weight::int8_tiles);
  const Tensor x = random_f32({state.range(0), kIn}, 6);
  size_t next = 0;
  for (auto _ : state) benchmark::DoNotOptimize(ops::linear(x, ws[next++ % ws.size()]));
  state.counters["weight_GB/s"] = benchmark::Counter(weight_bytes(ws[0]) * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(LinearFromMemory)->ArgsProduct({{1, 8}, {0, 1, 2, 3}})->UseRealTime()->Unit(benchmark::kMillisecond);

// Decode streams each layer's weights one call at a time, and the 0.5B shape's are short streams
// (q4: 0.45 MB for o, 2.45 MB for gate, up or down; 128000 rows, 64 MB, is a long stream for
// reference). ops::linear at M=1 on a q4 int8 weight of R x 896 (mode 0) against a plain read of
// the same bytes, split in halves over the pool threads as the read probe reads (mode 1); the same
// two on the calling thread alone (modes 2 and 3: the kernel over all rows, the read of all
// bytes), which is how fast one core streams for one thread, as each core does when the vCPUs sit
// on separate cores. Each call on the next of enough copies (1 GB) that its weight comes from
// memory. Args: R, mode. Run with --benchmark_enable_random_interleaving: figures compare only
// when measured close together.
void DecodeStreamBySize(benchmark::State& state) {
  const int64_t R = state.range(0), mode = state.range(1);
  const std::vector<ops::Weight>& ws = cold_copies(
      "q4 " + std::to_string(R), [&] { return random_int8_weight(4, R, 30); }, &ops::Weight::int8_tiles);
  const Tensor x = random_f32({1, kIn}, 31);
  ThreadPool& pool = ThreadPool::global();
  const size_t parts = mode == 1 ? size_t(pool.size()) : 1;
  std::vector<uint64_t> sink(parts);
  std::vector<float> y(static_cast<size_t>(R));
  size_t next = 0;
  for (auto _ : state) {
    const ops::Weight& w = ws[next++ % ws.size()];
    if (mode == 0) {
      benchmark::DoNotOptimize(ops::linear(x, w));
    } else if (mode == 2) {
      const cpu::LinearKernel kernel(cpu::cpu_isa(), w, x.data<float>(), 1);
      kernel({x.data<float>(), 1, &w, 0, R, y.data(), R});
      benchmark::DoNotOptimize(y.data());
    } else {
      const auto* p = static_cast<const uint8_t*>(w.int8_tiles.raw());
      const size_t part = w.int8_tiles.nbytes() / parts / 128 * 128;
      pool.parallel_for(parts, 1, [&](size_t b, size_t) { sink[b] = stream_read(p + b * part, part); });
      benchmark::DoNotOptimize(sink.data());
    }
  }
  const char* labels[] = {"linear q4 int8", "read", "linear q4 int8, one thread", "read, one thread"};
  state.SetLabel(labels[mode]);
  state.counters["GB/s"] = benchmark::Counter(double(ws[0].int8_tiles.nbytes()) * 1e-9,
                                              benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(DecodeStreamBySize)
    ->ArgsProduct({{896, 4864, 9728, 32000, 128000}, {0, 1, 2, 3}})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

// A batch of 8 tokens through bf16 panels of the model shapes, from memory: the 0.5B MLP's down
// projection (896 x 4864) and up projection (4864 x 896), the 1B shape's q/o (2048 x 2048), up
// (8192 x 2048) and down (2048 x 8192). ops::linear on all pool threads, each call on the next of
// enough copies (1 GB) that its weight comes from memory. Args: out, in.
void BatchFromMemory(benchmark::State& state) {
  const int64_t out = state.range(0), in = state.range(1), T = 8;
  const std::vector<ops::Weight>& ws = cold_copies(
      "bf16 " + std::to_string(out) + "x" + std::to_string(in), [&] { return bf16_pattern_weight(out, in, true); },
      &ops::Weight::weight);
  const Tensor x = random_f32({T, in}, 32);
  size_t next = 0;
  for (auto _ : state) benchmark::DoNotOptimize(ops::linear(x, ws[next++ % ws.size()]));
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * double(T * out * in) * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BatchFromMemory)
    ->Args({896, 4864})
    ->Args({4864, 896})
    ->Args({2048, 2048})
    ->Args({8192, 2048})
    ->Args({2048, 8192})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

// A batch of 8 tokens through q4 weights of the 0.5B shape's decode linears on the int8 path,
// from memory: q/k/v together (1152 x 896), o (896 x 896), gate and up together (9728 x 896) and
// down (896 x 4864). ops::linear on all pool threads, activation quantization included, each call
// on the next of enough copies (1 GB) that its weight comes from memory. Against LinearInt8
// (one thread, warm) it shows what short streams and the pool round cost batched decode.
// Args: out, in.
void Int8BatchFromMemory(benchmark::State& state) {
  const int64_t out = state.range(0), in = state.range(1), T = 8;
  const std::vector<ops::Weight>& ws = cold_copies(
      "q4 " + std::to_string(out) + "x" + std::to_string(in), [&] { return random_int8_weight(4, out, 33, in); },
      &ops::Weight::int8_tiles);
  const Tensor x = random_f32({T, in}, 34);
  size_t next = 0;
  for (auto _ : state) benchmark::DoNotOptimize(ops::linear(x, ws[next++ % ws.size()]));
  state.counters["GOP/s"] = benchmark::Counter(2.0 * double(T * out * in) * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(Int8BatchFromMemory)
    ->Args({1152, 896})
    ->Args({896, 896})
    ->Args({9728, 896})
    ->Args({896, 4864})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

// ops::linear (all pool threads) for a 512-token prefill chunk through the MLP's up projection
// (4864 x 896, arg 0) and down projection (896 x 4864, arg 1), bf16.
void LinearPrefill(benchmark::State& state) {
  const Weights& ws = weights();
  static const Tensor down = [] {
    Tensor t = Tensor::empty({kIn, kOut}, DType::kBF16);
    for (int64_t i = 0; i < t.numel(); ++i) t.data<uint16_t>()[i] = f32_to_bf16(float(i % 89) * 1e-3f);
    return t;
  }();
  const ops::Weight w = state.range(0) == 0 ? ws.bf16 : ops::dense_weight(down);
  const Tensor x = random_f32({512, w.in_features}, 7);
  for (auto _ : state) benchmark::DoNotOptimize(ops::linear(x, w));
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * 512 * kOut * kIn * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(LinearPrefill)->Arg(0)->Arg(1)->UseRealTime()->Unit(benchmark::kMillisecond);

// Rows, then the weight's dtype: 0 f32 (as models load norm weights), 1 bf16 (widened per call).
void RmsNorm(benchmark::State& state) {
  const Tensor x = random_f32({state.range(0), kIn}, 3);
  Tensor wt = Tensor::from_f32(std::vector<float>(size_t(kIn), 1.0f), {kIn});
  if (state.range(1) == 1) {
    wt = Tensor::empty({kIn}, DType::kBF16);
    for (int64_t i = 0; i < kIn; ++i) wt.data<uint16_t>()[i] = f32_to_bf16(1.0f);
  }
  for (auto _ : state) benchmark::DoNotOptimize(ops::rms_norm(x, wt, 1e-5f));
}
BENCHMARK(RmsNorm)->Args({1, 0})->Args({1, 1})->Args({128, 0})->Args({128, 1});

void GatedActivation(benchmark::State& state) {
  const Tensor g = random_f32({state.range(0), kOut}, 4), u = random_f32({state.range(0), kOut}, 5);
  for (auto _ : state) benchmark::DoNotOptimize(ops::gated_activation(g, u, ops::GateActivation::kSiLU));
}
BENCHMARK(GatedActivation)->Arg(1)->Arg(128);

constexpr int64_t kHeads = 14, kKVHeads = 2, kHeadDim = 64, kVocab = 32000;

// Queries of T tokens rotated by their table, which a forward pass builds once for all layers.
// Arg: T.
void Rope(benchmark::State& state) {
  const int64_t T = state.range(0);
  Tensor q = random_f32({T, kHeads, kHeadDim}, 8);
  std::vector<int32_t> positions(static_cast<size_t>(T));
  for (int64_t t = 0; t < T; ++t) positions[size_t(t)] = int32_t(1000 + t);
  ops::RopeParams p;
  p.theta = 1e6;
  p.rotary_dim = int(kHeadDim);
  const Tensor table = ops::rope_table(positions, p);
  for (auto _ : state) ops::rope_inplace(q, table);
}
BENCHMARK(Rope)->Arg(1)->Arg(128);

void Softmax(benchmark::State& state) {
  const Tensor x = random_f32({1, kVocab}, 9);
  for (auto _ : state) benchmark::DoNotOptimize(ops::softmax(x));
}
BENCHMARK(Softmax);

// One sequence's paged cache of `tokens` random keys and values written through `codec`.
struct PagedCache {
  KVCodec codec;
  Tensor keys, values;
  std::vector<int32_t> table;

  PagedCache(const KVCodecSpec& spec, int64_t tokens) : codec(spec, int(kHeadDim)) {
    constexpr int64_t kBlock = 16;
    const int64_t blocks = (tokens + kBlock - 1) / kBlock;
    keys = Tensor::empty({kKVHeads, blocks, kBlock, int64_t(codec.key_row_bytes())}, DType::kU8);
    values = Tensor::empty({kKVHeads, blocks, kBlock, int64_t(codec.value_row_bytes())}, DType::kU8);
    for (int64_t b = 0; b < blocks; ++b) table.push_back(int32_t(b));
    ops::kv_write(random_f32({tokens, kKVHeads, kHeadDim}, 10), random_f32({tokens, kKVHeads, kHeadDim}, 11),
                  view(), 0);
  }
  ops::PagedKV view() const { return {keys, values, &codec, table}; }
};

KVCodecSpec codec_spec(int64_t arg) {
  switch (arg) {
    case 0: return kv_passthrough_spec(DType::kBF16);
    case 1: return kv_affine_spec(8, 64, DType::kBF16);
    case 2: return kv_turbo_spec(8, 3);
    default: return kv_passthrough_spec(DType::kF32);
  }
}

// ops::attention (all pool threads). Args: codec (0 bf16, 1 affine8, 2 turbo k8v3, 3 f32: the
// default exact cache), new query tokens (1 = decode, else a prefill chunk), tokens already cached
// before them (4096, or 128: a short decode, where fixed costs show), key path (0 exact, 1 int8:
// compressed keys scored on their codes).
void Attention(benchmark::State& state) {
  const int64_t n = state.range(1), past = state.range(2);
  const PagedCache cache(codec_spec(state.range(0)), past + n);
  const Tensor q = random_f32({n, kHeads, kHeadDim}, 12);
  const ops::AttentionParams p{0.125f, 0, state.range(3) ? ops::MatmulPath::kInt8 : ops::MatmulPath::kExact};
  for (auto _ : state) benchmark::DoNotOptimize(ops::attention(q, cache.view(), past, p));
  state.counters["keys/s"] = benchmark::Counter(double(n) * double(past + n) * kKVHeads,
                                                benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(Attention)
    ->ArgsProduct({{0}, {1}, {4096}, {0}})
    ->ArgsProduct({{3}, {1}, {128}, {0}})
    ->ArgsProduct({{1, 2}, {1}, {4096}, {0, 1}})
    ->ArgsProduct({{0, 3}, {512}, {0}, {0}})
    ->ArgsProduct({{1, 2}, {512}, {0}, {0, 1}})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// One decode task alone, warm, on the calling thread: cpu::attention_chunk for the 7 query heads
// of one kv head over `keys` positions of one chunk, without the pool round, the task list and the
// merge that ops::attention adds. Against its arithmetic (7 x keys x 64 fmas for the scores and as
// many for the value sums) it shows the task's own overheads. Args: codec (as Attention), keys.
void AttentionTask(benchmark::State& state) {
  const int64_t keys = state.range(1);
  const PagedCache cache(codec_spec(state.range(0)), keys);
  const int group = int(kHeads / kKVHeads);
  const Tensor q = random_f32({1, group, kHeadDim}, 12);
  const cpu::AttentionRowOps row_ops = cpu::attention_row_ops(cache.codec);
  const cpu::KVRows rows = cpu::kv_rows(cache.view(), 0);
  std::vector<float> scratch, out(size_t(group) * size_t(kHeadDim + 2));
  float* o = out.data();
  for (auto _ : state) {
    cpu::attention_chunk(row_ops, cache.codec, rows, q.data<float>(), group, 0.125f, 0, keys,
                         {o + 2 * group, o, o + group}, scratch);
    benchmark::DoNotOptimize(o);
  }
  state.counters["GFLOP/s"] = benchmark::Counter(4.0 * double(group * keys * kHeadDim) * 1e-9,
                                                 benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(AttentionTask)->ArgsProduct({{3, 0}, {129, 256}})->UseRealTime()->Unit(benchmark::kMicrosecond);

// A decode call at 128 keys (two tasks, one per kv head) on a pool of 1 or 2 threads: what the
// second thread buys once the pool round and the worker's first touches are paid. Arg: threads.
void AttentionOnPool(benchmark::State& state) {
  ThreadPool pool(int(state.range(0)));
  ops::set_thread_pool(&pool);
  const PagedCache cache(codec_spec(3), 129);
  const Tensor q = random_f32({1, kHeads, kHeadDim}, 12);
  const ops::AttentionParams p{0.125f, 0, ops::MatmulPath::kExact};
  for (auto _ : state) benchmark::DoNotOptimize(ops::attention(q, cache.view(), 128, p));
  ops::set_thread_pool(nullptr);
}
BENCHMARK(AttentionOnPool)->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMicrosecond);

// Decode attention as the model meets it: the sequences' keys and values cold in memory, since a
// step streams every weight between two calls of the same layer. An f32 pool holds sequences of
// `past` + 1 tokens in disjoint blocks; each call attends over the next ones. Args: past,
// sequences per call (ops::attention_batch), then the pool's MB of keys (as many of values): 64,
// from memory; 8, from the 32 MB L3 (every sequence fits it); 0, every call on the first
// sequences, warm in L1/L2. A 4096-token context (4 MB of keys and values per sequence, warm only
// in L3 with 0) shows where long-context decode goes.
void AttentionFromMemory(benchmark::State& state) {
  const int64_t tokens = state.range(0) + 1, kBlock = 16, per_seq = (tokens + kBlock - 1) / kBlock;
  const size_t batch = size_t(state.range(1));
  const KVCodec codec(kv_passthrough_spec(DType::kF32), int(kHeadDim));
  const int64_t pool_mb = std::max<int64_t>(state.range(2), 8);
  const int64_t row = int64_t(codec.key_row_bytes()), blocks = (pool_mb << 20) / (kBlock * kKVHeads * row);
  // On huge pages, as the model's KV pool.
  const Tensor keys = Tensor::empty_streamed({kKVHeads, blocks, kBlock, row}, DType::kU8);
  const Tensor values = Tensor::empty_streamed({kKVHeads, blocks, kBlock, row}, DType::kU8);
  std::vector<std::vector<int32_t>> tables(size_t(blocks / per_seq));
  const Tensor k = random_f32({tokens, kKVHeads, kHeadDim}, 10), v = random_f32({tokens, kKVHeads, kHeadDim}, 11);
  for (size_t s = 0; s < tables.size(); ++s) {
    for (int64_t b = 0; b < per_seq; ++b) tables[s].push_back(int32_t(int64_t(s) * per_seq + b));
    ops::kv_write(k, v, {keys, values, &codec, tables[s]}, 0);
  }
  const Tensor q = random_f32({1, kHeads, kHeadDim}, 12);
  const ops::AttentionParams p{0.125f, 0, ops::MatmulPath::kExact};
  std::vector<ops::AttentionSequence> seqs;
  size_t next = 0;
  for (auto _ : state) {
    seqs.clear();
    if (state.range(2) == 0) next = 0;
    for (size_t i = 0; i < batch; ++i, ++next)
      seqs.push_back({q, {keys, values, &codec, tables[next % tables.size()]}, tokens - 1});
    benchmark::DoNotOptimize(ops::attention_batch(seqs, p));
  }
}
BENCHMARK(AttentionFromMemory)
    ->ArgsProduct({{128, 1024}, {1, 8}, {0, 8, 64}})
    ->Args({4096, 1, 0})
    ->Args({4096, 1, 64})
    ->Args({4096, 8, 64})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

// One token from a row of logits (a single thread). Args: 0 greedy, 1 temperature 0.8 with top-p
// 0.9 and top-k 40; the vocabulary (32000, or 151936 as Qwen's).
void Sample(benchmark::State& state) {
  SamplerParams params;
  if (state.range(0) == 1) {
    params.temperature = 0.8f;
    params.top_p = 0.9f;
    params.top_k = 40;
  }
  const int64_t vocab = state.range(1);
  const Sampler sampler(params, int32_t(vocab));
  // N(0, 3) logits: flatter than most models', top-p 0.9 keeps ~800 of 32000 tokens (~5900 of
  // 151936), a hard case for its selection.
  Tensor logits = random_f32({vocab}, 13);
  ops::scale_inplace(logits, 60.0f);
  const std::span<const float> row(logits.data<float>(), size_t(vocab));
  uint64_t step = 0;
  for (auto _ : state) benchmark::DoNotOptimize(sampler.sample(row, {}, step++));
}
BENCHMARK(Sample)->ArgsProduct({{0, 1}, {kVocab, 151936}})->Unit(benchmark::kMicrosecond);

// One parallel_for round with no work on the global pool (all threads): the fixed cost every op
// that splits its output pays, a few hundred times per decode step.
void PoolRound(benchmark::State& state) {
  ThreadPool& pool = ThreadPool::global();
  std::atomic<int64_t> chunks{0};
  for (auto _ : state) pool.parallel_for(size_t(pool.size()), 1, [&](size_t, size_t) { ++chunks; });
  state.counters["threads"] = double(pool.size());
}
BENCHMARK(PoolRound)->UseRealTime();

}  // namespace
}  // namespace kvlm

BENCHMARK_MAIN();
