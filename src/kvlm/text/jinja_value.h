#pragma once
// The value model of the Jinja interpreter. Values follow Python's semantics as jinja2 sees
// them (truthiness, equality, ordering, str() and repr()), because chat templates are written
// against jinja2 and the prompt must come out byte-for-byte as transformers renders it.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#include "kvlm/base/json.h"

namespace kvlm::jinja {

// An error raised while rendering. `line` is 0 until the interpreter attaches the line of the
// expression or statement that failed.
class RenderError : public std::exception {
 public:
  explicit RenderError(std::string message, int line = 0) : message_(std::move(message)), line_(line) {}
  const char* what() const noexcept override { return message_.c_str(); }
  const std::string& message() const { return message_; }
  int line() const { return line_; }

 private:
  std::string message_;
  int line_;
};

// raise_exception(...) from the template itself; its message is passed through unchanged.
class TemplateRaised : public std::exception {
 public:
  explicit TemplateRaised(std::string message) : message_(std::move(message)) {}
  const char* what() const noexcept override { return message_.c_str(); }

 private:
  std::string message_;
};

struct Value;
struct List;
class Dict;
struct Function;
struct Namespace;
class Interpreter;

struct Undefined {
  std::string hint;  // why it is undefined, e.g. "'foo' is undefined"
};
struct None {};

using ListPtr = std::shared_ptr<const List>;
using DictPtr = std::shared_ptr<const Dict>;
using FunctionPtr = std::shared_ptr<const Function>;
using NamespacePtr = std::shared_ptr<Namespace>;

struct Value {
  std::variant<Undefined, None, bool, int64_t, double, std::string, ListPtr, DictPtr, FunctionPtr,
               NamespacePtr>
      v;

  Value() : v(Undefined{}) {}
  Value(None) : v(None{}) {}
  Value(Undefined u) : v(std::move(u)) {}
  Value(bool b) : v(b) {}
  Value(int64_t i) : v(i) {}
  Value(int i) : v(int64_t(i)) {}
  Value(double d) : v(d) {}
  Value(std::string s) : v(std::move(s)) {}
  Value(const char* s) : v(std::string(s)) {}
  Value(List l);  // defined below, once List and Dict are complete
  Value(Dict d);
  Value(FunctionPtr f) : v(std::move(f)) {}
  Value(NamespacePtr n) : v(std::move(n)) {}

  bool is_undefined() const { return std::holds_alternative<Undefined>(v); }
  bool is_none() const { return std::holds_alternative<None>(v); }
  bool is_bool() const { return std::holds_alternative<bool>(v); }
  bool is_int() const { return std::holds_alternative<int64_t>(v); }  // not bool
  bool is_float() const { return std::holds_alternative<double>(v); }
  bool is_number() const { return is_int() || is_float() || is_bool(); }
  bool is_string() const { return std::holds_alternative<std::string>(v); }
  bool is_list() const { return std::holds_alternative<ListPtr>(v); }
  bool is_dict() const { return std::holds_alternative<DictPtr>(v); }
  bool is_function() const { return std::holds_alternative<FunctionPtr>(v); }
  bool is_namespace() const { return std::holds_alternative<NamespacePtr>(v); }

  const std::string& str() const { return std::get<std::string>(v); }
  const List& list() const { return *std::get<ListPtr>(v); }
  const Dict& dict() const { return *std::get<DictPtr>(v); }
  const Function& function() const { return *std::get<FunctionPtr>(v); }
  Namespace& ns() const { return *std::get<NamespacePtr>(v); }
  const Undefined& undefined() const { return std::get<Undefined>(v); }
};

struct List {
  std::vector<Value> items;
  bool is_tuple = false;  // only changes repr: (a, b) instead of [a, b]
};

// An insertion-ordered string-keyed mapping (Python dicts keep insertion order, and tojson must
// keep the key order of the caller's JSON).
class Dict {
 public:
  const Value* find(std::string_view key) const;
  void set(std::string key, Value value);
  size_t size() const { return entries_.size(); }
  const std::vector<std::pair<std::string, Value>>& entries() const { return entries_; }

 private:
  std::vector<std::pair<std::string, Value>> entries_;
  std::unordered_map<std::string, size_t> index_;
};

// Arguments of a call: positional, then keyword in the order written.
struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
};

struct Function {
  std::string name;
  std::function<Value(Interpreter&, CallArgs&)> call;
};

// namespace() objects: the one mutable value, shared by reference like in Python.
struct Namespace {
  Dict attrs;
};

inline Value::Value(List l) : v(std::make_shared<const List>(std::move(l))) {}
inline Value::Value(Dict d) : v(std::make_shared<const Dict>(std::move(d))) {}

Value make_function(std::string name, std::function<Value(Interpreter&, CallArgs&)> fn);
Value make_tuple(std::vector<Value> items);

// Python's type name as jinja2 prints it in errors ("dict object", "str object", ...).
std::string type_name(const Value& v);

bool truthy(const Value& v);
// Python ==.
bool equals(const Value& a, const Value& b);
// Python <, for ints/floats/bools, strings and sequences; other pairs raise like Python does.
bool less(const Value& a, const Value& b);
// Numeric view of int, float or bool (Python treats bool as int).
double as_double(const Value& v);
int64_t as_int(const Value& v);

// Python str() and repr() as used when jinja2 renders `{{ x }}`; Undefined renders "".
std::string to_str(const Value& v);
std::string repr(const Value& v);
std::string float_repr(double d);
std::string string_repr(std::string_view s);

// json.dumps with ensure_ascii=False (transformers' tojson): `indent` < 0 means none;
// `indent_str` overrides the indent unit when non-empty.
struct JsonStyle {
  int indent = -1;
  std::string indent_str;
  std::string item_sep, key_sep;  // empty: Python's defaults for the indent setting
  bool sort_keys = false;
};
std::string to_json(const Value& v, const JsonStyle& style);

// JSON to values; with nlohmann::ordered_json input, dict key order is the document's order.
Value from_json(const Json& j);
Value from_json(const nlohmann::ordered_json& j);

// The items a for loop visits: list items, dict keys, string characters (code points).
std::vector<Value> iterate(const Value& v);
// len(); raises for values without a length.
int64_t length(const Value& v);

// UTF-8 helpers for Python's code point indexing.
std::vector<std::string> utf8_chars(std::string_view s);

}  // namespace kvlm::jinja
