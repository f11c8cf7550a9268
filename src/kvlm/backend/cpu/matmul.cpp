// Embedding gather and linear layers against every weight format (dense f32/f16/bf16, MLX affine).
#include <algorithm>
#include <numeric>
#include <vector>

#include "kvlm/backend/profile.h"
#include "kvlm/backend/cpu/cpu_kernels.h"
#include "kvlm/backend/cpu/linear_int8.h"
#include "kvlm/backend/cpu/panels.h"
#include "kvlm/base/thread_pool.h"

namespace kvlm::ops {

namespace {

// Threads split the output features in multiples of this (never the reduction): whole panels.
constexpr int64_t kRowBlock = cpu::kPanelRows;
// gated_linear's pieces: 32K floats (128 KB) per projection, 64 rows at 512 tokens.
constexpr int64_t kGatePieceFloats = 32 * 1024;

void check_weight(const Weight& w, const char* op) {
  cpu::check_cpu_contiguous(w.weight, op, "weight");
  if (w.quant) {
    cpu::check_cpu_contiguous(w.scales, op, "scales");
    cpu::check_cpu_contiguous(w.biases, op, "biases");
  }
  if (w.has_bias()) cpu::check_cpu_contiguous(w.bias, op, "bias");
}

// Output features lo .. hi-1 of x · Wᵀ (+ bias) for the T token rows of x, at y[t * ldy + r - lo].
void linear_rows(const cpu::LinearKernel& kernel, const float* x, int64_t T, const Weight& w,
                 int64_t lo, int64_t hi, float* y, int64_t ldy) {
  kernel({x, T, &w, lo, hi - lo, y, ldy});
  if (!w.has_bias()) return;
  std::vector<float> bias(size_t(hi - lo));
  cpu::widen(w.bias, lo, hi - lo, bias.data());
  for (int64_t t = 0; t < T; ++t)
    for (int64_t r = 0; r < hi - lo; ++r) y[t * ldy + r] += bias[size_t(r)];
}

// The weights were checked when they were made (dense_weight, affine_weight): a decode step runs
// ~100 linears, and reading every tensor's shape again costs microseconds each, cold in cache
// after a step's weights streamed through it.
void check_input(const Tensor& x, const Weight& w) {
  check(x.dim(1) == w.in_features, [&] {
    return "linear: input " + x.describe() + " does not match a weight with " +
           std::to_string(w.in_features) + " inputs";
  });
}

// One weight of a linear_many call as its pieces read it, written by the caller before the round
// into one small array on its stack. The threads reached the same values through the call's
// vectors and tensors (the weight list, the row offsets, each output's storage and dtype), one
// dependent miss after another on lines the caller had just written: 7.7% of the samples of a
// small decode call (LinearDecodeCall).
struct LinearPart {
  const cpu::LinearKernel* kernel;
  const Weight* w;
  int64_t first, end;  // the weight's rows in the call's [0, total rows)
  float* y;
};

struct LinearCall {
  const float* x;
  int64_t T;
  const LinearPart* parts;
  size_t n;
};

// Output rows [b, e) of the call, each part's share of them.
void run_parts(const LinearCall& c, int64_t b, int64_t e) {
  for (const LinearPart* p = c.parts; p != c.parts + c.n; ++p) {
    const int64_t lo = std::max(b, p->first), hi = std::min(e, p->end);
    if (lo < hi)
      linear_rows(*p->kernel, c.x, c.T, *p->w, lo - p->first, hi - p->first, p->y + (lo - p->first),
                  p->end - p->first);
  }
}

// Calls pack(p) for every panel of w's rows, the panels spread over the pool.
template <class Pack>
void for_each_panel(const Weight& w, Pack pack) {
  const int64_t panels = cpu::panel_stored_rows(w.out_features) / cpu::kPanelRows;
  thread_pool().parallel_for(size_t(panels), 1, [&](size_t b, size_t e) {
    for (int64_t p = int64_t(b); p < int64_t(e); ++p) pack(p);
  });
}

// The affine panels of an MLX affine weight (cpu/panels.h).
Tensor affine_panels(const Weight& w) {
  const int64_t bytes = cpu::affine_panel_bytes(w.in_features, w.quant->group_size, w.quant->bits);
  Tensor out = Tensor::empty_streamed({cpu::panel_stored_rows(w.out_features) / cpu::kPanelRows, bytes}, DType::kU8);
  for_each_panel(w, [&](int64_t p) { cpu::pack_affine_panel(w, p, out.data<uint8_t>() + p * bytes); });
  return out;
}

}  // namespace

Weight panel_weight(const Weight& w) {
  if (w.quant) {
    if (w.int8_tiles.defined() || w.affine_panels.defined()) return w;  // the int8 path reads its tiles
    check_weight(w, "panel_weight");
    Weight out = w;
    out.affine_panels = affine_panels(w);
    return out;
  }
  if (w.panels) return w;
  check_weight(w, "panel_weight");
  const int64_t rows = w.out_features, in = w.in_features;
  Tensor packed = Tensor::empty_streamed({cpu::panel_stored_rows(rows), in}, w.weight.dtype());
  const auto pack = [&]<class T>(const T* src, T* dst) {
    for_each_panel(w, [&](int64_t p) { cpu::pack_panel(src, rows, in, p, dst + p * in * cpu::kPanelRows); });
  };
  if (w.weight.dtype() == DType::kF32) pack(w.weight.data<float>(), packed.data<float>());
  else pack(static_cast<const uint16_t*>(w.weight.raw()), static_cast<uint16_t*>(packed.raw()));
  Weight out = w;
  out.weight = packed;
  out.panels = true;
  return out;
}

Weight int8_weight(const Weight& w) {
  if (w.matmul != MatmulPath::kInt8 || !w.quant || (w.quant->bits != 4 && w.quant->bits != 8) ||
      w.int8_tiles.defined())
    return w;
  check_weight(w, "int8_weight");
  Weight out = w;
  out.int8_tiles = cpu::int8_tiles(w);
  return out;
}

Tensor embedding(const Weight& table, std::span<const int32_t> ids) {
  const ProfileScope profile(OpKind::kEmbedding);
  check_weight(table, "embedding");
  const int64_t n = int64_t(ids.size()), dim = table.in_features;
  for (int32_t id : ids)
    check(id >= 0 && id < table.out_features,
          [&] { return "embedding: token id " + std::to_string(id) + " is outside the vocabulary [0, " +
              std::to_string(table.out_features) + ")"; });
  Tensor out = Tensor::empty({n, dim}, DType::kF32);
  float* o = out.data<float>();
  thread_pool().parallel_for(size_t(n), 1, [&](size_t b, size_t e) {
    std::vector<float> buf(static_cast<size_t>(dim));
    for (size_t i = b; i < e; ++i) {
      const float* row = cpu::weight_row(table, ids[i], buf.data());
      std::copy(row, row + dim, o + int64_t(i) * dim);
    }
  });
  return out;
}

std::vector<Tensor> linear_many(const Tensor& x, std::span<const Weight* const> ws, const QuantizedInput& quantized) {
  const ProfileScope profile(OpKind::kLinear);
  cpu::check_f32(x, 2, "linear", "input");
  const int64_t T = x.dim(0);
  std::vector<Tensor> outs;
  for (const Weight* w : ws) {
    check_input(x, *w);
    outs.push_back(Tensor::empty({T, w->out_features}, DType::kF32));
  }
  // Each weight's kernel (for the int8 path: x quantized for its groups), before the rows are split.
  // The weights share x, so int8 activations quantized for one serve the others of the same
  // group size and width. reserve() keeps the span of built kernels valid while one is added.
  std::vector<cpu::LinearKernel> kernels;
  kernels.reserve(ws.size());
  for (const Weight* w : ws)
    kernels.emplace_back(cpu::cpu_isa(), *w, x.data<float>(), T,
                         std::span<const cpu::LinearKernel>(kernels.data(), kernels.size()), quantized);
  // The parts of up to kOnStack weights (q/k/v: 3) sit beside the call on the stack.
  constexpr size_t kOnStack = 4;
  LinearPart on_stack[kOnStack];
  std::vector<LinearPart> on_heap(ws.size() > kOnStack ? ws.size() : 0);
  LinearPart* parts = on_heap.empty() ? on_stack : on_heap.data();
  int64_t rows = 0;
  for (size_t i = 0; i < ws.size(); ++i) {
    parts[i] = {&kernels[i], ws[i], rows, rows + ws[i]->out_features, outs[i].data<float>()};
    rows = parts[i].end;
  }
  const LinearCall call{x.data<float>(), T, parts, ws.size()};
  thread_pool().parallel_for(size_t(rows), size_t(kRowBlock),
                             [&call](size_t b, size_t e) { run_parts(call, int64_t(b), int64_t(e)); });
  return outs;
}

std::vector<ReadAheadRange> read_ahead_ranges(std::span<const Weight* const> ws, const ThreadPool& pool) {
  const int threads = pool.size();
  std::vector<ReadAheadRange> out(static_cast<size_t>(threads));
  int64_t rows = 0;
  for (const Weight* w : ws) rows += w->out_features;
  const int64_t share = int64_t(pool.share(size_t(rows), size_t(kRowBlock)));  // as linear_many splits
  for (int i = 0; i < threads; ++i) {
    int64_t r = i * share;
    for (const Weight* w : ws) {
      if (r >= w->out_features) {
        r -= w->out_features;
        continue;
      }
      // Every layout keeps rows in order by blocks (16-row int8 tiles, 32-row panels) and pads the
      // last.
      const bool tiles = cpu::uses_int8(*w);
      const Tensor& t = tiles ? w->int8_tiles : w->weight;
      const int64_t stored =
          tiles ? (w->out_features + cpu::kInt8TileRows - 1) / cpu::kInt8TileRows * cpu::kInt8TileRows : t.dim(0);
      const size_t row_bytes = t.nbytes() / size_t(stored);
      const size_t bytes = size_t(std::min(share, w->out_features - r)) * row_bytes;
      out[size_t(i)] = {static_cast<const char*>(t.raw()) + size_t(r) * row_bytes, std::min(bytes, kReadAheadBytes)};
      break;
    }
  }
  return out;
}

const std::vector<ReadAheadRange>& ReadAheadPlan::ranges(const ThreadPool& pool) const {
  if (ranges_.size() != size_t(pool.size())) ranges_ = read_ahead_ranges(ws_, pool);
  return ranges_;
}

void ReadAheadPlan::post() const {
  ThreadPool& pool = thread_pool();
  const std::vector<ReadAheadRange>& r = ranges(pool);
  for (size_t i = 0; i < r.size(); ++i) pool.read_ahead(int(i), r[i].p, r[i].bytes);
}

Tensor linear(const Tensor& x, const Weight& w, const QuantizedInput& quantized) {
  const Weight* one[] = {&w};
  return std::move(linear_many(x, one, quantized)[0]);
}

Tensor gated_linear(const Tensor& x, const Weight& gate, const Weight& up, GateActivation act,
                    const QuantizedInput& quantized, const Weight* next, QuantizedInput* next_input) {
  const ProfileScope profile(OpKind::kLinear);
  cpu::check_f32(x, 2, "gated_linear", "input");
  check_input(x, gate);
  check_input(x, up);
  check(gate.out_features == up.out_features, [&] {
    return "gated_linear: gate has " + std::to_string(gate.out_features) + " outputs, up " +
           std::to_string(up.out_features);
  });
  const int64_t T = x.dim(0), n = gate.out_features;
  Tensor out = Tensor::empty({T, n}, DType::kF32);
  const cpu::LinearKernel gate_kernel(cpu::cpu_isa(), gate, x.data<float>(), T, {}, quantized);
  const cpu::LinearKernel up_kernel(cpu::cpu_isa(), up, x.data<float>(), T, {&gate_kernel, 1}, quantized);
  // The next layer's int8 activations are quantized by whole groups: pieces start on them.
  cpu::Int8ActsWriter codes(next_input ? next : nullptr, T, n);
  const int64_t grain = std::lcm(kRowBlock, int64_t(codes.group_size()));
  // A thread's rows in pieces whose two projections (T x piece floats each) stay in L2.
  const int64_t piece = std::max<int64_t>(grain, kGatePieceFloats / T / grain * grain);
  thread_pool().parallel_for(size_t(n), size_t(grain), [&](size_t b, size_t e) {
    thread_local std::vector<float> g, u;
    for (int64_t lo = int64_t(b); lo < int64_t(e); lo += piece) {
      const int64_t hi = std::min(int64_t(e), lo + piece), m = hi - lo;
      g.resize(size_t(T * m));
      u.resize(size_t(T * m));
      linear_rows(gate_kernel, x.data<float>(), T, gate, lo, hi, g.data(), m);
      linear_rows(up_kernel, x.data<float>(), T, up, lo, hi, u.data(), m);
      for (int64_t t = 0; t < T; ++t) {
        float* row = out.data<float>() + t * n;
        cpu::gate_multiply(g.data() + t * m, u.data() + t * m, row + lo, m, act);
        if (codes) codes.write(row, t, lo, hi);
      }
    }
  });
  codes.finish(next_input);
  return out;
}

Tensor gather_rows(const Tensor& x, std::span<const int32_t> rows) {
  const ProfileScope profile(OpKind::kElementwise);
  cpu::check_f32(x, 2, "gather_rows", "input");
  const int64_t n = x.dim(1);
  Tensor out = Tensor::empty({int64_t(rows.size()), n}, DType::kF32);
  for (size_t i = 0; i < rows.size(); ++i) {
    check(rows[i] >= 0 && rows[i] < x.dim(0),
          [&] { return "gather_rows: row " + std::to_string(rows[i]) + " out of range for " + x.describe(); });
    const float* src = x.data<float>() + int64_t(rows[i]) * n;
    std::copy(src, src + n, out.data<float>() + int64_t(i) * n);
  }
  return out;
}

Tensor concat_rows(const std::vector<Tensor>& parts) {
  const ProfileScope profile(OpKind::kElementwise);
  check(!parts.empty(), "concat_rows: no parts");
  const int64_t n = parts[0].dim(1);
  int64_t rows = 0;
  for (const Tensor& p : parts) {
    cpu::check_f32(p, 2, "concat_rows", "part");
    check(p.dim(1) == n, [&] { return "concat_rows: parts differ in width, " + parts[0].describe() + " and " +
                             p.describe(); });
    rows += p.dim(0);
  }
  Tensor out = Tensor::empty({rows, n}, DType::kF32);
  float* dst = out.data<float>();
  for (const Tensor& p : parts) {
    std::copy(p.data<float>(), p.data<float>() + p.numel(), dst);
    dst += p.numel();
  }
  return out;
}

}  // namespace kvlm::ops
