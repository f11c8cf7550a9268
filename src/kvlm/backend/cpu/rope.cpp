// Rotary position embedding, rotate-half pairing (transformers' apply_rotary_pos_emb).
#include <cmath>

#include "kvlm/backend/profile.h"
#include "kvlm/backend/cpu/cpu_kernels.h"
#include "kvlm/backend/cpu/vector_math.h"

namespace kvlm::ops {

namespace {

// Token row `cs` of a rope table: cos then sin of the token's rotary_dim/2 angles.
void fill_rotations(const RopeFrequencies& f, int32_t pos, float* cs) {
  const size_t half = f.inv_freq.size();
  for (size_t i = 0; i < half; ++i) {
    const float angle = f.inv_freq[i] * float(pos);
    cs[i] = std::cos(angle) * f.attention_scaling;
    cs[half + i] = std::sin(angle) * f.attention_scaling;
  }
}

void check_input(const Tensor& x, int64_t tokens, int64_t rotary_dim, const char* tokens_are) {
  cpu::check_f32(x, 3, "rope", "input");
  check(tokens == x.dim(0),
        [&] { return "rope: " + std::to_string(tokens) + " " + tokens_are + " for " + x.describe(); });
  check(rotary_dim <= x.dim(2), [&] { return "rope: rotary dimension " + std::to_string(rotary_dim) +
                                    " exceeds head dimension of " + x.describe(); });
}

}  // namespace

Tensor rope_table(std::span<const int32_t> positions, const RopeParams& p) {
  const ProfileScope profile(OpKind::kRope);
  const RopeFrequencies base = rope_frequencies(p, 0);
  const int64_t dim = int64_t(base.inv_freq.size()) * 2;
  Tensor table = Tensor::empty({int64_t(positions.size()), dim}, DType::kF32);
  for (size_t t = 0; t < positions.size(); ++t) {
    const int32_t pos = positions[t];
    float* cs = table.data<float>() + int64_t(t) * dim;
    // Dynamic NTK rescales past the trained length, per token: seq_len = pos + 1.
    if (p.type == RopeParams::Type::kDynamic && pos + 1 > p.max_position_embeddings) {
      fill_rotations(rope_frequencies(p, pos + 1), pos, cs);
    } else {
      fill_rotations(base, pos, cs);
    }
  }
  return table;
}

void rope_inplace(Tensor& x, const Tensor& table) {
  const ProfileScope profile(OpKind::kRope);
  cpu::check_f32(table, 2, "rope", "table");
  check_input(x, table.dim(0), table.dim(1), "rows in the rope table");
  const int64_t T = x.dim(0), heads = x.dim(1), head_dim = x.dim(2), dim = table.dim(1);
  const auto rotate = cpu::vector_math().rope_rotate;
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < heads; ++h)
      rotate(x.data<float>() + (t * heads + h) * head_dim, table.data<float>() + t * dim, dim / 2);
}

void rope_inplace(Tensor& x, std::span<const int32_t> positions, const RopeParams& p) {
  check_input(x, int64_t(positions.size()), p.rotary_dim, "positions");
  rope_inplace(x, rope_table(positions, p));
}

}  // namespace kvlm::ops
