#include "kvlm/text/jinja_parser.h"

#include <set>

#include "kvlm/base/error.h"
#include "kvlm/text/jinja_lexer.h"

namespace kvlm::jinja {
namespace {

// Nesting limit for expressions and blocks: deep enough for any real template, shallow enough
// that a hostile template cannot exhaust the stack.
constexpr int kMaxNesting = 128;

std::string describe(const Token& t) {
  switch (t.kind) {
    case Tok::kEof: return "end of template";
    case Tok::kData: return "template data";
    case Tok::kVarEnd: return "'}}'";
    case Tok::kBlockEnd: return "'%}'";
    case Tok::kString: return "string";
    case Tok::kInt:
    case Tok::kFloat: return "number '" + t.text + "'";
    default: return "'" + t.text + "'";
  }
}

class Parser {
 public:
  explicit Parser(std::vector<Token> toks) : t_(std::move(toks)) {}

  Body parse() {
    Body body = parse_body({});
    if (cur().kind != Tok::kEof) fail("unexpected " + describe(cur()));
    return body;
  }

 private:
  std::vector<Token> t_;
  size_t i_ = 0;
  int nesting_ = 0;

  struct Nest {
    Parser& p;
    explicit Nest(Parser& parser) : p(parser) {
      if (++p.nesting_ > kMaxNesting) p.fail("template nested too deeply");
    }
    ~Nest() { --p.nesting_; }
  };

  const Token& cur() const { return t_[i_]; }
  const Token& peek(size_t k = 1) const { return t_[std::min(i_ + k, t_.size() - 1)]; }
  Token take() { return t_[i_ < t_.size() - 1 ? i_++ : i_]; }
  [[noreturn]] void fail(const std::string& msg) const { throw Error(line_prefix(cur().line) + msg); }

  bool is_op(const char* op) const { return cur().kind == Tok::kOp && cur().text == op; }
  bool is_name(const char* n) const { return cur().kind == Tok::kName && cur().text == n; }
  bool accept_op(const char* op) {
    if (!is_op(op)) return false;
    ++i_;
    return true;
  }
  bool accept_name(const char* n) {
    if (!is_name(n)) return false;
    ++i_;
    return true;
  }
  void expect_op(const char* op) {
    if (!accept_op(op)) fail(std::string("expected '") + op + "', got " + describe(cur()));
  }
  std::string expect_name() {
    if (cur().kind != Tok::kName) fail("expected a name, got " + describe(cur()));
    return take().text;
  }
  void expect_block_end() {
    if (cur().kind != Tok::kBlockEnd) fail("expected '%}', got " + describe(cur()));
    ++i_;
  }

  // ---- statements ----

  // Parses statements until a block whose tag is in `ends` (left unconsumed: the caller reads
  // the tag) or the end of the template.
  // `block` and `block_line` name the statement being closed, for the error when it is not.
  Body parse_body(const std::set<std::string>& ends, const char* block = nullptr, int block_line = 0) {
    Nest nest(*this);
    Body body;
    while (true) {
      const Token& t = cur();
      if (t.kind == Tok::kEof) {
        if (block)
          fail("unexpected end of template: '" + std::string(block) + "' from line " + std::to_string(block_line) +
               " is never closed (expected 'end" + block + "')");
        return body;
      }
      if (t.kind == Tok::kData) {
        body.push_back(std::make_unique<OutputStmt>(t.line, t.text));
        ++i_;
      } else if (t.kind == Tok::kVarBegin) {
        ++i_;
        int line = cur().line;
        ExprPtr e = parse_tuple_or_expr();
        if (cur().kind != Tok::kVarEnd) fail("expected '}}', got " + describe(cur()));
        ++i_;
        body.push_back(std::make_unique<PrintStmt>(line, std::move(e)));
      } else if (t.kind == Tok::kBlockBegin) {
        const Token& tag = peek();
        if (tag.kind == Tok::kName && ends.count(tag.text)) {
          ++i_;
          return body;
        }
        ++i_;
        body.push_back(parse_statement());
      } else {
        fail("unexpected " + describe(t));
      }
    }
  }

