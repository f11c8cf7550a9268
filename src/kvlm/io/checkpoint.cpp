#include "kvlm/io/checkpoint.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>

#include "kvlm/base/error.h"
#include "kvlm/base/file.h"
#include "kvlm/base/json.h"
#include "kvlm/io/safetensors.h"

namespace kvlm {

namespace fs = std::filesystem;

namespace {

struct Slot {
  TensorInfo info;
  std::shared_ptr<SafetensorsFile> file;
  const SafetensorsEntry* entry = nullptr;
};

// The parsed MLX quantization block.
struct Quantization {
  AffineSpec global;
  std::map<std::string, std::optional<AffineSpec>> overrides;  // nullopt = false
};

}  // namespace

struct Checkpoint::State {
  std::string dir, config_path;
  Json config, generation_config;
  std::map<std::string, Slot> tensors;
  std::optional<Quantization> quant;
  size_t total_bytes = 0;
};

Json merge_text_config(const Json& config) {
  if (!config.is_object() || !config.contains("text_config") || !config["text_config"].is_object())
    return config;
  Json merged = config;
  for (auto it = config["text_config"].begin(); it != config["text_config"].end(); ++it)
    merged[it.key()] = it.value();
  return merged;
}

namespace {

Json read_object(const std::string& path) {
  Json j = read_json_file(path);
  check(j.is_object(), path + ": expected a JSON object");
  return j;
}

// The block holding MLX quantization settings, or nullptr. HF-style blocks naming another
// method are refused: their tensors are not MLX affine and would load as garbage.
const Json* find_quant_block(const Json& cfg, const std::string& origin) {
  if (cfg.contains("quantization") && !cfg["quantization"].is_null()) {
    check(cfg["quantization"].is_object(), origin + ": 'quantization' is not a JSON object");
    return &cfg["quantization"];
  }
  if (!cfg.contains("quantization_config") || cfg["quantization_config"].is_null()) return nullptr;
  const Json& qc = cfg["quantization_config"];
  check(qc.is_object(), origin + ": 'quantization_config' is not a JSON object");
  const std::string method = json_get_or<std::string>(qc, "quant_method", "mlx", origin);
  check(method == "mlx" || method == "affine",
        origin + ": quantization method '" + method +
            "' is not supported (kvlm reads float and MLX affine checkpoints)");
  return &qc;
}

AffineSpec parse_spec(const Json& j, const AffineSpec& fallback, const std::string& where) {
  AffineSpec s{json_get_or<int>(j, "bits", fallback.bits, where),
               json_get_or<int>(j, "group_size", fallback.group_size, where)};
  const std::string mode = json_get_or<std::string>(j, "mode", "affine", where);
  check(mode == "affine", where + ": quantization mode '" + mode + "' is not supported (only affine)");
  check_affine_spec(s, where);
  return s;
}

std::optional<Quantization> parse_quantization(const Json& cfg, const std::string& origin) {
  const Json* block = find_quant_block(cfg, origin);
  if (!block) return std::nullopt;
  Quantization q;
  const std::string where = origin + ": quantization";
  json_get<int>(*block, "bits", where);  // both are required at the top of the block
  json_get<int>(*block, "group_size", where);
  q.global = parse_spec(*block, AffineSpec{}, where);
  for (auto it = block->begin(); it != block->end(); ++it) {
    if (it.value().is_object())
      q.overrides[it.key()] = parse_spec(it.value(), q.global, where + " '" + it.key() + "'");
    else if (it.value().is_boolean())
      q.overrides[it.key()] = it.value().get<bool>() ? std::optional<AffineSpec>(q.global)
                                                      : std::nullopt;
    // Scalars ("bits", "group_size", "mode", "quant_method", ...) are the global settings.
  }
  return q;
}

// Weight files in load order: the index's shards, else model.safetensors, else every
// model*.safetensors (mlx-lm loads that glob).
void add_file(Checkpoint::State* s, const std::shared_ptr<SafetensorsFile>& f,
              const std::set<std::string>* only) {
  for (const SafetensorsEntry& e : f->header().tensors) {
    if (only && !only->count(e.name)) continue;
    auto [it, fresh] = s->tensors.try_emplace(e.name);
    check(fresh, f->path() + ": tensor '" + e.name + "' is also in " + it->second.info.file);
    it->second = Slot{{e.name, e.dtype, e.shape, f->path()}, f, &e};
    s->total_bytes += e.nbytes;
  }
}

void load_index(Checkpoint::State* s, const std::string& index_path) {
  const Json index = read_object(index_path);
  check(index.contains("weight_map") && index["weight_map"].is_object(),
        index_path + ": missing required field 'weight_map'");
  std::map<std::string, std::set<std::string>> by_shard;
  for (auto it = index["weight_map"].begin(); it != index["weight_map"].end(); ++it) {
    check(it.value().is_string(),
          index_path + ": weight_map entry '" + it.key() + "' is not a file name");
    const std::string shard = it.value().get<std::string>();
    check(!shard.empty() && shard.find('/') == std::string::npos && shard != "..",
          index_path + ": weight_map entry '" + it.key() + "' names an invalid file '" + shard + "'");
    by_shard[shard].insert(it.key());
  }
  for (const auto& [shard, names] : by_shard) {
    const std::string path = s->dir + "/" + shard;
    check(file_exists(path), index_path + ": shard '" + shard + "' not found (" + path + ")");
    auto f = SafetensorsFile::open(path);
    for (const std::string& n : names)
      check(f->header().find(n) != nullptr,
            path + ": tensor '" + n + "' listed in " + fs::path(index_path).filename().string() +
                " is missing");
    add_file(s, f, &names);
  }
}

void load_weights(Checkpoint::State* s) {
  const std::string index = s->dir + "/model.safetensors.index.json";
  if (file_exists(index)) return load_index(s, index);
  std::vector<std::string> files;
  std::error_code ec;
  for (const auto& de : fs::directory_iterator(s->dir, ec)) {
    const std::string name = de.path().filename().string();
    if (de.is_regular_file() && name.rfind("model", 0) == 0 && name.size() > 12 &&
        name.substr(name.size() - 12) == ".safetensors")
      files.push_back(de.path().string());
  }
  check(!files.empty(), s->dir + ": no model.safetensors or model.safetensors.index.json");
  std::sort(files.begin(), files.end());
  for (const std::string& f : files) add_file(s, SafetensorsFile::open(f), nullptr);
}

}  // namespace

Checkpoint Checkpoint::open(const std::string& dir_in) {
  auto s = std::make_shared<State>();
  s->dir = dir_in;
  while (s->dir.size() > 1 && s->dir.back() == '/') s->dir.pop_back();
  check(fs::is_directory(s->dir), s->dir + ": not a directory");
  s->config_path = s->dir + "/config.json";
  check(file_exists(s->config_path), s->config_path + ": missing (a checkpoint needs config.json)");
  s->config = merge_text_config(read_object(s->config_path));
  const std::string gen = s->dir + "/generation_config.json";
  s->generation_config = file_exists(gen) ? read_object(gen) : Json::object();
  s->quant = parse_quantization(s->config, s->config_path);
  load_weights(s.get());
  return Checkpoint(std::move(s));
}

const std::string& Checkpoint::dir() const { return s_->dir; }
const Json& Checkpoint::config() const { return s_->config; }
const std::string& Checkpoint::config_path() const { return s_->config_path; }
const Json& Checkpoint::generation_config() const { return s_->generation_config; }
bool Checkpoint::has(const std::string& name) const { return s_->tensors.count(name) != 0; }
size_t Checkpoint::total_bytes() const { return s_->total_bytes; }
bool Checkpoint::is_quantized() const { return s_->quant.has_value(); }

const TensorInfo& Checkpoint::info(const std::string& name) const {
  auto it = s_->tensors.find(name);
  check(it != s_->tensors.end(), s_->dir + ": missing tensor '" + name + "'");
  return it->second.info;
}

Tensor Checkpoint::tensor(const std::string& name) const {
  info(name);  // the missing-tensor error
  const Slot& slot = s_->tensors.at(name);
  return slot.file->tensor(*slot.entry);
}

Tensor Checkpoint::tensor_checked(const std::string& name, const Shape& expected) const {
  const TensorInfo& i = info(name);
  check(i.shape == expected, i.file + ": tensor '" + name + "' has shape " + shape_string(i.shape) +
                                 ", expected " + shape_string(expected));
  return tensor(name);
}

void Checkpoint::release(const std::string& name) const {
  info(name);  // the missing-tensor error
  const Slot& slot = s_->tensors.at(name);
  slot.file->release(*slot.entry);
}

std::vector<std::string> Checkpoint::names() const {
  std::vector<std::string> out;
  out.reserve(s_->tensors.size());
  for (const auto& [name, slot] : s_->tensors) out.push_back(name);
  return out;
}

std::optional<AffineSpec> Checkpoint::quantization_for(const std::string& module) const {
  if (!s_->quant) return std::nullopt;
  auto it = s_->quant->overrides.find(module);
  if (it != s_->quant->overrides.end()) return it->second;
  if (has(module + ".scales")) return s_->quant->global;
  return std::nullopt;
}

AffineWeight Checkpoint::affine_weight(const std::string& module, const Shape& expected) const {
  const std::optional<AffineSpec> spec = quantization_for(module);
  check(spec.has_value(), config_path() + ": module '" + module + "' is not quantized");
  AffineWeight w{tensor(module + ".weight"), tensor(module + ".scales"), tensor(module + ".biases"),
                 *spec};
  const std::string where = info(module + ".weight").file + ": tensor '" + module + ".weight'";
  const int64_t cols = affine_check_shapes(w.packed, w.scales, w.biases, *spec, where);
  Shape unpacked = w.packed.shape();
  unpacked.back() = cols;
  check(unpacked == expected, where + " unpacks to shape " + shape_string(unpacked) + " at bits=" +
                                  std::to_string(spec->bits) + ", expected " +
                                  shape_string(expected));
  return w;
}

}  // namespace kvlm
