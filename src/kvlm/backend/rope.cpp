// RoPE inverse frequencies, computed as transformers' ROPE_INIT_FUNCTIONS do. transformers works on
// float32 tensors mixed with Python floats (a Python float meeting a float32 tensor is rounded to
// float32 first), so the tensor steps below are done in float and the scalar steps in double.
#include <algorithm>
#include <cmath>
#include <numbers>

#include "kvlm/backend/ops.h"
#include "kvlm/base/error.h"

namespace kvlm::ops {

namespace {

// base ** (arange(0, dim, 2) / dim) in float32, one value per rotary pair.
std::vector<float> pos_freqs(double base, int dim) {
  std::vector<float> out(static_cast<size_t>(dim / 2));
  const float b = float(base);
  for (int i = 0; i < dim / 2; ++i) {
    const float e = float(2 * i) / float(dim);
    out[size_t(i)] = float(std::pow(double(b), double(e)));
  }
  return out;
}

std::vector<float> default_inv_freq(double base, int dim) {
  std::vector<float> f = pos_freqs(base, dim);
  for (float& v : f) v = 1.0f / v;
  return f;
}

void llama3_scale(std::vector<float>& inv, const RopeParams& p) {
  const float factor = float(p.factor);
  const float old_len = float(p.original_max_position_embeddings);
  const float low = float(p.low_freq_factor), high = float(p.high_freq_factor);
  const float low_freq_wavelen = float(double(p.original_max_position_embeddings) / p.low_freq_factor);
  const float high_freq_wavelen = float(double(p.original_max_position_embeddings) / p.high_freq_factor);
  const float two_pi = float(2.0 * std::numbers::pi);
  for (float& f : inv) {
    const float wavelen = two_pi / f;
    const float scaled = wavelen > low_freq_wavelen ? f / factor : f;
    const bool medium = !(wavelen < high_freq_wavelen) && !(wavelen > low_freq_wavelen);
    if (medium) {
      const float smooth = (old_len / wavelen - low) / (high - low);
      f = (1.0f - smooth) * scaled / factor + smooth * scaled;
    } else {
      f = scaled;
    }
  }
}

double yarn_mscale(double scale, double mscale) {
  return scale <= 1.0 ? 1.0 : 0.1 * mscale * std::log(scale) + 1.0;
}

RopeFrequencies yarn(const RopeParams& p) {
  const int dim = p.rotary_dim;
  const double base = p.theta, factor = p.factor;
  RopeFrequencies out;
  double attention = 0.0;
  if (p.attention_factor) {
    attention = *p.attention_factor;
  } else if (p.mscale && p.mscale_all_dim && *p.mscale != 0.0 && *p.mscale_all_dim != 0.0) {
    attention = yarn_mscale(factor, *p.mscale) / yarn_mscale(factor, *p.mscale_all_dim);
  } else {
    attention = yarn_mscale(factor, 1.0);
  }
  out.attention_scaling = float(attention);

  // The dimension whose wavelength makes `rotations` turns over the original context.
  const double orig = double(p.original_max_position_embeddings);
  auto correction_dim = [&](double rotations) {
    return (dim * std::log(orig / (rotations * 2.0 * std::numbers::pi))) / (2.0 * std::log(base));
  };
  double low = correction_dim(p.beta_fast), high = correction_dim(p.beta_slow);
  if (p.truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, double(dim - 1));
  if (low == high) high += 0.001;  // avoids a zero-width ramp

  const std::vector<float> pf = pos_freqs(base, dim);
  out.inv_freq.resize(pf.size());
  for (size_t i = 0; i < pf.size(); ++i) {
    const float extrapolation = 1.0f / pf[i];
    const float interpolation = 1.0f / (float(factor) * pf[i]);
    const float ramp = std::clamp((float(i) - float(low)) / float(high - low), 0.0f, 1.0f);
    const float extra_factor = 1.0f - ramp;
    out.inv_freq[i] = interpolation * (1.0f - extra_factor) + extrapolation * extra_factor;
  }
  return out;
}

}  // namespace

RopeFrequencies rope_frequencies(const RopeParams& p, int64_t seq_len) {
  check(p.rotary_dim > 0 && p.rotary_dim % 2 == 0,
        [&] { return "rope: rotary dimension " + std::to_string(p.rotary_dim) + " must be positive and even"; });
  RopeFrequencies out;
  switch (p.type) {
    case RopeParams::Type::kDefault:
      out.inv_freq = default_inv_freq(p.theta, p.rotary_dim);
      break;
    case RopeParams::Type::kLinear:
      out.inv_freq = default_inv_freq(p.theta, p.rotary_dim);
      for (float& f : out.inv_freq) f /= float(p.factor);
      break;
    case RopeParams::Type::kDynamic: {
      const double mpe = double(p.max_position_embeddings);
      const double len = std::max(double(seq_len), mpe);
      const int dim = p.rotary_dim;
      const double base =
          p.theta * std::pow(p.factor * len / mpe - (p.factor - 1.0), double(dim) / double(dim - 2));
      out.inv_freq = default_inv_freq(base, dim);
      break;
    }
    case RopeParams::Type::kLlama3:
      out.inv_freq = default_inv_freq(p.theta, p.rotary_dim);
      llama3_scale(out.inv_freq, p);
      break;
    case RopeParams::Type::kYarn:
      out = yarn(p);
      break;
  }
  return out;
}

}  // namespace kvlm::ops