  // After parse_body returned at an end tag: consumes the tag name and returns it.
  std::string end_tag() { return expect_name(); }

  StmtPtr parse_statement() {
    if (cur().kind != Tok::kName) fail("expected a statement name, got " + describe(cur()));
    int line = cur().line;
    std::string tag = take().text;
    if (tag == "if") return parse_if(line);
    if (tag == "for") return parse_for(line);
    if (tag == "set") return parse_set(line);
    if (tag == "macro") return parse_macro(line);
    if (tag == "call") return parse_call_block(line);
    if (tag == "filter") return parse_filter_block(line);
    if (tag == "with") return parse_with(line);
    if (tag == "generation") return parse_generation(line);
    if (tag == "break" || tag == "continue") {
      expect_block_end();
      return std::make_unique<LoopControlStmt>(line, tag == "break");
    }
    static const std::set<std::string> unsupported = {
        "include", "import", "from", "extends", "block", "do", "autoescape", "trans", "pluralize"};
    i_--;
    if (unsupported.count(tag)) fail("unsupported statement '" + tag + "'");
    if (tag.rfind("end", 0) == 0 || tag == "elif" || tag == "else") fail("unexpected '" + tag + "'");
    fail("unknown statement '" + tag + "'");
  }

  StmtPtr parse_if(int line) {
    auto node = std::make_unique<IfStmt>(line);
    ExprPtr cond = parse_tuple_or_expr();
    expect_block_end();
    while (true) {
      Body body = parse_body({"elif", "else", "endif"}, "if", line);
      node->branches.emplace_back(std::move(cond), std::move(body));
      std::string tag = end_tag();
      if (tag == "elif") {
        cond = parse_tuple_or_expr();
        expect_block_end();
        continue;
      }
      if (tag == "else") {
        expect_block_end();
        node->otherwise = parse_body({"endif"}, "if", line);
        end_tag();
      }
      expect_block_end();
      return node;
    }
  }

  Target parse_target(bool allow_attr) {
    Target target;
    bool paren = accept_op("(");
    target.names.push_back(expect_name());
    if (allow_attr && !paren && accept_op(".")) {
      target.attr = expect_name();
      return target;
    }
    while (accept_op(",")) {
      target.is_tuple = true;
      if (cur().kind != Tok::kName) break;
      target.names.push_back(expect_name());
    }
    if (paren) expect_op(")");
    return target;
  }

  StmtPtr parse_for(int line) {
    auto node = std::make_unique<ForStmt>(line);
    node->target = parse_target(false);
    if (!accept_name("in")) fail("expected 'in', got " + describe(cur()));
    node->iter = parse_tuple_or_expr(/*allow_cond=*/false);
    if (accept_name("if")) node->filter = parse_expression();
    if (is_name("recursive")) fail("unsupported 'recursive' for loop");
    expect_block_end();
    node->body = parse_body({"else", "endfor"}, "for", line);
    if (end_tag() == "else") {
      expect_block_end();
      node->otherwise = parse_body({"endfor"}, "for", line);
      end_tag();
    }
    expect_block_end();
    return node;
  }

  StmtPtr parse_set(int line) {
    auto node = std::make_unique<SetStmt>(line);
    node->target = parse_target(true);
    if (accept_op("=")) {
      node->value = parse_tuple_or_expr();
      expect_block_end();
      return node;
    }
    while (accept_op("|")) node->filters.push_back(parse_filter(nullptr));
    expect_block_end();
    node->body = parse_body({"endset"}, "set", line);
    end_tag();
    expect_block_end();
    return node;
  }

  std::vector<Param> parse_params() {
    std::vector<Param> params;
    expect_op("(");
    while (!accept_op(")")) {
      if (!params.empty()) expect_op(",");
      if (accept_op(")")) break;
      Param p;
      p.name = expect_name();
      if (accept_op("=")) p.default_value = parse_expression();
      params.push_back(std::move(p));
    }
    return params;
  }

