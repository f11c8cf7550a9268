#pragma once
// Syntax tree of a parsed template. Nodes evaluate themselves against an Interpreter
// (jinja_interp.cpp); every node keeps its source line for error messages.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kvlm/text/jinja_value.h"

namespace kvlm::jinja {

struct Expr {
  explicit Expr(int l) : line(l) {}
  virtual ~Expr() = default;
  // Evaluates and, on a RenderError without a line, attaches this node's line.
  Value eval(Interpreter& in) const;
  int line;

 protected:
  virtual Value evaluate(Interpreter& in) const = 0;
};
using ExprPtr = std::unique_ptr<Expr>;

struct Stmt {
  explicit Stmt(int l) : line(l) {}
  virtual ~Stmt() = default;
  void exec(Interpreter& in) const;
  int line;

 protected:
  virtual void execute(Interpreter& in) const = 0;
};
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct KeywordArg {
  std::string name;
  ExprPtr value;
};
struct Args {
  std::vector<ExprPtr> positional;
  std::vector<KeywordArg> keyword;
};

// ---- expressions ----
struct Literal : Expr {
  Literal(int l, Value v) : Expr(l), value(std::move(v)) {}
  Value value;
  Value evaluate(Interpreter& in) const override;
};
struct NameRef : Expr {
  NameRef(int l, std::string n) : Expr(l), name(std::move(n)) {}
  std::string name;
  Value evaluate(Interpreter& in) const override;
};
struct ListExpr : Expr {
  ListExpr(int l, bool tuple) : Expr(l), is_tuple(tuple) {}
  bool is_tuple;
  std::vector<ExprPtr> items;
  Value evaluate(Interpreter& in) const override;
};
struct DictExpr : Expr {
  using Expr::Expr;
  std::vector<std::pair<ExprPtr, ExprPtr>> items;
  Value evaluate(Interpreter& in) const override;
};
struct GetAttr : Expr {
  GetAttr(int l, ExprPtr o, std::string n) : Expr(l), obj(std::move(o)), name(std::move(n)) {}
  ExprPtr obj;
  std::string name;
  Value evaluate(Interpreter& in) const override;
};
struct GetItem : Expr {
  GetItem(int l, ExprPtr o, ExprPtr k) : Expr(l), obj(std::move(o)), key(std::move(k)) {}
  ExprPtr obj, key;
  Value evaluate(Interpreter& in) const override;
};
struct SliceExpr : Expr {
  using Expr::Expr;
  ExprPtr obj, start, stop, step;  // any bound may be null
  Value evaluate(Interpreter& in) const override;
};
struct CallExpr : Expr {
  using Expr::Expr;
  ExprPtr callee;
  Args args;
  Value evaluate(Interpreter& in) const override;
};
struct FilterExpr : Expr {
  using Expr::Expr;
  ExprPtr obj;  // null inside {% filter %} blocks and block sets, where the body is the input
  std::string name;
  Args args;
  Value evaluate(Interpreter& in) const override;
  Value apply(Interpreter& in, Value input) const;
};
struct TestExpr : Expr {
  using Expr::Expr;
  ExprPtr obj;
  std::string name;
  Args args;
  bool negated = false;
  Value evaluate(Interpreter& in) const override;
};
struct UnaryExpr : Expr {
  UnaryExpr(int l, std::string o, ExprPtr x) : Expr(l), op(std::move(o)), operand(std::move(x)) {}
  std::string op;  // "not", "-", "+"
  ExprPtr operand;
  Value evaluate(Interpreter& in) const override;
};
struct BinaryExpr : Expr {
  BinaryExpr(int l, std::string o, ExprPtr a, ExprPtr b)
      : Expr(l), op(std::move(o)), left(std::move(a)), right(std::move(b)) {}
  std::string op;  // + - * / // % ** ~ and or
  ExprPtr left, right;
  Value evaluate(Interpreter& in) const override;
};
struct CompareExpr : Expr {
  using Expr::Expr;
  ExprPtr first;
  std::vector<std::pair<std::string, ExprPtr>> rest;  // ==, !=, <, <=, >, >=, in, notin
  Value evaluate(Interpreter& in) const override;
};
struct CondExpr : Expr {
  using Expr::Expr;
  ExprPtr cond, then, otherwise;  // otherwise may be null: the result is then undefined
  Value evaluate(Interpreter& in) const override;
};

// ---- statements ----
// An assignment target: a name, a namespace attribute (ns.attr) or a tuple of names.
struct Target {
  std::vector<std::string> names;  // one name, or several for tuple unpacking
  std::string attr;                // non-empty for ns.attr
  bool is_tuple = false;
};

struct OutputStmt : Stmt {
  OutputStmt(int l, std::string t) : Stmt(l), text(std::move(t)) {}
  std::string text;
  void execute(Interpreter& in) const override;
};
struct PrintStmt : Stmt {
  PrintStmt(int l, ExprPtr e) : Stmt(l), expr(std::move(e)) {}
  ExprPtr expr;
  void execute(Interpreter& in) const override;
};
struct IfStmt : Stmt {
  using Stmt::Stmt;
  std::vector<std::pair<ExprPtr, Body>> branches;
  Body otherwise;
  void execute(Interpreter& in) const override;
};
struct ForStmt : Stmt {
  using Stmt::Stmt;
  Target target;
  ExprPtr iter, filter;
  Body body, otherwise;
  void execute(Interpreter& in) const override;
};
struct SetStmt : Stmt {
  using Stmt::Stmt;
  Target target;
  ExprPtr value;                               // {% set x = value %}
  Body body;                                   // {% set x %}body{% endset %}
  std::vector<std::unique_ptr<FilterExpr>> filters;  // {% set x | f %}
  void execute(Interpreter& in) const override;
};
struct Param {
  std::string name;
  ExprPtr default_value;  // may be null
};
struct MacroStmt : Stmt {
  using Stmt::Stmt;
  std::string name;
  std::vector<Param> params;
  Body body;
  void execute(Interpreter& in) const override;
};
struct CallBlockStmt : Stmt {
  using Stmt::Stmt;
  std::unique_ptr<CallExpr> call;
  std::vector<Param> caller_params;
  Body body;
  void execute(Interpreter& in) const override;
};
struct FilterBlockStmt : Stmt {
  using Stmt::Stmt;
  std::vector<std::unique_ptr<FilterExpr>> filters;
  Body body;
  void execute(Interpreter& in) const override;
};
struct WithStmt : Stmt {
  using Stmt::Stmt;
  std::vector<std::pair<std::string, ExprPtr>> assignments;
  Body body;
  void execute(Interpreter& in) const override;
};
struct ScopeStmt : Stmt {  // {% generation %}: renders its body unchanged
  using Stmt::Stmt;
  Body body;
  void execute(Interpreter& in) const override;
};
struct LoopControlStmt : Stmt {
  LoopControlStmt(int l, bool b) : Stmt(l), is_break(b) {}
  bool is_break;
  void execute(Interpreter& in) const override;
};

}  // namespace kvlm::jinja
