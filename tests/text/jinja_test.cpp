// The Jinja interpreter against jinja2 as transformers configures it (trim_blocks,
// lstrip_blocks, immutable sandbox, transformers' tojson). Expected strings are jinja2 3.1's
// output for the same template and variables.
#include <gtest/gtest.h>

#include "kvlm/base/error.h"
#include "kvlm/text/jinja.h"

namespace kvlm::jinja {
namespace {

struct Case {
  const char* name;
  const char* source;
  const char* vars;  // a JSON object
  const char* want;
};

// Shared variables for most cases.
const char* const V =
    "{\"d\": {\"a\": 1, \"b\": [1, 2.5, \"x'y\"], \"c\": null, \"e\": true}, \"l\": [3, 1, 2], \"s\": \"Hello World\", "
    "\"msgs\": [{\"role\": \"user\", \"content\": \"hi\"}, {\"role\": \"assistant\", \"content\": \"yo\"}, "
    "{\"role\": \"user\", \"content\": \"bye\"}], \"u\": \"naïve Ünïcode\", \"n\": 7, \"f\": 2.5, "
    "\"words\": [\"b\", \"A\", \"c\", \"a\"]}";

const Case kCases[] = {
    {"trim_blocks", "{% if true %}\nx\n{% endif %}\ny", "{}", "x\ny"},
    {"lstrip_blocks", "a\n    {% if true %}\n    b\n    {% endif %}\nc", "{}", "a\n    b\nc"},
    {"lstrip_not_after_expr", "  {{ 1 }}  {% if true %}x{% endif %}", "{}", "  1  x"},
    {"dash_left", "a   \n  {%- if true %}b{% endif %}", "{}", "ab"},
    {"dash_right", "{% if true -%}   \n  b{% endif %}", "{}", "b"},
    {"var_dashes", "a  {{- 1 -}}  b", "{}", "a1b"},
    {"plus_disables_lstrip", "a\n  {%+ if true %}b{% endif %}", "{}", "a\n  b"},
    {"comment_trim", "a\n{# note #}\nb", "{}", "a\nb"},
    {"comment_dash", "a  {#- note -#}  b", "{}", "ab"},
    {"trailing_newline_dropped", "x\n", "{}", "x"},
    {"only_one_trailing_newline_dropped", "x\n\n", "{}", "x\n"},
    {"var_keeps_newline", "{{ 1 }}\n{{ 2 }}", "{}", "1\n2"},
    {"raw_block", "{% raw %}{{ not }}{% endraw %}", "{}", "{{ not }}"},
    {"crlf_normalised", "a\r\nb", "{}", "a\nb"},
    {"render_values", "{{ d }}|{{ l }}|{{ 1.0 }}|{{ 1e20 }}|{{ 0.1+0.2 }}|{{ none }}|{{ true }}|{{ (1,) }}|{{ (1, 'a') }}", V, "{'a': 1, 'b': [1, 2.5, \"x'y\"], 'c': None, 'e': True}|[3, 1, 2]|1.0|1e+20|0.30000000000000004|None|True|(1,)|(1, 'a')"},
    {"float_repr", "{{ 1e16 }} {{ 1e15 }} {{ 0.0001 }} {{ 0.00001 }} {{ 1.5e-7 }} {{ -0.0 }} {{ 123456789.125 }}", "{}", "1e+16 1000000000000000.0 0.0001 1e-05 1.5e-07 -0.0 123456789.125"},
    {"string_escapes", "{{ 'a\\tb\\n' ~ \"q\\\"\" ~ '\\x41\\u00e9' ~ '\\\\' }}", "{}", "a\tb\nq\"Aé\\"},
    {"string_repr_quotes", "{{ ['it\\'s', 'say \"hi\"', 'both \\' \"'] }}", "{}", "[\"it's\", 'say \"hi\"', 'both \\' \"']"},
    {"adjacent_strings", "{{ 'a' 'b' }}", "{}", "ab"},
    {"undefined_renders_empty", "[{{ missing }}][{{ d.zz }}]", V, "[][]"},
    {"arithmetic", "{{ 7/2 }} {{ 7//2 }} {{ -7//2 }} {{ -7%3 }} {{ 7%-3 }} {{ 2**10 }} {{ 2**-1 }} {{ 7.0//2 }} {{ 7%2.5 }} {{ 1+2*3 }} {{ (1+2)*3 }} {{ -2**2 }}", "{}", "3.5 3 -4 2 -2 1024 0.5 3.0 2.0 7 9 4"},
    {"concat_tilde", "{{ 'a' ~ 1 ~ none ~ true ~ missing }}", "{}", "a1NoneTrue"},
    {"string_ops", "{{ 'ab' * 3 }}{{ [1] * 2 }}{{ 'a' + 'b' }}{{ [1] + [2] }}", "{}", "ababab[1, 1]ab[1, 2]"},
    {"comparisons", "{{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }} {{ 1 == 1.0 }} {{ 'a' != 'b' }} {{ [1,2] == [1,2] }} {{ 'a' < 'b' }} {{ true == 1 }}", "{}", "True False True True True True True"},
    {"in_not_in", "{{ 'x' in 'xyz' }} {{ 2 in l }} {{ 'a' in d }} {{ 'q' not in d }} {{ 5 not in l }}", V, "True True True True True"},
    {"logic", "{{ 0 or 'x' }} {{ 1 and 'y' }} {{ none or [] }} {{ not 0 }} {{ not 'a' }} {{ '' and 1 }}", "{}", "x y [] True False "},
    {"ternary", "{{ 'y' if n > 3 else 'n' }} {{ 'y' if n > 30 else 'n' }} [{{ 'y' if false }}]", V, "y n []"},
    {"getattr_getitem", "{{ d.a }} {{ d['b'][1] }} {{ d.b.1 }} {{ msgs[0].role }} {{ msgs[-1]['content'] }} {{ s[0] }} {{ s[-1] }}", V, "1 2.5 2.5 user bye H d"},
    {"slicing", "{{ s[1:4] }} {{ s[::-1] }} {{ l[1:] }} {{ l[:-1] }} {{ l[::2] }} {{ u[0:5] }} {{ msgs[1:]|length }}", V, "ell dlroW olleH [1, 2] [3, 1] [3, 2] naïve 2"},
    {"dict_methods", "{{ d.get('a') }} {{ d.get('q', 5) }} {{ d.get('q') }} {{ d.keys()|list }} {{ d.values()|list|length }} {% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}", V, "1 5 None ['a', 'b', 'c', 'e'] 4 a=1;b=[1, 2.5, \"x'y\"];c=None;e=True;"},
    {"loop_vars", "{% for x in l %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }};{% endfor %}", V, "1032TrueFalse3;2121FalseFalse3;3210FalseTrue3;"},
    {"loop_prev_next", "{% for x in l %}{{ loop.previtem }}<{{ x }}>{{ loop.nextitem }}|{% endfor %}", V, "<3>1|3<1>2|1<2>|"},
    {"loop_filter_else", "{% for x in l if x > 1 %}{{ loop.index }}/{{ loop.length }}:{{ x }} {% else %}E{% endfor %}{% for x in [] %}x{% else %}empty{% endfor %}", V, "1/2:3 2/2:2 empty"},
    {"loop_over_dict_and_string", "{% for k in d %}{{ k }}{% endfor %} {% for c in 'héllo' %}[{{ c }}]{% endfor %}", V, "abce [h][é][l][l][o]"},
    {"loop_unpack", "{% for a, b in [(1, 2), (3, 4)] %}{{ a + b }} {% endfor %}", "{}", "3 7 "},
    {"loop_scoping", "{% set count = 0 %}{% for i in [1,2,3] %}{% set count = count + 1 %}{{ count }}{% endfor %}{{ count }}", "{}", "1110"},
    {"loop_break_continue", "{% for i in range(10) %}{% if i == 2 %}{% continue %}{% endif %}{% if i == 5 %}{% break %}{% endif %}{{ i }}{% endfor %}", "{}", "0134"},
    {"loop_cycle", "{% for i in range(5) %}{{ loop.cycle('a', 'b') }}{% endfor %}", "{}", "ababa"},
    {"nested_loops", "{% for i in range(2) %}{% for j in range(2) %}{{ loop.index }}{{ i }}{{ j }} {% endfor %}{{ loop.index }}|{% endfor %}", "{}", "100 201 1|110 211 2|"},
    {"range_forms", "{{ range(3)|list }} {{ range(1, 4)|list }} {{ range(10, 0, -3)|list }} {{ range(0)|list }}", "{}", "[0, 1, 2] [1, 2, 3] [10, 7, 4, 1] []"},
    {"set_and_tuple", "{% set x = 5 %}{% set a, b = 1, 2 %}{{ x }}{{ a }}{{ b }}", "{}", "512"},
    {"namespace", "{% set ns = namespace(found=false, n=0) %}{% for m in msgs %}{% if m.role == 'assistant' %}{% set ns.found = true %}{% endif %}{% set ns.n = ns.n + 1 %}{% endfor %}{{ ns.found }} {{ ns.n }}", V, "True 3"},
    {"block_set", "{% set body %}  hi {{ n }}  {% endset %}[{{ body }}]", V, "[  hi 7  ]"},
    {"block_set_filter", "{% set body | upper | trim %}  hi  {% endset %}[{{ body }}]", "{}", "[HI]"},
    {"if_elif_else", "{% for v in [1, 2, 3] %}{% if v == 1 %}one{% elif v == 2 %}two{% else %}many{% endif %} {% endfor %}", "{}", "one two many "},
    {"if_no_scope", "{% if true %}{% set z = 3 %}{% endif %}{{ z }}", "{}", "3"},
    {"with_block", "{% with a = 1, b = 2 %}{{ a + b }}{% endwith %}[{{ a }}]", "{}", "3[]"},
    {"macro_defaults_kwargs", "{% macro f(a, b=2) %}{{ a }}-{{ b }}-{{ varargs }}-{{ kwargs }}{% endmacro %}{{ f(1) }}|{{ f(1, 3, 4, z=5) }}|{{ f(b=7, a=0) }}", "{}", "1-2-()-{}|1-3-(4,)-{'z': 5}|0-7-()-{}"},
    {"macro_recursion", "{% macro fact(n) %}{% if n <= 1 %}1{% else %}{{ n * fact(n - 1)|int }}{% endif %}{% endmacro %}{{ fact(5) }}", "{}", "120"},
    {"call_block", "{% macro wrap(tag) %}<{{ tag }}>{{ caller() }}</{{ tag }}>{% endmacro %}{% call wrap('b') %}bold {{ n }}{% endcall %}", V, "<b>bold 7</b>"},
    {"call_block_args", "{% macro each(items) %}{% for i in items %}{{ caller(i) }}{% endfor %}{% endmacro %}{% call(x) each([1, 2]) %}[{{ x }}]{% endcall %}", "{}", "[1][2]"},
    {"filter_block", "{% filter upper %}hello {{ s }}{% endfilter %}", V, "HELLO HELLO WORLD"},
    {"generation_block", "a{% generation %}b{% endgeneration %}c", "{}", "abc"},
    {"f_trim_case", "[{{ '  a b \\n'|trim }}][{{ 'xxaxx'|trim('x') }}]{{ 'ab'|upper }}{{ 'AB'|lower }}{{ 'hello wORLD-x(y'|title }}{{ 'hELLO'|capitalize }}{{ u|upper }}", V, "[a b][a]ABabHello World-X(YHelloNAÏVE ÜNÏCODE"},
    {"f_length_count", "{{ l|length }} {{ s|length }} {{ d|count }} {{ u|length }} {{ missing|length }}", V, "3 11 4 13 0"},
    {"f_tojson", "{{ d|tojson }}|{{ 'é\"\\n'|tojson }}|{{ [1, 2.0, none, true]|tojson }}|{{ {}|tojson }}|{{ []|tojson(indent=2) }}", V, "{\"a\": 1, \"b\": [1, 2.5, \"x'y\"], \"c\": null, \"e\": true}|\"é\\\"\\n\"|[1, 2.0, null, true]|{}|[]"},
    {"f_tojson_indent", "{{ d|tojson(indent=2) }}", V, "{\n  \"a\": 1,\n  \"b\": [\n    1,\n    2.5,\n    \"x'y\"\n  ],\n  \"c\": null,\n  \"e\": true\n}"},
    {"f_tojson_options", "{{ {'b': 1, 'a': 'é'}|tojson(sort_keys=true) }}{{ {'a': 'é'}|tojson(ensure_ascii=true) }}{{ {'a': [1, 2]}|tojson(separators=(',', ':')) }}", "{}", "{\"a\": \"é\", \"b\": 1}{\"a\": \"\\u00e9\"}{\"a\":[1,2]}"},
    {"f_replace_join", "{{ 'aaa'|replace('a', 'b', 2) }} {{ l|join('-') }} {{ msgs|join(', ', attribute='role') }} {{ 'ab'|replace('', '.') }}", V, "bba 3-1-2 user, assistant, user .a.b."},
    {"f_items_dictsort", "{{ d|items|list }} {{ {'b': 1, 'a': 2}|dictsort }} {{ {'b': 1, 'a': 2}|dictsort(by='value', reverse=true) }}", V, "[('a', 1), ('b', [1, 2.5, \"x'y\"]), ('c', None), ('e', True)] [('a', 2), ('b', 1)] [('a', 2), ('b', 1)]"},
    {"f_select_map", "{{ msgs|selectattr('role', 'equalto', 'user')|map(attribute='content')|list }} {{ msgs|rejectattr('role', 'eq', 'user')|list|length }} {{ l|select('odd')|list }} {{ l|reject('odd')|list }} {{ ['a', 'b']|map('upper')|list }} {{ msgs|selectattr('content')|list|length }}", V, "['hi', 'bye'] 1 [3, 1] [2] ['A', 'B'] 3"},
    {"f_default", "{{ missing|default('dflt') }} {{ none|default('x') }} {{ ''|default('y', true) }} {{ 0|d(5) }} {{ missing|d }}", "{}", "dflt None y 0 "},
    {"f_first_last_list", "{{ l|first }} {{ l|last }} {{ s|first }} {{ 'ab'|list }} {{ d|list }}", V, "3 2 H ['a', 'b'] ['a', 'b', 'c', 'e']"},
    {"f_numbers", "{{ '42'|int }} {{ '4.7'|int }} {{ 'x'|int }} {{ 'x'|int(9) }} {{ 3.9|int }} {{ '2.5'|float }} {{ 3|float }} {{ -4|abs }} {{ -4.5|abs }} {{ 2.5|round }} {{ 3.5|round }} {{ 2.567|round(2) }} {{ 2.1|round(0, 'ceil') }} {{ 2.9|round(method='floor') }}", "{}", "42 4 0 9 3 2.5 3.0 4 4.5 2.0 4.0 2.57 3.0 2.0"},
    {"f_unique_sort_reverse", "{{ words|unique|list }} {{ words|sort }} {{ words|sort(case_sensitive=true) }} {{ l|sort(reverse=true) }} {{ msgs|sort(attribute='content')|map(attribute='content')|join }} {{ l|reverse|list }} {{ 'abc'|reverse }}", V, "['b', 'A', 'c'] ['A', 'a', 'b', 'c'] ['A', 'a', 'b', 'c'] [3, 2, 1] byehiyo [2, 1, 3] cba"},
    {"f_minmax_sum", "{{ l|min }} {{ l|max }} {{ l|sum }} {{ words|min }} {{ words|max(case_sensitive=true) }} {{ [1.5, 2]|sum(start=1) }}", V, "1 3 6 A c 4.5"},
    {"f_string_safe_escape", "{{ 5|string ~ 'x' }} {{ '<a>'|safe }} {{ '<a href=\"x\">&'|escape }}", "{}", "5x <a> &lt;a href=&#34;x&#34;&gt;&amp;"},
    {"f_indent", "[{{ 'a\\nb\\n\\nc'|indent(2) }}][{{ 'a\\nb'|indent(2, true) }}][{{ 'a\\n\\nb'|indent('> ', blank=true) }}]", "{}", "[a\n  b\n\n  c][  a\n  b][a\n> \n> b]"},
    {"f_wordcount_batch", "{{ 'one two  three'|wordcount }} {{ [1,2,3,4,5]|batch(2)|list }} {{ [1,2,3]|batch(2, 0)|list }}", "{}", "3 [[1, 2], [3, 4], [5]] [[1, 2], [3, 0]]"},
    {"f_format", "{{ '%s-%d|%5.2f|%r|%%'|format('a', 3, 3.14159, 'x') }} {{ '%(k)s!'|format(k='v') }} {{ '%s and %s' % ('a', 'b') }}", "{}", "a-3| 3.14|'x'|% v! a and b"},
    {"f_center_pprint", "[{{ 'ab'|center(6) }}][{{ 'abc'|center(6) }}]{{ d|pprint }}", V, "[  ab  ][ abc  ]{'a': 1, 'b': [1, 2.5, \"x'y\"], 'c': None, 'e': True}"},
    {"tests_types", "{{ missing is defined }}{{ n is defined }}{{ missing is undefined }}{{ none is none }}{{ 1 is number }}{{ 1.5 is float }}{{ 1 is integer }}{{ true is boolean }}{{ true is number }}{{ 's' is string }}{{ d is mapping }}{{ l is iterable }}{{ 's' is iterable }}{{ d is sequence }}{{ 1 is iterable }}{{ range is callable }}", V, "FalseTrueTrueTrueTrueTrueTrueTrueTrueTrueTrueTrueTrueTrueFalseTrue"},
    {"tests_values", "{{ true is true }}{{ 1 is true }}{{ false is false }}{{ 2 is even }}{{ 3 is odd }}{{ 9 is divisibleby 3 }}{{ 9 is divisibleby(4) }}{{ 1 is eq 1 }}{{ 1 is equalto 2 }}{{ 1 is ne 2 }}{{ 2 is in l }}{{ 'ab' is lower }}{{ 'AB' is upper }}{{ 1 is lt 2 }}{{ 3 is ge 3 }}{{ none is sameas none }}", V, "TrueFalseTrueTrueTrueTrueFalseTrueFalseTrueTrueTrueTrueTrueTrueTrue"},
    {"tests_not", "{{ missing is not defined }} {{ n is not none }} {{ not n is defined }}", V, "True True False"},
    {"str_methods", "{{ s.startswith('He') }}{{ s.endswith(('x', 'ld')) }}[{{ '  x  '.strip() }}][{{ 'xxaxx'.lstrip('x') }}][{{ '  x '.rstrip() }}]{{ 'a,b,,c'.split(',') }}{{ ' a  b '.split() }}{{ 'a b c'.split(' ', 1) }}{{ 'a b c'.rsplit(' ', 1) }}", V, "TrueTrue[x][axx][  x]['a', 'b', '', 'c']['a', 'b']['a', 'b c']['a b', 'c']"},
    {"str_methods2", "{{ s.replace('l', 'L') }} {{ s.upper() }} {{ s.lower() }} {{ 'hello world'.title() }} {{ 'hELLO'.capitalize() }} {{ s.find('o') }} {{ s.find('z') }} {{ s.rfind('o') }} {{ s.count('l') }} {{ '-'.join(['a', 'b']) }}", V, "HeLLo WorLd HELLO WORLD hello world Hello World Hello 4 -1 7 3 a-b"},
    {"str_format_method", "{{ '{} + {} = {}'.format(1, 2, 3) }} {{ '{0}{0}{name}'.format('x', name='y') }} {{ '{{}}'.format() }}", "{}", "1 + 2 = 3 xxy {}"},
    {"str_misc", "{{ 'a\\nb\\r\\nc'.splitlines() }} {{ '123'.isdigit() }} {{ 'ab1'.isalpha() }} {{ u.find('Ü') }}", V, "['a', 'b', 'c'] True False 6"},
    {"list_methods", "{{ l.index(1) }} {{ [1, 1, 2].count(1) }}", V, "1 2"},
    {"dict_global", "{{ dict(a=1, b='x') }} {{ dict({'z': 1}, y=2) }}", "{}", "{'a': 1, 'b': 'x'} {'z': 1, 'y': 2}"},
};

std::vector<std::pair<std::string, Value>> vars_of(const char* json) {
  std::vector<std::pair<std::string, Value>> vars;
  const auto doc = nlohmann::ordered_json::parse(json);  // named: items() refers into it
  for (const auto& [k, v] : doc.items()) vars.emplace_back(k, from_json(v));
  return vars;
}

std::string render(const std::string& source, const char* vars = "{}", const Limits& limits = {}) {
  return Template(source).render(vars_of(vars), limits);
}

// The kvlm::Error message a template raises, or "" when it renders.
std::string error_of(const std::string& source, const char* vars = "{}", const Limits& limits = {}) {
  try {
    render(source, vars, limits);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

class JinjaCases : public ::testing::TestWithParam<Case> {};

TEST_P(JinjaCases, RendersLikeJinja2) {
  const Case& c = GetParam();
  std::string got;
  ASSERT_NO_THROW(got = render(c.source, c.vars)) << c.source;
  EXPECT_EQ(got, c.want) << c.source;
}

INSTANTIATE_TEST_SUITE_P(Jinja2, JinjaCases, ::testing::ValuesIn(kCases),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(JinjaErrors, RenderErrorsNameTheLine) {
  EXPECT_EQ(error_of("{{ missing.attr }}"), "template line 1: 'missing' is undefined");
  EXPECT_EQ(error_of("a\n{{ d.zz.y }}", V), "template line 2: 'dict object' has no attribute 'zz'");
  EXPECT_EQ(error_of("{{ l.append(4) }}", V),
            "template line 1: access to attribute 'append' of 'list' object is unsafe.");
  EXPECT_EQ(error_of("{{ n() }}", V), "template line 1: 'int' object is not callable");
  EXPECT_EQ(error_of("\n\n{{ 1 + 'a' }}"), "template line 3: unsupported operand type(s) for +: 'int' and 'str'");
  EXPECT_EQ(error_of("{{ 1 / 0 }}"), "template line 1: division by zero");
  EXPECT_EQ(error_of("{% for a, b in [1] %}{% endfor %}"), "template line 1: 'int' object is not iterable");
  EXPECT_EQ(error_of("{{ missing|tojson }}"), "template line 1: 'missing' is undefined");
  EXPECT_EQ(error_of("{{ 9223372036854775807 + 1 }}"), "template line 1: integer overflow");
}

TEST(JinjaErrors, RaiseExceptionPassesTheMessageThrough) {
  EXPECT_EQ(error_of("{% if true %}\n{{ raise_exception('Conversation roles must alternate user/assistant') }}{% endif %}"),
            "Conversation roles must alternate user/assistant");
}

TEST(JinjaErrors, UnsupportedConstructsAreNamed) {
  EXPECT_EQ(error_of("line one\n{{ d|xmlattr }}", V), "template line 2: unsupported filter 'xmlattr'");
  EXPECT_EQ(error_of("{{ 1 is prime }}"), "template line 1: unsupported test 'prime'");
  EXPECT_EQ(error_of("\n{% include 'other.jinja' %}"), "template line 2: unsupported statement 'include'");
  EXPECT_EQ(error_of("{% extends 'base' %}"), "template line 1: unsupported statement 'extends'");
  EXPECT_EQ(error_of("{% for x in l recursive %}{% endfor %}"), "template line 1: unsupported 'recursive' for loop");
  EXPECT_EQ(error_of("{{ f(*args) }}"), "template line 1: unsupported '*' arguments in a call");
  // An unsupported filter in a branch that never runs does not fail the template, as in jinja2.
  EXPECT_EQ(render("{% if false %}{{ x|xmlattr }}{% endif %}ok"), "ok");
}

TEST(JinjaErrors, SyntaxErrorsNameTheLine) {
  EXPECT_EQ(error_of("{% if x %}\nno end"),
            "template line 2: unexpected end of template: 'if' from line 1 is never closed (expected 'endif')");
  EXPECT_EQ(error_of("{{ 1 + }}"), "template line 1: unexpected '}}'");
  EXPECT_EQ(error_of("a\nb\n{% frobnicate %}"), "template line 3: unknown statement 'frobnicate'");
  EXPECT_EQ(error_of("{% endfor %}"), "template line 1: unexpected 'endfor'");
  EXPECT_EQ(error_of("{{ 'abc }}"), "template line 1: unterminated string literal");
  EXPECT_EQ(error_of("x\n{{ y"), "template line 2: unexpected end of template, expected '}}'");
  EXPECT_EQ(error_of("{# never closed"), "template line 1: unterminated comment");
  EXPECT_EQ(error_of("{{ a ? b }}"), "template line 1: unexpected character '?'");
  EXPECT_EQ(error_of("{% set %}"), "template line 1: expected a name, got '%}'");
  EXPECT_EQ(error_of("{{ x is defined is defined }}"), "template line 1: you cannot chain multiple tests with 'is'");
}

TEST(JinjaLimits, RecursionIsBounded) {
  EXPECT_EQ(error_of("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}"),
            "template line 1: template recursion too deep (limit 400)");
}

TEST(JinjaLimits, WorkIsBounded) {
  Limits limits;
  limits.max_steps = 10000;
  EXPECT_EQ(error_of("{% for i in range(1000) %}{% for j in range(1000) %}{% endfor %}{% endfor %}", "{}", limits),
            "template line 1: template exceeded 10000 steps");
}

TEST(JinjaLimits, OutputIsBounded) {
  Limits limits;
  limits.max_output = 1000;
  EXPECT_EQ(error_of("{% for i in range(1000) %}0123456789{% endfor %}", "{}", limits),
            "template line 1: template output exceeds 1000 bytes");
  EXPECT_EQ(error_of("{{ 'a' * 100000 }}", "{}", limits), "template line 1: template output exceeds 1000 bytes");
  EXPECT_EQ(error_of("{{ range(1000000000) }}"), "template line 1: range() is too large (limit 1000000 items)");
}

TEST(JinjaLimits, NestingIsBounded) {
  std::string deep = "{{ " + std::string(1000, '(') + "1" + std::string(1000, ')') + " }}";
  EXPECT_EQ(error_of(deep), "template line 1: template nested too deeply");
  std::string ifs;
  for (int i = 0; i < 500; ++i) ifs += "{% if true %}";
  EXPECT_EQ(error_of(ifs), "template line 1: template nested too deeply");
}

TEST(JinjaGlobals, StrftimeNowHonoursSourceDateEpoch) {
  setenv("SOURCE_DATE_EPOCH", "1768478400", 1);
  EXPECT_EQ(render("{{ strftime_now('%d %b %Y %H:%M') }}"), "15 Jan 2026 12:00");
  unsetenv("SOURCE_DATE_EPOCH");
  EXPECT_EQ(render("{{ strftime_now('%Y')|length }}"), "4");
}

TEST(JinjaValues, NamespacesReferencingThemselvesAreReleased) {
  // A namespace stored in itself forms a cycle; rendering must still free it (LeakSanitizer
  // checks this under the fuzz build) and print it without recursing forever.
  EXPECT_EQ(render("{% set ns = namespace(a=1) %}{% set ns.self = ns %}{{ ns.a }}"), "1");
}

}  // namespace
}  // namespace kvlm::jinja
