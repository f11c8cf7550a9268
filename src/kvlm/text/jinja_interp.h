#pragma once
// The tree-walking interpreter: scopes, output, limits and calls. jinja2's scoping is kept:
// `for` bodies, macros and `with` blocks get their own scope (a `set` inside them is invisible
// outside, which is why templates use namespace()), `if` does not.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>

#include "kvlm/text/jinja.h"
#include "kvlm/text/jinja_ast.h"

namespace kvlm::jinja {

struct Scope {
  std::shared_ptr<Scope> parent;
  std::unordered_map<std::string, Value> vars;
};
using ScopePtr = std::shared_ptr<Scope>;

class Interpreter {
 public:
  Interpreter(const Limits& limits, ScopePtr root) : limits_(limits), scope_(std::move(root)) {}
  // Namespaces may reference themselves (ns.self = ns); emptying them all at the end breaks
  // such cycles.
  ~Interpreter() {
    for (auto& ns : namespaces) ns->attrs = Dict();
  }
  std::vector<NamespacePtr> namespaces;

  Value lookup(const std::string& name) const;
  void assign(const std::string& name, Value value) { scope_->vars[name] = std::move(value); }

  // Runs `body` in the current scope, writing to the current output.
  void run(const Body& body);
  // Runs `body` with a fresh scope (child of `parent`) and returns what it wrote.
  std::string capture(const Body& body, ScopePtr parent);
  void write(std::string_view text);

  Value call(const Value& callee, CallArgs& args);

  // Makes `child` the current scope until the guard dies.
  struct ScopeGuard {
    ScopeGuard(Interpreter& in, ScopePtr child) : in_(in), saved_(in.scope_) { in.scope_ = std::move(child); }
    ~ScopeGuard() { in_.scope_ = std::move(saved_); }
    Interpreter& in_;
    ScopePtr saved_;
  };
  ScopePtr scope() const { return scope_; }
  ScopePtr child_scope() const {
    auto s = std::make_shared<Scope>();
    s->parent = scope_;
    return s;
  }

  // Counts work and nesting so that no template can run forever or overflow the stack.
  void step();
  struct DepthGuard {
    explicit DepthGuard(Interpreter& in) : in_(in) {
      if (++in.depth_ > in.limits_.max_depth) {
        --in.depth_;
        throw RenderError("template recursion too deep (limit " + std::to_string(in.limits_.max_depth) + ")");
      }
    }
    ~DepthGuard() { --in_.depth_; }
    Interpreter& in_;
  };
  // Throws when a string being built would exceed the output limit.
  void check_size(size_t bytes) const;

  enum class Flow { kNormal, kBreak, kContinue };
  Flow flow = Flow::kNormal;
  const Limits& limits() const { return limits_; }
  std::string take_output() { return std::move(out_); }

 private:
  const Limits& limits_;
  ScopePtr scope_;
  std::string out_;
  uint64_t steps_ = 0;
  int depth_ = 0;
};

// Builtins (jinja_filters.cpp, jinja_tests.cpp, jinja_methods.cpp, jinja_globals.cpp).
using FilterFn = Value (*)(Interpreter&, const Value& input, CallArgs& args);
using TestFn = bool (*)(Interpreter&, const Value& input, CallArgs& args);
FilterFn find_filter(const std::string& name);
TestFn find_test(const std::string& name);
// The method `name` of a str, list or dict bound to `self`, or an undefined value.
Value bound_method(const Value& self, const std::string& name);
// range, dict, namespace, raise_exception, strftime_now.
void add_globals(Scope& scope);

// jinja2's attribute and item lookup (environment.getattr / getitem).
Value get_attr(const Value& obj, const std::string& name);
Value get_item(const Value& obj, const Value& key);
// Raises the error an undefined value carries when used where a value is needed.
[[noreturn]] void raise_undefined(const Value& v);

// Binds call arguments to parameter names, Python style, for builtins.
class ArgBinder {
 public:
  ArgBinder(const std::string& fn, CallArgs& args, std::initializer_list<const char*> names);
  bool has(size_t i) const { return bound_[i] != nullptr; }
  const Value& get(size_t i) const;  // the bound value, or Undefined
  Value get_or(size_t i, Value fallback) const { return has(i) ? *bound_[i] : std::move(fallback); }

 private:
  std::vector<const Value*> bound_;
};

// Python string helpers shared by filters and methods.
std::string py_strip(std::string_view s, bool left, bool right, const Value& chars);
std::string py_upper(std::string_view s);
std::string py_lower(std::string_view s);
std::string py_replace(std::string_view s, std::string_view old, std::string_view repl, int64_t count);
std::string py_percent_format(Interpreter& in, const std::string& fmt, const Value& args);

}  // namespace kvlm::jinja