  StmtPtr parse_macro(int line) {
    auto node = std::make_unique<MacroStmt>(line);
    node->name = expect_name();
    node->params = parse_params();
    expect_block_end();
    node->body = parse_body({"endmacro"}, "macro", line);
    end_tag();
    if (cur().kind == Tok::kName) ++i_;  // {% endmacro name %}
    expect_block_end();
    return node;
  }

  StmtPtr parse_call_block(int line) {
    auto node = std::make_unique<CallBlockStmt>(line);
    if (is_op("(")) node->caller_params = parse_params();
    ExprPtr call = parse_expression();
    auto* as_call = dynamic_cast<CallExpr*>(call.get());
    if (!as_call) fail("expected a call after 'call'");
    call.release();
    node->call.reset(as_call);
    expect_block_end();
    node->body = parse_body({"endcall"}, "call", line);
    end_tag();
    expect_block_end();
    return node;
  }

  StmtPtr parse_filter_block(int line) {
    auto node = std::make_unique<FilterBlockStmt>(line);
    do {
      node->filters.push_back(parse_filter(nullptr));
    } while (accept_op("|"));
    expect_block_end();
    node->body = parse_body({"endfilter"}, "filter", line);
    end_tag();
    expect_block_end();
    return node;
  }

  StmtPtr parse_with(int line) {
    auto node = std::make_unique<WithStmt>(line);
    while (cur().kind != Tok::kBlockEnd) {
      if (!node->assignments.empty()) expect_op(",");
      std::string name = expect_name();
      expect_op("=");
      node->assignments.emplace_back(name, parse_expression());
    }
    expect_block_end();
    node->body = parse_body({"endwith"}, "with", line);
    end_tag();
    expect_block_end();
    return node;
  }

  StmtPtr parse_generation(int line) {
    auto node = std::make_unique<ScopeStmt>(line);
    expect_block_end();
    node->body = parse_body({"endgeneration"}, "generation", line);
    end_tag();
    expect_block_end();
    return node;
  }

  // ---- expressions ----

  // `a, b` without brackets is a tuple (jinja2's parse_tuple with implicit parentheses).
  ExprPtr parse_tuple_or_expr(bool allow_cond = true) {
    int line = cur().line;
    ExprPtr first = allow_cond ? parse_expression() : parse_or();
    if (!is_op(",")) return first;
    auto tuple = std::make_unique<ListExpr>(line, true);
    tuple->items.push_back(std::move(first));
    while (accept_op(",")) {
      if (cur().kind == Tok::kVarEnd || cur().kind == Tok::kBlockEnd || is_op(")")) break;
      tuple->items.push_back(allow_cond ? parse_expression() : parse_or());
    }
    return tuple;
  }

  ExprPtr parse_expression() {
    Nest nest(*this);
    int line = cur().line;
    ExprPtr e = parse_or();
    while (accept_name("if")) {
      auto c = std::make_unique<CondExpr>(line);
      c->then = std::move(e);
      c->cond = parse_or();
      if (accept_name("else")) c->otherwise = parse_expression();
      e = std::move(c);
    }
    return e;
  }

  ExprPtr parse_or() {
    ExprPtr left = parse_and();
    while (is_name("or")) {
      int line = take().line;
      left = std::make_unique<BinaryExpr>(line, "or", std::move(left), parse_and());
    }
    return left;
  }

  ExprPtr parse_and() {
    ExprPtr left = parse_not();
    while (is_name("and")) {
      int line = take().line;
      left = std::make_unique<BinaryExpr>(line, "and", std::move(left), parse_not());
    }
    return left;
  }

