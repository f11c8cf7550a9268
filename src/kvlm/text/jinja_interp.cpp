// Evaluation of the syntax tree with jinja2's semantics.
#include "kvlm/text/jinja_interp.h"

#include <cmath>
#include <set>

#include "kvlm/base/error.h"
#include "kvlm/text/jinja_lexer.h"
#include "kvlm/text/jinja_parser.h"

namespace kvlm::jinja {

// ---------------------------------------------------------------- interpreter core

Value Interpreter::lookup(const std::string& name) const {
  for (const Scope* s = scope_.get(); s; s = s->parent.get()) {
    auto it = s->vars.find(name);
    if (it != s->vars.end()) return it->second;
  }
  return Value(Undefined{"'" + name + "' is undefined"});
}

void Interpreter::step() {
  if (++steps_ > limits_.max_steps)
    throw RenderError("template exceeded " + std::to_string(limits_.max_steps) + " steps");
}

void Interpreter::check_size(size_t bytes) const {
  if (bytes > limits_.max_output)
    throw RenderError("template output exceeds " + std::to_string(limits_.max_output) + " bytes");
}

void Interpreter::write(std::string_view text) {
  check_size(out_.size() + text.size());
  out_ += text;
}

void Interpreter::run(const Body& body) {
  for (const auto& stmt : body) {
    stmt->exec(*this);
    if (flow != Flow::kNormal) return;
  }
}

std::string Interpreter::capture(const Body& body, ScopePtr parent) {
  auto s = std::make_shared<Scope>();
  s->parent = std::move(parent);
  ScopeGuard guard(*this, std::move(s));
  std::string saved = std::move(out_);
  out_.clear();
  try {
    run(body);
  } catch (...) {
    out_ = std::move(saved);
    throw;
  }
  std::string captured = std::move(out_);
  out_ = std::move(saved);
  return captured;
}

Value Interpreter::call(const Value& callee, CallArgs& args) {
  if (callee.is_function()) {
    DepthGuard depth(*this);
    return callee.function().call(*this, args);
  }
  if (callee.is_undefined()) raise_undefined(callee);
  throw RenderError("'" + type_name(callee) + "' object is not callable");
}

void raise_undefined(const Value& v) {
  const std::string& hint = v.undefined().hint;
  throw RenderError(hint.empty() ? "value is undefined" : hint);
}

// ---------------------------------------------------------------- attribute and item access

static Value no_attribute(const Value& obj, const std::string& what) {
  if (obj.is_none()) return Value(Undefined{"'None' has no attribute " + what});
  return Value(Undefined{"'" + type_name(obj) + " object' has no attribute " + what});
}

Value get_attr(const Value& obj, const std::string& name) {
  if (obj.is_undefined()) raise_undefined(obj);
  if (obj.is_namespace()) {
    const Value* v = obj.ns().attrs.find(name);
    return v ? *v : no_attribute(obj, "'" + name + "'");
  }
  Value method = bound_method(obj, name);
  if (!method.is_undefined()) return method;
  // jinja2's immutable sandbox refuses methods that would mutate a list or dict.
  static const std::set<std::string> mutators = {"append", "extend", "insert", "pop", "remove", "clear",
                                                  "sort", "reverse", "update", "setdefault", "popitem"};
  if ((obj.is_list() || obj.is_dict()) && mutators.count(name) && !(obj.is_dict() && obj.dict().find(name)))
    return Value(Undefined{"access to attribute '" + name + "' of '" + type_name(obj) + "' object is unsafe."});
  if (obj.is_dict()) {
    const Value* v = obj.dict().find(name);
    if (v) return *v;
  }
  return no_attribute(obj, "'" + name + "'");
}

// Python's index normalisation; nullopt when out of range.
static std::optional<size_t> normalize_index(int64_t i, size_t n) {
  if (i < 0) i += int64_t(n);
  if (i < 0 || i >= int64_t(n)) return std::nullopt;
  return size_t(i);
}

Value get_item(const Value& obj, const Value& key) {
  if (obj.is_undefined()) raise_undefined(obj);
  if (obj.is_dict() && key.is_string()) {
    const Value* v = obj.dict().find(key.str());
    if (v) return *v;
  }
  if ((obj.is_list() || obj.is_string()) && (key.is_int() || key.is_bool())) {
    if (obj.is_list()) {
      auto i = normalize_index(as_int(key), obj.list().items.size());
      if (i) return obj.list().items[*i];
    } else {
      auto chars = utf8_chars(obj.str());
      auto i = normalize_index(as_int(key), chars.size());
      if (i) return Value(chars[*i]);
    }
  }
  if (key.is_string()) return get_attr(obj, key.str());
  return no_attribute(obj, repr(key));
}

// ---------------------------------------------------------------- argument binding

ArgBinder::ArgBinder(const std::string& fn, CallArgs& args, std::initializer_list<const char*> names)
    : bound_(names.size(), nullptr) {
  std::vector<const char*> params(names);
  if (args.positional.size() > params.size())
    throw RenderError(fn + "() takes at most " + std::to_string(params.size()) + " arguments (" +
                      std::to_string(args.positional.size()) + " given)");
  for (size_t i = 0; i < args.positional.size(); ++i) bound_[i] = &args.positional[i];
  for (const auto& [name, value] : args.keyword) {
    size_t i = 0;
    while (i < params.size() && name != params[i]) ++i;
    if (i == params.size()) throw RenderError(fn + "() got an unexpected keyword argument '" + name + "'");
    if (bound_[i]) throw RenderError(fn + "() got multiple values for argument '" + name + "'");
    bound_[i] = &value;
  }
}

const Value& ArgBinder::get(size_t i) const {
  static const Value undefined;
  return bound_[i] ? *bound_[i] : undefined;
}

// ---------------------------------------------------------------- expressions

Value Expr::eval(Interpreter& in) const {
  Interpreter::DepthGuard depth(in);
  in.step();
  try {
    return evaluate(in);
  } catch (const RenderError& e) {
    if (e.line() == 0) throw RenderError(e.message(), line);
    throw;
  }
}

Value Literal::evaluate(Interpreter&) const { return value; }

Value NameRef::evaluate(Interpreter& in) const { return in.lookup(name); }

Value ListExpr::evaluate(Interpreter& in) const {
  List l;
  l.is_tuple = is_tuple;
  for (const auto& e : items) l.items.push_back(e->eval(in));
  return Value(std::move(l));
}

Value DictExpr::evaluate(Interpreter& in) const {
  Dict d;
  for (const auto& [k, v] : items) {
    Value key = k->eval(in);
    if (!key.is_string()) throw RenderError("dict keys must be strings in this implementation, got " + type_name(key));
    d.set(key.str(), v->eval(in));
  }
  return Value(std::move(d));
}

Value GetAttr::evaluate(Interpreter& in) const { return get_attr(obj->eval(in), name); }

Value GetItem::evaluate(Interpreter& in) const {
  Value o = obj->eval(in);
  return get_item(o, key->eval(in));
}

// Python slice bounds (start, stop, step) resolved for a sequence of length n.
static std::vector<size_t> slice_indices(const Value& start, const Value& stop, const Value& step, size_t n) {
  int64_t st = step.is_none() || step.is_undefined() ? 1 : as_int(step);
  if (st == 0) throw RenderError("slice step cannot be zero");
  int64_t len = int64_t(n);
  auto clamp = [&](const Value& v, int64_t dflt) -> int64_t {
    if (v.is_none() || v.is_undefined()) return dflt;
    int64_t i = as_int(v);
    if (i < 0) i += len;
    if (st > 0) return std::clamp<int64_t>(i, 0, len);
    return std::clamp<int64_t>(i, -1, len - 1);
  };
  int64_t b = clamp(start, st > 0 ? 0 : len - 1);
  int64_t e = clamp(stop, st > 0 ? len : -1);
  std::vector<size_t> out;
  for (int64_t i = b; st > 0 ? i < e : i > e; i += st) out.push_back(size_t(i));
  return out;
}

Value SliceExpr::evaluate(Interpreter& in) const {
  Value o = obj->eval(in);
  auto bound = [&](const ExprPtr& e) { return e ? e->eval(in) : Value(None{}); };
  Value b = bound(start), e = bound(stop), s = bound(step);
  if (o.is_undefined()) raise_undefined(o);
  if (o.is_string()) {
    auto chars = utf8_chars(o.str());
    std::string out;
    for (size_t i : slice_indices(b, e, s, chars.size())) out += chars[i];
    return Value(std::move(out));
  }
  if (o.is_list()) {
    List l;
    l.is_tuple = o.list().is_tuple;
    for (size_t i : slice_indices(b, e, s, o.list().items.size())) l.items.push_back(o.list().items[i]);
    return Value(std::move(l));
  }
  throw RenderError("'" + type_name(o) + "' object is not subscriptable");
}

static CallArgs eval_args(Interpreter& in, const Args& args) {
  CallArgs out;
  for (const auto& e : args.positional) out.positional.push_back(e->eval(in));
  for (const auto& k : args.keyword) out.keyword.emplace_back(k.name, k.value->eval(in));
  return out;
}

Value CallExpr::evaluate(Interpreter& in) const {
  Value f = callee->eval(in);
  CallArgs args = eval_args(in, this->args);
  return in.call(f, args);
}

Value FilterExpr::evaluate(Interpreter& in) const { return apply(in, obj->eval(in)); }

Value FilterExpr::apply(Interpreter& in, Value input) const {
  FilterFn fn = find_filter(name);
  if (!fn) throw RenderError("unsupported filter '" + name + "'", line);
  CallArgs a = eval_args(in, args);
  try {
    return fn(in, input, a);
  } catch (const RenderError& e) {
    if (e.line() == 0) throw RenderError(e.message(), line);
    throw;
  }
}

Value TestExpr::evaluate(Interpreter& in) const {
  TestFn fn = find_test(name);
  if (!fn) throw RenderError("unsupported test '" + name + "'");
  Value v = obj->eval(in);
  CallArgs a = eval_args(in, args);
  return Value(fn(in, v, a) != negated);
}

Value UnaryExpr::evaluate(Interpreter& in) const {
  Value v = operand->eval(in);
  if (op == "not") return Value(!truthy(v));
  if (v.is_undefined()) raise_undefined(v);
  if (!v.is_number()) throw RenderError("bad operand type for unary " + op + ": '" + type_name(v) + "'");
  if (op == "+") return v.is_bool() ? Value(as_int(v)) : v;
  if (v.is_float()) return Value(-std::get<double>(v.v));
  int64_t i = as_int(v);
  if (i == INT64_MIN) throw RenderError("integer overflow");
  return Value(-i);
}

// ---- arithmetic with Python semantics ----

[[noreturn]] static void bad_operands(const std::string& op, const Value& a, const Value& b) {
  throw RenderError("unsupported operand type(s) for " + op + ": '" + type_name(a) + "' and '" + type_name(b) + "'");
}

// Integer ops that raise instead of wrapping (Python ints do not overflow; kvlm refuses).
static int64_t add_checked(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) throw RenderError("integer overflow");
  return r;
}
static int64_t sub_checked(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_sub_overflow(a, b, &r)) throw RenderError("integer overflow");
  return r;
}
static int64_t mul_checked(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) throw RenderError("integer overflow");
  return r;
}

