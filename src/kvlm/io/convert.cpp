#include "kvlm/io/convert.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <set>

#include "kvlm/base/error.h"
#include "kvlm/base/file.h"
#include "kvlm/base/half.h"
#include "kvlm/io/checkpoint.h"
#include "kvlm/base/json.h"
#include "kvlm/io/safetensors_writer.h"

namespace kvlm {

namespace fs = std::filesystem;

namespace {

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

std::string module_of(const std::string& weight_name) {
  return weight_name.substr(0, weight_name.size() - std::string(".weight").size());
}

// Hugging Face's spelling of a float dtype in config.json.
const char* hf_dtype_name(DType d) {
  switch (d) {
    case DType::kF32: return "float32";
    case DType::kF16: return "float16";
    default: return "bfloat16";
  }
}

bool dtype_from_hf(const std::string& s, DType* out) {
  for (DType d : {DType::kF32, DType::kF16, DType::kBF16})
    if (s == hf_dtype_name(d)) return *out = d, true;
  return false;
}

// The model dtype: --dtype, else config's torch_dtype/dtype (as mlx-lm's convert does), else the
// first float tensor's dtype.
DType model_dtype(const ConvertOptions& opt, const Checkpoint& src) {
  if (opt.dtype) return *opt.dtype;
  DType d;
  for (const char* key : {"torch_dtype", "dtype"})
    if (src.config().contains(key) && src.config()[key].is_string() &&
        dtype_from_hf(src.config()[key].get<std::string>(), &d))
      return d;
  for (const std::string& n : src.names())
    if (dtype_traits(src.info(n).dtype).is_float) return src.info(n).dtype;
  return DType::kBF16;
}

// Tensors mlx-lm's sanitize drops: precomputed RoPE tables, and a tied model's redundant head.
bool dropped_by_mlx_lm(const std::string& name, const Checkpoint& src) {
  if (name.find("rotary_emb.inv_freq") != std::string::npos) return true;
  const bool tied = json_get_or<bool>(src.config(), "tie_word_embeddings", false, src.config_path());
  return tied && name == "lm_head.weight";
}

// One source tensor's fate.
struct Planned {
  std::string name;
  bool quantize = false;
  bool skipped = false;  // quantizable kind, but the input dim does not divide by the group
  std::vector<std::pair<std::string, size_t>> outputs;  // (name, bytes)
};

Planned plan_tensor(const std::string& name, const TensorInfo& info, const AffineSpec& spec,
                    DType dtype) {
  Planned p{name, false, false, {}};
  const bool is_float = dtype_traits(info.dtype).is_float;
  if (is_float && is_quantizable_weight(name, info.shape)) {
    if (info.shape.back() % spec.group_size == 0) {
      p.quantize = true;
      const std::string m = module_of(name);
      const size_t rows = size_t(info.shape[0]);
      const size_t words = size_t(affine_packed_words(info.shape.back(), spec.bits));
      const size_t groups = size_t(info.shape.back() / spec.group_size);
      p.outputs = {{name, rows * words * 4},
                   {m + ".scales", rows * groups * dtype_size(dtype)},
                   {m + ".biases", rows * groups * dtype_size(dtype)}};
      return p;
    }
    p.skipped = true;
  }
  const size_t elem = is_float ? dtype_size(dtype) : dtype_size(info.dtype);
  p.outputs = {{name, size_t(shape_numel(info.shape)) * elem}};
  return p;
}

// Casts a float tensor to `dtype` (a copy; the source stays mapped).
Tensor cast_float(const Tensor& t, DType dtype) {
  if (t.dtype() == dtype) return t;
  const std::vector<float> v = t.to_f32_vector();
  Tensor out = Tensor::empty(t.shape(), dtype);
  for (size_t i = 0; i < v.size(); ++i) {
    switch (dtype) {
      case DType::kF32: out.data<float>()[i] = v[i]; break;
      case DType::kF16: out.data<uint16_t>()[i] = f32_to_f16(v[i]); break;
      default: out.data<uint16_t>()[i] = f32_to_bf16(v[i]); break;
    }
  }
  return out;
}

void add_converted(const Planned& p, const Checkpoint& src, const AffineSpec& spec, DType dtype,
                   SafetensorsWriter* w) {
  const Tensor t = src.tensor(p.name);
  if (p.quantize) {
    AffineWeight q = affine_quantize(t, spec, dtype);
    w->add(p.outputs[0].first, q.packed);
    w->add(p.outputs[1].first, q.scales);
    w->add(p.outputs[2].first, q.biases);
  } else {
    w->add(p.name, dtype_traits(t.dtype()).is_float ? cast_float(t, dtype) : t);
  }
}

// Groups planned tensors into shards of at most max_bytes (a tensor larger than that gets a shard
// of its own), in name order, as mlx-lm's save does.
std::vector<std::vector<const Planned*>> shard_plan(const std::vector<Planned>& plan,
                                                    size_t max_bytes) {
  std::vector<std::vector<const Planned*>> shards(1);
  size_t current = 0;
  for (const Planned& p : plan) {
    size_t bytes = 0;
    for (const auto& o : p.outputs) bytes += o.second;
    if (current > 0 && current + bytes > max_bytes) {
      shards.emplace_back();
      current = 0;
    }
    shards.back().push_back(&p);
    current += bytes;
  }
  return shards;
}

std::string shard_name(size_t i, size_t n) {
  if (n == 1) return "model.safetensors";
  char buf[64];
  std::snprintf(buf, sizeof buf, "model-%05zu-of-%05zu.safetensors", i + 1, n);
  return buf;
}

// config.json with the quantization block mlx-lm writes, under both keys it uses.
Json quantized_config(const Checkpoint& src, const std::vector<Planned>& plan,
                      const AffineSpec& spec, DType dtype) {
  Json cfg = read_json_file(src.config_path());  // unmerged: text_config stays nested
  Json q = {{"group_size", spec.group_size}, {"bits", spec.bits}, {"mode", "affine"}};
  for (const Planned& p : plan)
    if (p.skipped) q[module_of(p.name)] = false;
  cfg["quantization"] = q;
  cfg["quantization_config"] = q;
  // transformers 5 writes "dtype", earlier versions "torch_dtype"; keep whichever is there.
  cfg[cfg.contains("dtype") && !cfg.contains("torch_dtype") ? "dtype" : "torch_dtype"] =
      hf_dtype_name(dtype);
  return cfg;
}

// Tokenizer files, generation_config.json, chat templates and other small text files travel
// with the model; weights and the old index do not.
bool copied_alongside(const fs::path& p) {
  const std::string name = p.filename().string();
  if (name == "config.json" || name == "model.safetensors.index.json") return false;
  static const std::set<std::string> exts = {".json", ".jinja", ".txt", ".model",
                                             ".tiktoken", ".jsonl", ".py"};
  return exts.count(p.extension().string()) != 0;
}

// An empty or absent destination; the source (which holds config.json) can never qualify.
void check_destination(const ConvertOptions& opt) {
  std::error_code ec;
  check(!fs::exists(opt.dst_dir) || (fs::is_directory(opt.dst_dir) && fs::is_empty(opt.dst_dir)),
        opt.dst_dir + ": destination exists and is not an empty directory; remove it or choose "
                      "another path");
  fs::create_directories(opt.dst_dir, ec);
  check(!ec, opt.dst_dir + ": cannot create directory: " + ec.message());
}

}  // namespace

bool is_quantizable_weight(const std::string& name, const Shape& shape) {
  // Linear and Embedding weights are the only 2-D ".weight" tensors of the supported families
  // (norm weights are 1-D; convolutions are 3-D or more), which is the set mlx-lm quantizes.
  return shape.size() == 2 && ends_with(name, ".weight") && name.find("norm") == std::string::npos;
}

ConvertReport convert_checkpoint(const ConvertOptions& opt,
                                 const std::function<void(const std::string&)>& log_fn) {
  auto log = [&](const std::string& line) {
    if (log_fn) log_fn(line);
  };
  check_affine_spec(opt.spec, "convert");
  const Checkpoint src = Checkpoint::open(opt.src_dir);
  check(!src.is_quantized(),
        src.config_path() + ": the checkpoint is already quantized; convert needs a float one");
  for (const std::string& n : src.names())
    check(!(ends_with(n, ".weight") && src.info(n).dtype == DType::kU32 &&
            src.has(module_of(n) + ".scales")),
          src.dir() + ": tensor '" + n + "' is MLX-quantized though config.json has no "
                      "quantization block; convert needs a float checkpoint");
  const DType dtype = model_dtype(opt, src);
  check(dtype == DType::kF32 || dtype == DType::kF16 || dtype == DType::kBF16,
        std::string("convert: model dtype must be f32, f16 or bf16, not ") + dtype_name(dtype));
  check_destination(opt);

  ConvertReport rep;
  rep.dtype = dtype;
  std::vector<Planned> plan;
  for (const std::string& n : src.names()) {
    if (dropped_by_mlx_lm(n, src)) {
      log("dropped " + n + " (mlx-lm does not load it)");
      continue;
    }
    plan.push_back(plan_tensor(n, src.info(n), opt.spec, dtype));
    const Planned& p = plan.back();
    rep.bytes_in += size_t(shape_numel(src.info(n).shape)) * dtype_size(src.info(n).dtype);
    if (p.quantize) ++rep.quantized;
    if (!p.quantize) ++rep.kept_float;
    if (p.skipped) {
      ++rep.skipped;
      log("kept " + n + " " + shape_string(src.info(n).shape) + " in " + dtype_name(dtype) +
          ": input dim is not a multiple of group size " + std::to_string(opt.spec.group_size));
    }
  }

  const auto shards = shard_plan(plan, opt.max_shard_bytes);
  Json weight_map = Json::object();
  for (size_t i = 0; i < shards.size(); ++i) {
    SafetensorsWriter w("mlx");
    for (const Planned* p : shards[i]) add_converted(*p, src, opt.spec, dtype, &w);
    const std::string name = shard_name(i, shards.size());
    w.write(opt.dst_dir + "/" + name);
    rep.bytes_out += w.data_bytes();
    for (const Planned* p : shards[i])
      for (const auto& o : p->outputs) weight_map[o.first] = name;
    log("wrote " + name + " (" + std::to_string(w.size()) + " tensors, " +
        std::to_string(w.data_bytes()) + " bytes)");
  }
  rep.shards = int(shards.size());
  if (shards.size() > 1)
    write_file(opt.dst_dir + "/model.safetensors.index.json",
               Json{{"metadata", {{"total_size", rep.bytes_out}}}, {"weight_map", weight_map}}.dump(4));

  write_file(opt.dst_dir + "/config.json", quantized_config(src, plan, opt.spec, dtype).dump(4));
  for (const auto& de : fs::directory_iterator(src.dir())) {
    if (!de.is_regular_file() || !copied_alongside(de.path())) continue;
    fs::copy_file(de.path(), fs::path(opt.dst_dir) / de.path().filename(),
                  fs::copy_options::overwrite_existing);
    log("copied " + de.path().filename().string());
  }
  // Reading the result back proves the files are well-formed before the user relies on them.
  Checkpoint::open(opt.dst_dir);
  return rep;
}

}  // namespace kvlm
