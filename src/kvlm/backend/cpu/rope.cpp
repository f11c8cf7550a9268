// Rotary position embedding, rotate-half pairing (transformers' apply_rotary_pos_emb).
#include <cmath>
#include <vector>

#include "kvlm/backend/profile.h"
#include "kvlm/backend/cpu/cpu_kernels.h"

namespace kvlm::ops {

namespace {

void rotate_token(float* x, int64_t heads, int64_t head_dim, const RopeFrequencies& f,
                  int32_t pos, std::vector<float>& cs) {
  const size_t half = f.inv_freq.size();
  cs.resize(2 * half);
  for (size_t i = 0; i < half; ++i) {
    const float angle = f.inv_freq[i] * float(pos);
    cs[i] = std::cos(angle) * f.attention_scaling;
    cs[half + i] = std::sin(angle) * f.attention_scaling;
  }
  for (int64_t h = 0; h < heads; ++h) {
    float* v = x + h * head_dim;
    for (size_t i = 0; i < half; ++i) {
      const float a = v[i], b = v[i + half];
      v[i] = a * cs[i] + -b * cs[half + i];
      v[i + half] = b * cs[i] + a * cs[half + i];
    }
  }
}

}  // namespace

void rope_inplace(Tensor& x, std::span<const int32_t> positions, const RopeParams& p) {
  const ProfileScope profile(OpKind::kRope);
  cpu::check_f32(x, 3, "rope", "input");
  check(int64_t(positions.size()) == x.dim(0),
        [&] { return "rope: " + std::to_string(positions.size()) + " positions for " + x.describe(); });
  check(p.rotary_dim <= x.dim(2), [&] { return "rope: rotary dimension " + std::to_string(p.rotary_dim) +
                                      " exceeds head dimension of " + x.describe(); });
  const int64_t heads = x.dim(1), head_dim = x.dim(2);
  const RopeFrequencies base = rope_frequencies(p, 0);
  std::vector<float> cs;
  for (size_t t = 0; t < positions.size(); ++t) {
    const int32_t pos = positions[t];
    float* row = x.data<float>() + int64_t(t) * heads * head_dim;
    // Dynamic NTK rescales past the trained length, per token: seq_len = pos + 1.
    if (p.type == RopeParams::Type::kDynamic && pos + 1 > p.max_position_embeddings) {
      rotate_token(row, heads, head_dim, rope_frequencies(p, pos + 1), pos, cs);
    } else {
      rotate_token(row, heads, head_dim, base, pos, cs);
    }
  }
}

}  // namespace kvlm::ops