static Value repeat(Interpreter& in, const Value& seq, int64_t n) {
  if (n < 0) n = 0;
  if (seq.is_string()) {
    in.check_size(seq.str().size() * uint64_t(n));
    std::string out;
    for (int64_t i = 0; i < n; ++i) out += seq.str();
    return Value(std::move(out));
  }
  in.check_size(seq.list().items.size() * uint64_t(n));
  List l;
  l.is_tuple = seq.list().is_tuple;
  for (int64_t i = 0; i < n; ++i)
    l.items.insert(l.items.end(), seq.list().items.begin(), seq.list().items.end());
  return Value(std::move(l));
}

static double py_fmod(double a, double b) {
  double m = std::fmod(a, b);
  if (m != 0 && ((m < 0) != (b < 0))) m += b;
  return m;
}

static Value arithmetic(Interpreter& in, const std::string& op, const Value& a, const Value& b) {
  if (a.is_undefined()) raise_undefined(a);
  if (b.is_undefined()) raise_undefined(b);
  if (a.is_number() && b.is_number()) {
    bool ints = !a.is_float() && !b.is_float();
    double x = as_double(a), y = as_double(b);
    if (op == "+") return ints ? Value(add_checked(as_int(a), as_int(b))) : Value(x + y);
    if (op == "-") return ints ? Value(sub_checked(as_int(a), as_int(b))) : Value(x - y);
    if (op == "*") return ints ? Value(mul_checked(as_int(a), as_int(b))) : Value(x * y);
    if (op == "/") {
      if (y == 0) throw RenderError("division by zero");
      return Value(x / y);
    }
    if (op == "//" || op == "%") {
      if (y == 0) throw RenderError(ints ? "integer division or modulo by zero" : "float modulo");
      if (ints) {
        int64_t p = as_int(a), q = as_int(b);
        if (p == INT64_MIN && q == -1) throw RenderError("integer overflow");
        int64_t d = p / q, m = p % q;
        if (m != 0 && ((m < 0) != (q < 0))) {
          --d;
          m += q;
        }
        return op == "//" ? Value(d) : Value(m);
      }
      return op == "//" ? Value(std::floor(x / y)) : Value(py_fmod(x, y));
    }
    if (op == "**") {
      if (ints && as_int(b) >= 0) {
        // Exponentiation by squaring; squaring only while bits remain, so an overflow there
        // implies the result overflows too.
        int64_t base = as_int(a), e = as_int(b), acc = 1;
        while (e > 0) {
          if (e & 1) acc = mul_checked(acc, base);
          e >>= 1;
          if (e) base = mul_checked(base, base);
        }
        return Value(acc);
      }
      if (x == 0 && y < 0) throw RenderError("0.0 cannot be raised to a negative power");
      return Value(std::pow(x, y));
    }
  }
  if (op == "+" && a.is_string() && b.is_string()) {
    in.check_size(a.str().size() + b.str().size());
    return Value(a.str() + b.str());
  }
  if (op == "+" && a.is_list() && b.is_list() && a.list().is_tuple == b.list().is_tuple) {
    List l = a.list();
    l.items.insert(l.items.end(), b.list().items.begin(), b.list().items.end());
    return Value(std::move(l));
  }
  if (op == "*" && (a.is_string() || a.is_list()) && (b.is_int() || b.is_bool())) return repeat(in, a, as_int(b));
  if (op == "*" && (b.is_string() || b.is_list()) && (a.is_int() || a.is_bool())) return repeat(in, b, as_int(a));
  if (op == "%" && a.is_string()) return Value(py_percent_format(in, a.str(), b));
  bad_operands(op, a, b);
}