  ExprPtr parse_not() {
    if (is_name("not")) {
      Nest nest(*this);
      int line = take().line;
      return std::make_unique<UnaryExpr>(line, "not", parse_not());
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
    int line = cur().line;
    ExprPtr first = parse_math1();
    std::unique_ptr<CompareExpr> cmp;
    while (true) {
      std::string op;
      if (cur().kind == Tok::kOp && (cur().text == "==" || cur().text == "!=" || cur().text == "<" ||
                                     cur().text == "<=" || cur().text == ">" || cur().text == ">=")) {
        op = take().text;
      } else if (accept_name("in")) {
        op = "in";
      } else if (is_name("not") && peek().kind == Tok::kName && peek().text == "in") {
        i_ += 2;
        op = "notin";
      } else {
        break;
      }
      if (!cmp) {
        cmp = std::make_unique<CompareExpr>(line);
        cmp->first = std::move(first);
      }
      cmp->rest.emplace_back(op, parse_math1());
    }
    if (cmp) return cmp;
    return first;
  }

  template <typename Next>
  ExprPtr binary_chain(std::initializer_list<const char*> ops, Next next) {
    ExprPtr left = (this->*next)();
    while (true) {
      const char* found = nullptr;
      for (const char* op : ops)
        if (is_op(op)) found = op;
      if (!found) return left;
      int line = take().line;
      left = std::make_unique<BinaryExpr>(line, found, std::move(left), (this->*next)());
    }
  }

  ExprPtr parse_math1() { return binary_chain({"+", "-"}, &Parser::parse_concat); }
  ExprPtr parse_concat() { return binary_chain({"~"}, &Parser::parse_math2); }
  ExprPtr parse_math2() { return binary_chain({"*", "/", "//", "%"}, &Parser::parse_pow); }
  ExprPtr parse_pow() { return binary_chain({"**"}, &Parser::parse_unary_filtered); }
  ExprPtr parse_unary_filtered() { return parse_unary(true); }

  ExprPtr parse_unary(bool with_filter) {
    Nest nest(*this);
    int line = cur().line;
    ExprPtr node;
    if (accept_op("-")) {
      node = std::make_unique<UnaryExpr>(line, "-", parse_unary(false));
    } else if (accept_op("+")) {
      node = std::make_unique<UnaryExpr>(line, "+", parse_unary(false));
    } else {
      node = parse_postfix(parse_primary());
    }
    return with_filter ? parse_filter_chain(std::move(node)) : std::move(node);
  }

  ExprPtr parse_primary() {
    const Token& t = cur();
    int line = t.line;
    switch (t.kind) {
      case Tok::kName: {
        std::string n = take().text;
        if (n == "true" || n == "True") return std::make_unique<Literal>(line, Value(true));
        if (n == "false" || n == "False") return std::make_unique<Literal>(line, Value(false));
        if (n == "none" || n == "None") return std::make_unique<Literal>(line, Value(None{}));
        return std::make_unique<NameRef>(line, n);
      }
      case Tok::kString: {
        std::string s = take().text;
        while (cur().kind == Tok::kString) s += take().text;  // adjacent literals concatenate
        return std::make_unique<Literal>(line, Value(std::move(s)));
      }
      case Tok::kInt: return std::make_unique<Literal>(line, Value(take().int_value));
      case Tok::kFloat: return std::make_unique<Literal>(line, Value(take().float_value));
      case Tok::kOp:
        if (accept_op("(")) return parse_paren(line);
        if (accept_op("[")) return parse_list(line);
        if (accept_op("{")) return parse_dict(line);
        break;
      default: break;
    }
    fail("unexpected " + describe(t));
  }

  ExprPtr parse_paren(int line) {
    if (accept_op(")")) return std::make_unique<ListExpr>(line, true);
    ExprPtr first = parse_expression();
    if (accept_op(")")) return first;
    auto tuple = std::make_unique<ListExpr>(line, true);
    tuple->items.push_back(std::move(first));
    while (accept_op(",")) {
      if (is_op(")")) break;
      tuple->items.push_back(parse_expression());
    }
    expect_op(")");
    return tuple;
  }

  ExprPtr parse_list(int line) {
    auto list = std::make_unique<ListExpr>(line, false);
    while (!accept_op("]")) {
      if (!list->items.empty()) expect_op(",");
      if (accept_op("]")) break;
      list->items.push_back(parse_expression());
    }
    return list;
  }

  ExprPtr parse_dict(int line) {
    auto dict = std::make_unique<DictExpr>(line);
    while (!accept_op("}")) {
      if (!dict->items.empty()) expect_op(",");
      if (accept_op("}")) break;
      ExprPtr key = parse_expression();
      expect_op(":");
      dict->items.emplace_back(std::move(key), parse_expression());
    }
    return dict;
  }

  ExprPtr parse_postfix(ExprPtr node) {
    while (true) {
      int line = cur().line;
      if (accept_op(".")) {
        if (cur().kind == Tok::kInt) {
          node = std::make_unique<GetItem>(line, std::move(node),
                                           std::make_unique<Literal>(line, Value(take().int_value)));
        } else {
          node = std::make_unique<GetAttr>(line, std::move(node), expect_name());
        }
      } else if (accept_op("[")) {
        node = parse_subscript(line, std::move(node));
      } else if (is_op("(")) {
        node = parse_call(std::move(node));
      } else {
        return node;
      }
    }
  }

  ExprPtr parse_subscript(int line, ExprPtr obj) {
    ExprPtr bounds[3];
    int part = 0;
    bool is_slice = false;
    while (!is_op("]")) {
      if (accept_op(":")) {
        is_slice = true;
        if (++part > 2) fail("invalid slice");
        continue;
      }
      if (bounds[part]) fail("expected ']' or ':', got " + describe(cur()));
      bounds[part] = parse_expression();
    }
    expect_op("]");
    if (!is_slice) {
      if (!bounds[0]) fail("expected a subscript");
      return std::make_unique<GetItem>(line, std::move(obj), std::move(bounds[0]));
    }
    auto s = std::make_unique<SliceExpr>(line);
    s->obj = std::move(obj);
    s->start = std::move(bounds[0]);
    s->stop = std::move(bounds[1]);
    s->step = std::move(bounds[2]);
    return s;
  }

  Args parse_args() {
    Args args;
    expect_op("(");
    bool first = true;
    while (!accept_op(")")) {
      if (!first) expect_op(",");
      first = false;
      if (accept_op(")")) break;
      if (is_op("*") || is_op("**")) fail("unsupported '*' arguments in a call");
      if (cur().kind == Tok::kName && peek().kind == Tok::kOp && peek().text == "=") {
        std::string name = take().text;
        ++i_;
        args.keyword.push_back({name, parse_expression()});
      } else {
        if (!args.keyword.empty()) fail("positional argument after keyword argument");
        args.positional.push_back(parse_expression());
      }
    }
    return args;
  }

  ExprPtr parse_call(ExprPtr callee) {
    auto call = std::make_unique<CallExpr>(cur().line);
    call->callee = std::move(callee);
    call->args = parse_args();
    return call;
  }

  std::unique_ptr<FilterExpr> parse_filter(ExprPtr obj) {
    auto f = std::make_unique<FilterExpr>(cur().line);
    f->obj = std::move(obj);
    f->name = expect_name();
    while (accept_op(".")) f->name += "." + expect_name();
    if (is_op("(")) f->args = parse_args();
    return f;
  }

  ExprPtr parse_filter_chain(ExprPtr node) {
    while (true) {
      if (accept_op("|")) {
        node = parse_filter(std::move(node));
      } else if (is_name("is")) {
        node = parse_test(std::move(node));
      } else if (is_op("(")) {
        node = parse_call(std::move(node));
      } else {
        return node;
      }
    }
  }

  ExprPtr parse_test(ExprPtr obj) {
    auto t = std::make_unique<TestExpr>(take().line);
    t->obj = std::move(obj);
    t->negated = accept_name("not");
    t->name = expect_name();
    while (accept_op(".")) t->name += "." + expect_name();
    if (is_op("(")) {
      t->args = parse_args();
    } else if ((cur().kind == Tok::kName || cur().kind == Tok::kString || cur().kind == Tok::kInt ||
                cur().kind == Tok::kFloat || is_op("[") || is_op("{")) &&
               !is_name("else") && !is_name("or") && !is_name("and")) {
      if (is_name("is")) fail("you cannot chain multiple tests with 'is'");
      t->args.positional.push_back(parse_postfix(parse_primary()));
    }
    return t;
  }
};

}  // namespace

Body parse_template(std::string_view source) { return Parser(tokenize(source)).parse(); }

}  // namespace kvlm::jinja
