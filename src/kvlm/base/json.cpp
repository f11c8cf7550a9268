#include "kvlm/base/json.h"

#include "kvlm/base/file.h"

namespace kvlm {

Json parse_json(const std::string& text, const std::string& origin) {
  try {
    return Json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    throw Error(origin + ": invalid JSON at byte " + std::to_string(e.byte) + ": " +
                std::string(e.what()).substr(std::string(e.what()).find(':') + 2));
  } catch (const nlohmann::json::exception& e) {
    // Not a syntax error but still bad input, e.g. a number too large for a double (1e999).
    const std::string what = e.what();  // "[json.exception.out_of_range.406] number overflow ..."
    const size_t cut = what.find("] ");
    throw Error(origin + ": invalid JSON: " + (cut == std::string::npos ? what : what.substr(cut + 2)));
  }
}

Json read_json_file(const std::string& path) { return parse_json(read_file(path), path); }

}  // namespace kvlm