Value BinaryExpr::evaluate(Interpreter& in) const {
  if (op == "and") {
    Value l = left->eval(in);
    return truthy(l) ? right->eval(in) : l;
  }
  if (op == "or") {
    Value l = left->eval(in);
    return truthy(l) ? l : right->eval(in);
  }
  Value l = left->eval(in);
  Value r = right->eval(in);
  if (op == "~") {
    std::string s = to_str(l);
    s += to_str(r);
    in.check_size(s.size());
    return Value(std::move(s));
  }
  return arithmetic(in, op, l, r);
}

// Python `needle in haystack`.
static bool contains(const Value& haystack, const Value& needle) {
  if (haystack.is_string()) {
    if (!needle.is_string())
      throw RenderError("'in <string>' requires string as left operand, not " + type_name(needle));
    return haystack.str().find(needle.str()) != std::string::npos;
  }
  if (haystack.is_dict()) return needle.is_string() && haystack.dict().find(needle.str());
  if (haystack.is_list() || haystack.is_undefined()) {
    for (const Value& v : iterate(haystack))
      if (equals(v, needle)) return true;
    return false;
  }
  if (haystack.is_namespace()) return needle.is_string() && haystack.ns().attrs.find(needle.str());
  throw RenderError("argument of type '" + type_name(haystack) + "' is not iterable");
}

