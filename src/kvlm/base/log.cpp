#include "kvlm/base/log.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace kvlm {
namespace {

LogLevel threshold() {
  static const LogLevel level = [] {
    const char* env = std::getenv("KVLM_LOG");
    if (!env) return LogLevel::kWarn;
    if (!std::strcmp(env, "debug")) return LogLevel::kDebug;
    if (!std::strcmp(env, "info")) return LogLevel::kInfo;
    if (!std::strcmp(env, "error")) return LogLevel::kError;
    return LogLevel::kWarn;
  }();
  return level;
}

}  // namespace

void log(LogLevel level, const std::string& message) {
  if (level < threshold()) return;
  static const char* names[] = {"debug", "info", "warn", "error"};
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  std::fprintf(stderr, "[kvlm %s] %s\n", names[int(level)], message.c_str());
}

}  // namespace kvlm
