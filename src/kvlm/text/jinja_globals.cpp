// Globals every template sees: jinja2's range/dict/namespace and transformers' raise_exception
// and strftime_now.
#include <cstdlib>
#include <ctime>

#include "kvlm/text/jinja_interp.h"

namespace kvlm::jinja {
namespace {

Value g_range(Interpreter& in, CallArgs& a) {
  if (!a.keyword.empty() || a.positional.empty() || a.positional.size() > 3)
    throw RenderError("range expected 1 to 3 integer arguments");
  int64_t start = 0, stop, step = 1;
  if (a.positional.size() == 1) {
    stop = as_int(a.positional[0]);
  } else {
    start = as_int(a.positional[0]);
    stop = as_int(a.positional[1]);
    if (a.positional.size() == 3) step = as_int(a.positional[2]);
  }
  if (step == 0) throw RenderError("range() arg 3 must not be zero");
  // Count without overflow: the span is computed in long double.
  long double span = step > 0 ? (long double)stop - start : (long double)start - stop;
  long double count = span <= 0 ? 0 : (span + (step > 0 ? step : -step) - 1) / (step > 0 ? step : -step);
  if (count > (long double)in.limits().max_range)
    throw RenderError("range() is too large (limit " + std::to_string(in.limits().max_range) + " items)");
  List l;
  int64_t n = int64_t(count);
  for (int64_t i = 0; i < n; ++i) l.items.emplace_back(start + i * step);
  return Value(std::move(l));
}

Value g_dict(Interpreter&, CallArgs& a) {
  Dict d;
  if (a.positional.size() > 1) throw RenderError("dict expected at most 1 argument");
  if (!a.positional.empty()) {
    const Value& src = a.positional[0];
    if (!src.is_dict()) throw RenderError("dict() argument must be a mapping in this implementation");
    for (const auto& [k, v] : src.dict().entries()) d.set(k, v);
  }
  for (auto& [k, v] : a.keyword) d.set(k, v);
  return Value(std::move(d));
}

Value g_namespace(Interpreter& in, CallArgs& a) {
  auto ns = std::make_shared<Namespace>();
  for (const Value& src : a.positional) {
    if (!src.is_dict()) throw RenderError("namespace() positional argument must be a mapping");
    for (const auto& [k, v] : src.dict().entries()) ns->attrs.set(k, v);
  }
  for (auto& [k, v] : a.keyword) ns->attrs.set(k, v);
  in.namespaces.push_back(ns);
  return Value(ns);
}

Value g_raise_exception(Interpreter&, CallArgs& a) {
  ArgBinder b("raise_exception", a, {"message"});
  throw TemplateRaised(to_str(b.get(0)));
}

Value g_strftime_now(Interpreter&, CallArgs& a) {
  ArgBinder b("strftime_now", a, {"format"});
  std::string fmt = to_str(b.get(0));
  // SOURCE_DATE_EPOCH (the reproducible-builds convention) pins "now", in UTC, so that renders
  // of templates that print today's date can be reproduced and tested.
  std::tm tm{};
  const char* pinned = std::getenv("SOURCE_DATE_EPOCH");
  if (pinned && *pinned) {
    std::time_t t = std::time_t(std::strtoll(pinned, nullptr, 10));
    gmtime_r(&t, &tm);
  } else {
    std::time_t now = std::time(nullptr);
    localtime_r(&now, &tm);
  }
  char buf[512];
  size_t n = fmt.empty() ? 0 : std::strftime(buf, sizeof buf, fmt.c_str(), &tm);
  if (n == 0 && !fmt.empty()) throw RenderError("strftime_now: format too long or invalid");
  return Value(std::string(buf, n));
}

}  // namespace

void add_globals(Scope& scope) {
  scope.vars["range"] = make_function("range", g_range);
  scope.vars["dict"] = make_function("dict", g_dict);
  scope.vars["namespace"] = make_function("namespace", g_namespace);
  scope.vars["raise_exception"] = make_function("raise_exception", g_raise_exception);
  scope.vars["strftime_now"] = make_function("strftime_now", g_strftime_now);
}

}  // namespace kvlm::jinja