static bool compare(const std::string& op, const Value& a, const Value& b) {
  if (op == "==") return equals(a, b);
  if (op == "!=") return !equals(a, b);
  if (op == "in") return contains(b, a);
  if (op == "notin") return !contains(b, a);
  if (a.is_undefined()) raise_undefined(a);
  if (b.is_undefined()) raise_undefined(b);
  if (op == "<") return less(a, b);
  if (op == ">") return less(b, a);
  if (op == "<=") return !less(b, a);
  return !less(a, b);  // >=
}

Value CompareExpr::evaluate(Interpreter& in) const {
  Value left = first->eval(in);
  for (const auto& [op, expr] : rest) {
    Value right = expr->eval(in);
    if (!compare(op, left, right)) return Value(false);
    left = std::move(right);
  }
  return Value(true);
}

Value CondExpr::evaluate(Interpreter& in) const {
  if (truthy(cond->eval(in))) return then->eval(in);
  if (otherwise) return otherwise->eval(in);
  return Value(Undefined{"the inline if-expression evaluated to false and no else section was defined"});
}

// ---------------------------------------------------------------- statements

void Stmt::exec(Interpreter& in) const {
  Interpreter::DepthGuard depth(in);
  in.step();
  try {
    execute(in);
  } catch (const RenderError& e) {
    if (e.line() == 0) throw RenderError(e.message(), line);
    throw;
  }
}

