// jinja2's builtin tests (`x is defined`, `x is divisibleby 3`, ...).
#include <map>

#include "kvlm/text/jinja_interp.h"

namespace kvlm::jinja {
namespace {

const Value& arg0(const char* name, CallArgs& a) {
  if (a.positional.empty() && a.keyword.empty())
    throw RenderError(std::string(name) + " test needs an argument");
  return a.positional.empty() ? a.keyword[0].second : a.positional[0];
}

bool t_defined(Interpreter&, const Value& v, CallArgs&) { return !v.is_undefined(); }
bool t_undefined(Interpreter&, const Value& v, CallArgs&) { return v.is_undefined(); }
bool t_none(Interpreter&, const Value& v, CallArgs&) { return v.is_none(); }
bool t_boolean(Interpreter&, const Value& v, CallArgs&) { return v.is_bool(); }
bool t_true(Interpreter&, const Value& v, CallArgs&) { return v.is_bool() && std::get<bool>(v.v); }
bool t_false(Interpreter&, const Value& v, CallArgs&) { return v.is_bool() && !std::get<bool>(v.v); }
bool t_integer(Interpreter&, const Value& v, CallArgs&) { return v.is_int(); }
bool t_float(Interpreter&, const Value& v, CallArgs&) { return v.is_float(); }
bool t_number(Interpreter&, const Value& v, CallArgs&) { return v.is_number(); }
bool t_string(Interpreter&, const Value& v, CallArgs&) { return v.is_string(); }
bool t_mapping(Interpreter&, const Value& v, CallArgs&) { return v.is_dict(); }
bool t_callable(Interpreter&, const Value& v, CallArgs&) { return v.is_function(); }
// Python iter() succeeds for strings, lists, dicts and jinja2's Undefined.
bool t_iterable(Interpreter&, const Value& v, CallArgs&) {
  return v.is_string() || v.is_list() || v.is_dict() || v.is_undefined();
}
// len() and [] both work: strings, lists, tuples and dicts.
bool t_sequence(Interpreter&, const Value& v, CallArgs&) { return v.is_string() || v.is_list() || v.is_dict(); }
bool t_escaped(Interpreter&, const Value&, CallArgs&) { return false; }
bool t_lower(Interpreter&, const Value& v, CallArgs&) {
  return v.is_string() && py_lower(v.str()) == v.str() && py_upper(v.str()) != v.str();
}
bool t_upper(Interpreter&, const Value& v, CallArgs&) {
  return v.is_string() && py_upper(v.str()) == v.str() && py_lower(v.str()) != v.str();
}
bool t_eq(Interpreter&, const Value& v, CallArgs& a) { return equals(v, arg0("eq", a)); }
bool t_ne(Interpreter&, const Value& v, CallArgs& a) { return !equals(v, arg0("ne", a)); }
bool t_lt(Interpreter&, const Value& v, CallArgs& a) { return less(v, arg0("lt", a)); }
bool t_gt(Interpreter&, const Value& v, CallArgs& a) { return less(arg0("gt", a), v); }
bool t_le(Interpreter&, const Value& v, CallArgs& a) { return !less(arg0("le", a), v); }
bool t_ge(Interpreter&, const Value& v, CallArgs& a) { return !less(v, arg0("ge", a)); }
bool t_sameas(Interpreter&, const Value& v, CallArgs& a) {
  const Value& o = arg0("sameas", a);
  // `is` identity for the singletons templates compare against; value identity otherwise.
  if (v.is_none() || o.is_none() || v.is_bool() || o.is_bool()) return v.v.index() == o.v.index() && equals(v, o);
  return equals(v, o) && v.v.index() == o.v.index();
}
bool t_in(Interpreter&, const Value& v, CallArgs& a) {
  const Value& seq = arg0("in", a);
  if (seq.is_string()) return v.is_string() && seq.str().find(v.str()) != std::string::npos;
  if (seq.is_dict()) return v.is_string() && seq.dict().find(v.str());
  for (const Value& x : iterate(seq))
    if (equals(x, v)) return true;
  return false;
}
int64_t integer_of(const Value& v, const char* test) {
  if (v.is_undefined()) raise_undefined(v);
  if (!v.is_int() && !v.is_bool()) throw RenderError(std::string(test) + " test needs an integer, got " + type_name(v));
  return as_int(v);
}
bool t_odd(Interpreter&, const Value& v, CallArgs&) { return integer_of(v, "odd") % 2 != 0; }
bool t_even(Interpreter&, const Value& v, CallArgs&) { return integer_of(v, "even") % 2 == 0; }
bool t_divisibleby(Interpreter&, const Value& v, CallArgs& a) {
  int64_t d = integer_of(arg0("divisibleby", a), "divisibleby");
  if (d == 0) throw RenderError("integer division or modulo by zero");
  if (d == -1) return true;
  return integer_of(v, "divisibleby") % d == 0;
}

const std::map<std::string, TestFn>& tests() {
  static const std::map<std::string, TestFn> table = {
      {"defined", t_defined},   {"undefined", t_undefined}, {"none", t_none},
      {"boolean", t_boolean},   {"true", t_true},           {"false", t_false},
      {"integer", t_integer},   {"float", t_float},         {"number", t_number},
      {"string", t_string},     {"mapping", t_mapping},     {"iterable", t_iterable},
      {"sequence", t_sequence}, {"callable", t_callable},   {"escaped", t_escaped},
      {"lower", t_lower},       {"upper", t_upper},         {"eq", t_eq},
      {"equalto", t_eq},        {"==", t_eq},               {"ne", t_ne},
      {"!=", t_ne},             {"lt", t_lt},               {"lessthan", t_lt},
      {"<", t_lt},              {"le", t_le},               {"<=", t_le},
      {"gt", t_gt},             {"greaterthan", t_gt},      {">", t_gt},
      {"ge", t_ge},             {">=", t_ge},               {"sameas", t_sameas},
      {"in", t_in},             {"odd", t_odd},             {"even", t_even},
      {"divisibleby", t_divisibleby},
  };
  return table;
}

}  // namespace

TestFn find_test(const std::string& name) {
  auto it = tests().find(name);
  return it == tests().end() ? nullptr : it->second;
}

}  // namespace kvlm::jinja
