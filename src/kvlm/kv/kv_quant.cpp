#include "kvlm/kv/kv_quant.h"

#include <filesystem>

#include "kvlm/base/error.h"
#include "kvlm/quant/affine.h"

namespace kvlm {

namespace {

// entry[key] as an integer, or an error naming file, entry and field.
int entry_int(const Json& entry, const char* key, const std::string& where) {
  const Json& v = entry.at(key);
  if (!v.is_number_integer())
    throw Error(where + ": field '" + key + "' must be an integer, got " + v.dump());
  return v.get<int>();
}

}  // namespace

std::vector<KVCodecSpec> parse_kv_config(const Json& doc, const std::string& file, int n_layers,
                                         int group_size, DType model_dtype) {
  check(doc.is_array(), file + ": expected a JSON array of {\"layer_idx\", \"bits\", "
                               "\"group_size\"} entries, got " + std::string(doc.type_name()));
  std::vector<KVCodecSpec> specs(size_t(n_layers), parse_kv_quant("off", 0, model_dtype));
  std::vector<bool> listed(size_t(n_layers), false);
  for (size_t i = 0; i < doc.size(); ++i) {
    const Json& e = doc[i];
    const std::string where = file + ": entry " + std::to_string(i);
    check(e.is_object(), where + ": expected an object, got " + e.dump());
    for (const char* key : {"layer_idx", "bits"})
      check(e.contains(key), where + ": missing required field '" + key + "'");
    const int layer = entry_int(e, "layer_idx", where);
    const int bits = entry_int(e, "bits", where);
    const int group =
        e.contains("group_size") ? entry_int(e, "group_size", where)
                                 : (group_size > 0 ? group_size : kDefaultKVGroupSize);
    check(layer >= 0 && layer < n_layers, where + ": field 'layer_idx': " + std::to_string(layer) +
                                              " is outside the model's layers 0.." +
                                              std::to_string(n_layers - 1));
    check(!listed[size_t(layer)],
          where + ": field 'layer_idx': layer " + std::to_string(layer) + " is listed twice");
    check(affine_spec_supported({bits, 32}),
          where + ": field 'bits': " + std::to_string(bits) + " is not 2, 3, 4, 5, 6 or 8");
    check(affine_spec_supported({bits, group}),
          where + ": field 'group_size': " + std::to_string(group) + " is not 32, 64 or 128");
    listed[size_t(layer)] = true;
    specs[size_t(layer)] = kv_affine_spec(bits, group, model_dtype);
  }
  return specs;
}

std::vector<KVCodecSpec> resolve_kv_codecs(const KVQuantOptions& o, int n_layers,
                                           DType model_dtype, const std::string& model_dir) {
  if (o.quant != "config") {
    check(o.config_file.empty(), "--kv-config " + o.config_file + ": needs --kv-quant config");
    return std::vector<KVCodecSpec>(size_t(n_layers),
                                    parse_kv_quant(o.quant, o.group_size, model_dtype));
  }
  const std::string file = o.config_file.empty()
                               ? (std::filesystem::path(model_dir) / "kv_config.json").string()
                               : o.config_file;
  check(std::filesystem::is_regular_file(file),
        "--kv-quant config: " + file + " does not exist (give the file with --kv-config)");
  return parse_kv_config(read_json_file(file), file, n_layers, o.group_size, model_dtype);
}

}  // namespace kvlm