void OutputStmt::execute(Interpreter& in) const { in.write(text); }

void PrintStmt::execute(Interpreter& in) const { in.write(to_str(expr->eval(in))); }

void IfStmt::execute(Interpreter& in) const {
  for (const auto& [cond, body] : branches) {
    if (truthy(cond->eval(in))) {
      in.run(body);
      return;
    }
  }
  in.run(otherwise);
}

// Binds a for/set target: one name, or tuple unpacking.
static void bind_target(Interpreter& in, const Target& target, const Value& value) {
  if (!target.is_tuple) {
    in.assign(target.names[0], value);
    return;
  }
  std::vector<Value> items = iterate(value);
  if (items.size() != target.names.size())
    throw RenderError(items.size() > target.names.size()
                          ? "too many values to unpack (expected " + std::to_string(target.names.size()) + ")"
                          : "not enough values to unpack (expected " + std::to_string(target.names.size()) +
                                ", got " + std::to_string(items.size()) + ")");
  for (size_t i = 0; i < items.size(); ++i) in.assign(target.names[i], items[i]);
}

// The `loop` variable of one iteration.
static Value loop_object(const std::vector<Value>& items, size_t i) {
  Dict d;
  int64_t n = int64_t(items.size()), k = int64_t(i);
  d.set("index", Value(k + 1));
  d.set("index0", Value(k));
  d.set("revindex", Value(n - k));
  d.set("revindex0", Value(n - k - 1));
  d.set("first", Value(i == 0));
  d.set("last", Value(k == n - 1));
  d.set("length", Value(n));
  d.set("depth", Value(1));
  d.set("depth0", Value(0));
  d.set("previtem", i > 0 ? items[i - 1] : Value(Undefined{"there is no previous item"}));
  d.set("nextitem", k + 1 < n ? items[i + 1] : Value(Undefined{"there is no next item"}));
  d.set("cycle", make_function("cycle", [k](Interpreter&, CallArgs& args) -> Value {
          if (args.positional.empty()) throw RenderError("no items for cycling given");
          return args.positional[size_t(k) % args.positional.size()];
        }));
  return Value(std::move(d));
}

void ForStmt::execute(Interpreter& in) const {
  Value seq = iter->eval(in);
  std::vector<Value> all = iterate(seq);
  std::vector<Value> items;
  if (filter) {
    for (const Value& v : all) {
      in.step();
      Interpreter::ScopeGuard guard(in, in.child_scope());
      bind_target(in, target, v);
      if (truthy(filter->eval(in))) items.push_back(v);
    }
  } else {
    items = std::move(all);
  }
  if (items.empty()) {
    in.run(otherwise);
    return;
  }
  for (size_t i = 0; i < items.size(); ++i) {
    in.step();
    Interpreter::ScopeGuard guard(in, in.child_scope());
    bind_target(in, target, items[i]);
    in.assign("loop", loop_object(items, i));
    in.run(body);
    if (in.flow == Interpreter::Flow::kBreak) {
      in.flow = Interpreter::Flow::kNormal;
      break;
    }
    in.flow = Interpreter::Flow::kNormal;
  }
}

static Value apply_filters(Interpreter& in, const std::vector<std::unique_ptr<FilterExpr>>& filters, Value v) {
  for (const auto& f : filters) v = f->apply(in, std::move(v));
  return v;
}

void SetStmt::execute(Interpreter& in) const {
  Value v = value ? value->eval(in) : apply_filters(in, filters, Value(in.capture(body, in.scope())));
  if (target.attr.empty()) {
    bind_target(in, target, v);
    return;
  }
  Value ns = in.lookup(target.names[0]);
  if (!ns.is_namespace()) throw RenderError("cannot assign attribute on non-namespace object");
  ns.ns().attrs.set(target.attr, std::move(v));
}

// Runs a macro or caller body: parameters bound in a fresh scope under `closure`.
static Value invoke_body(Interpreter& in, const std::string& name, const std::vector<Param>& params,
                         const Body& body, const ScopePtr& closure, CallArgs& args, const Value* caller) {
  auto scope = std::make_shared<Scope>();
  scope->parent = closure;
  Interpreter::ScopeGuard guard(in, scope);
  List varargs;
  varargs.is_tuple = true;
  for (size_t i = 0; i < args.positional.size(); ++i) {
    if (i < params.size()) {
      scope->vars[params[i].name] = args.positional[i];
    } else {
      varargs.items.push_back(args.positional[i]);
    }
  }
  Dict kwargs;
  for (auto& [k, v] : args.keyword) {
    bool is_param = false;
    for (const auto& p : params) is_param |= p.name == k;
    if (!is_param) {
      kwargs.set(k, v);
      continue;
    }
    if (scope->vars.count(k)) throw RenderError("macro '" + name + "' got multiple values for argument '" + k + "'");
    scope->vars[k] = v;
  }
  for (const auto& p : params) {
    if (scope->vars.count(p.name)) continue;
    scope->vars[p.name] = p.default_value ? p.default_value->eval(in)
                                          : Value(Undefined{"parameter '" + p.name + "' was not provided"});
  }
  scope->vars["varargs"] = Value(std::move(varargs));
  scope->vars["kwargs"] = Value(std::move(kwargs));
  if (caller) scope->vars["caller"] = *caller;
  Interpreter::Flow saved = in.flow;
  std::string out = in.capture(body, scope);
  in.flow = saved;
  return Value(std::move(out));
}

void MacroStmt::execute(Interpreter& in) const {
  ScopePtr closure = in.scope();
  const MacroStmt* self = this;
  // The closure holds the defining scope; the macro value lives in that scope too, so the
  // function keeps only a weak reference to avoid a reference cycle.
  std::weak_ptr<Scope> weak = closure;
  in.assign(name, make_function(name, [self, weak](Interpreter& in, CallArgs& args) -> Value {
              ScopePtr scope = weak.lock();
              if (!scope) throw RenderError("macro '" + self->name + "' called outside its scope");
              const Value* caller = nullptr;
              Value caller_value;
              for (auto it = args.keyword.begin(); it != args.keyword.end(); ++it) {
                if (it->first == "caller") {
                  caller_value = it->second;
                  caller = &caller_value;
                  args.keyword.erase(it);
                  break;
                }
              }
              return invoke_body(in, self->name, self->params, self->body, scope, args, caller);
            }));
}

void CallBlockStmt::execute(Interpreter& in) const {
  std::weak_ptr<Scope> weak = in.scope();
  const CallBlockStmt* self = this;
  // Weak for the same reason as macros: a caller stored in a namespace must not keep its
  // defining scope alive in a cycle.
  Value caller = make_function("caller", [self, weak](Interpreter& in, CallArgs& args) -> Value {
    ScopePtr closure = weak.lock();
    if (!closure) throw RenderError("caller() called outside its call block");
    return invoke_body(in, "caller", self->caller_params, self->body, closure, args, nullptr);
  });
  Value f = call->callee->eval(in);
  CallArgs args;
  for (const auto& e : call->args.positional) args.positional.push_back(e->eval(in));
  for (const auto& k : call->args.keyword) args.keyword.emplace_back(k.name, k.value->eval(in));
  args.keyword.emplace_back("caller", caller);
  in.write(to_str(in.call(f, args)));
}

void FilterBlockStmt::execute(Interpreter& in) const {
  in.write(to_str(apply_filters(in, filters, Value(in.capture(body, in.scope())))));
}

void WithStmt::execute(Interpreter& in) const {
  ScopePtr scope = in.child_scope();
  for (const auto& [name, expr] : assignments) scope->vars[name] = expr->eval(in);
  Interpreter::ScopeGuard guard(in, scope);
  in.run(body);
}

void ScopeStmt::execute(Interpreter& in) const { in.run(body); }

void LoopControlStmt::execute(Interpreter& in) const {
  in.flow = is_break ? Interpreter::Flow::kBreak : Interpreter::Flow::kContinue;
}

// ---------------------------------------------------------------- Template

Template::Template(std::string_view source) : body_(parse_template(source)) {}
Template::~Template() = default;

std::string Template::render(const std::vector<std::pair<std::string, Value>>& vars, const Limits& limits) const {
  auto globals = std::make_shared<Scope>();
  add_globals(*globals);
  auto root = std::make_shared<Scope>();
  root->parent = globals;
  for (const auto& [k, v] : vars) root->vars[k] = v;
  Interpreter in(limits, root);
  try {
    in.run(body_);
  } catch (const RenderError& e) {
    throw Error(line_prefix(e.line()) + e.message());
  } catch (const TemplateRaised& e) {
    throw Error(e.what());
  }
  return in.take_output();
}

}  // namespace kvlm::jinja
