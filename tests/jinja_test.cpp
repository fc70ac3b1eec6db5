// The chat-template engine (src/chat), construct by construct: whitespace
// control, expressions, statements, filters, tests and methods against
// strings that Python's jinja2 3.1 renders for the same templates (with
// transformers' environment: trim_blocks, lstrip_blocks, loopcontrols, its
// tojson); then errors, which must name the template and the line:column,
// and the limits that stop hostile templates.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <string>
#include <thread>
#include <vector>

#include "chat/template.h"

namespace replayssm::chat {
namespace {

using ordered_json = nlohmann::ordered_json;

struct Case {
  const char* source;
  const char* context;  // JSON object, "" for none
  const char* want;
};

Result<std::string> render(const std::string& source, const ordered_json& context = ordered_json::object(),
                           const RenderLimits& limits = {}) {
  auto t = Template::parse(source, "test.jinja");
  if (!t.ok()) return t.status();
  return t->render(context, limits);
}

void expect_cases(const Case* cases, size_t n) {
  for (size_t k = 0; k < n; ++k) {
    SCOPED_TRACE(cases[k].source);
    const ordered_json ctx =
        *cases[k].context ? ordered_json::parse(cases[k].context) : ordered_json::object();
    auto r = render(cases[k].source, ctx);
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ(*r, cases[k].want);
  }
}

// The error of rendering `source`; the test fails if it renders.
Status render_error(const std::string& source, const ordered_json& context = ordered_json::object(),
                    const RenderLimits& limits = {}) {
  auto r = render(source, context, limits);
  EXPECT_FALSE(r.ok()) << "rendered: " << (r.ok() ? *r : "");
  return r.ok() ? Status() : r.status();
}

#define EXPECT_ERROR_HAS(status, text) \
  EXPECT_NE((status).message().find(text), std::string::npos) << (status).message()

// Whitespace: expected strings are jinja2 3.1's, rendered as transformers configures it.
const Case kWhitespace[] = {
    {"a\n  {# c #}\nb\n  {% if true %}\n  x {{ 1 }}\n  {% endif %}\n{%+ if true +%}\ny\n{% endif -%}\n  z",
     "",
     "a\nb\n  x 1\n\ny\nz"},
    {"  {%- if true -%}\n   a\n  {%- endif -%}\n  b",
     "",
     "ab"},
    {"<x>\n    {% for m in [1,2] %}\n    <m>{{ m }}</m>\n    {% endfor %}\n</x>",
     "",
     "<x>\n    <m>1</m>\n    <m>2</m>\n</x>"},
    {"line\n{{ 'v' -}}\n   \n\nnext",
     "",
     "line\nvnext"},
    {"{%- set x = 1 -%}   \ntext {{- ' y' }}   {{ 'z' }}",
     "",
     "text y   z"},
    {"{% raw %}{{ not evaluated }}{% endraw %}|{% raw -%}  a  {%- endraw %}|",
     "",
     "{{ not evaluated }}|a|"},
    {"a {# comment -#}   b {#- c #} c",
     "",
     "a b c"},
    {"    {{ 'x' }}\n    {% if true %}y{% endif %}",
     "",
     "    x\ny"},
    {"  {% set a = 1 %}  {% set b = 2 %}\n[{{ a }}{{ b }}]",
     "",
     "  [12]"},
    {"trailing newline\n",
     "",
     "trailing newline"},
    {"crlf\r\n{% if true %}\r\nx\r\n{% endif %}\r\nend",
     "",
     "crlf\nx\nend"},
    {"{% for i in range(3) -%}\n  {{ i }}\n{%- endfor %}",
     "",
     "012"},
    {"{{ {'a': {'b': 1}} }}|{{ '}}' }}|{{ '{%' }}",
     "",
     "{'a': {'b': 1}}|}}|{%"},
};

// Expressions: expected strings are jinja2 3.1's, rendered as transformers configures it.
const Case kExpressions[] = {
    {"{{ 1 + 2 * 3 }}|{{ (1 + 2) * 3 }}|{{ 10 - 2 - 3 }}|{{ 2 ** 3 ** 2 }}|{{ -3 ** 2 }}|{{ 7 % 3 }}|{{ -7 % 3 }}|{{ 7 // 2 }}|{{ -7 // 2 }}|{{ -7.5 // 2 }}|{{ 5 / 2 }}|{{ 4 / 2 }}|{{ 2 ** -1 }}",
     "",
     "7|9|5|64|9|1|2|3|-4|-4.0|2.5|2.0|0.5"},
    {"{{ 0.1 + 0.2 }}|{{ 1e16 }}|{{ 1e15 }}|{{ 0.0001 }}|{{ 0.00001 }}|{{ -0.0 }}|{{ 1.5e-7 }}|{{ 123456789.123 }}|{{ 3.0 }}|{{ 1_000 }}",
     "",
     "0.30000000000000004|1e+16|1000000000000000.0|0.0001|1e-05|-0.0|1.5e-07|123456789.123|3.0|1000"},
    {"{{ 'a' ~ 1 ~ none ~ true ~ undefined_name }}|{{ 'ab' * 3 }}|{{ [1] * 2 }}|{{ [1] + [2] }}|{{ 'x' + 'y' }}",
     "",
     "a1NoneTrue|ababab|[1, 1]|[1, 2]|xy"},
    {"{{ not true }}|{{ 1 and 2 }}|{{ 0 and 2 }}|{{ 0 or 'a' }}|{{ none or 0 }}|{{ not none }}",
     "",
     "False|2|0|a|0|True"},
    {"{{ 1 < 2 < 3 }}|{{ 3 > 2 > 2 }}|{{ 1 == 1.0 }}|{{ true == 1 }}|{{ (1,) == [1] }}|{{ 'a' != 'b' }}|{{ [1, 2] < [1, 3] }}|{{ 'b' >= 'a' }}",
     "",
     "True|False|True|True|False|True|True|True"},
    {"{{ 2 in [1, 2] }}|{{ 'b' in 'abc' }}|{{ 'k' in {'k': 1} }}|{{ 3 not in [1] }}|{{ 'z' not in 'abc' }}",
     "",
     "True|True|True|True|True"},
    {"{{ 1 if true }}|{{ 1 if false }}|{{ 1 if false else 2 }}|{{ 'x' if none else 'y' }}|{{ 'a' if 0 else 'b' if 1 else 'c' }}",
     "",
     "1||2|y|b"},
    {"{{ 'it\\'s' }}|{{ \"say \\\"hi\\\"\" }}|{{ 'tab\\there' }}|{{ 'a' 'b' }}|{{ '\\x41\\u00e9\\d' }}",
     "",
     "it's|say \"hi\"|tab\there|ab|Aé\\d"},
    {"{{ [1, 'a', none, true, 1.5] }}|{{ {'k': 'v', 1: [2]} }}|{{ (1, 2) }}|{{ (1,) }}|{{ () }}|{{ ['it\\'s', 'say \"x\"', \"both'\\\"\"] }}|{{ ['\\n', 'é', '\\x00'] }}",
     "",
     "[1, 'a', None, True, 1.5]|{'k': 'v', 1: [2]}|(1, 2)|(1,)|()|[\"it's\", 'say \"x\"', 'both\\'\"']|['\\n', 'é', '\\x00']"},
    {"{{ True }}{{ False }}{{ None }}|{{ true }}|{{ none }}|{{ undefined_name }}|{{ 1, 2 }}",
     "",
     "TrueFalseNone|True|None||(1, 2)"},
    {"{{ x.a }}|{{ x['a'] }}|{{ x.b[1] }}|{{ x['b'][-1] }}|{{ x.missing }}|{{ x.b.0 }}|{{ y['items'] }}|{{ y.items()|list }}",
     "{\"x\": {\"a\": 1, \"b\": [2, 3]}, \"y\": {\"items\": \"key\"}}",
     "1|1|3|3||2|key|[('items', 'key')]"},
    {"{{ 'abc'[::-1] }}|{{ [1, 2, 3][1:] }}|{{ [1, 2, 3][:-1] }}|{{ 'héllo'[1:3] }}|{{ [1, 2, 3, 4, 5][::2] }}|{{ [1, 2, 3][-1] }}|{{ 'abc'[5:] }}|{{ [1, 2, 3][::-2] }}|{{ 'héllo'[1] }}|{{ (1, 2, 3)[1:] }}",
     "",
     "cba|[2, 3]|[1, 2]|él|[1, 3, 5]|3||[3, 1]|é|(2, 3)"},
    {"{{ [1, 2][5] is defined }}|{{ none.foo is defined }}|{{ x.y is defined }}|{{ 'no' if x.y is not defined else x.y.z }}",
     "{\"x\": {}}",
     "False|False|False|no"},
};

// Statements: expected strings are jinja2 3.1's, rendered as transformers configures it.
const Case kStatements[] = {
    {"{% if x %}a{% elif y %}b{% else %}c{% endif %}|{% if y %}a{% elif x %}b{% endif %}",
     "{\"x\": 0, \"y\": \"s\"}",
     "b|a"},
    {"{% for k, v in {'a': 1, 'b': 2}.items() %}{{ loop.index }}{{ k }}={{ v }}{% if not loop.last %}, {% endif %}{% endfor %}",
     "",
     "1a=1, 2b=2"},
    {"{% for x in [1, 2, 3] %}{{ loop.previtem }}-{{ x }}-{{ loop.nextitem }}/{{ loop.index0 }}/{{ loop.revindex }}/{{ loop.revindex0 }}/{{ loop.length }}/{{ loop.first }};{% endfor %}",
     "",
     "-1-2/0/3/2/3/True;1-2-3/1/2/1/3/False;2-3-/2/1/0/3/False;"},
    {"{% for x in [1, 2, 3, 4, 5] if x is odd %}{{ x }}{% if loop.last %}L{% endif %}{% else %}none{% endfor %}|{% for x in [] %}x{% else %}empty{% endfor %}|{% for x in [2] if x > 5 %}x{% else %}filtered{% endfor %}",
     "",
     "135L|empty|filtered"},
    {"{% for x in range(10) %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 5 %}{% break %}{% endif %}{{ x }}{% endfor %}",
     "",
     "0134"},
    {"{% for c in 'ab' %}{{ c }}{% endfor %}|{% for k in {'x': 1, 'y': 2} %}{{ k }}{% endfor %}|{% for x in undefined_name %}x{% endfor %}|{% for i in range(1, 7, 2) %}{{ i }}{% endfor %}|{% for i in range(3, 0, -1) %}{{ i }}{% endfor %}",
     "",
     "ab|xy||135|321"},
    {"{% for row in [[1, 2], [3, 4]] %}{% for x in row %}{{ loop.index }}{{ x }}{% endfor %};{% endfor %}|{% for a, b in [(1, 2), (3, 4)] %}{{ a + b }}{% endfor %}",
     "",
     "1122;1324;|37"},
    {"{% for x in ['a', 'b', 'c'] %}{{ loop.cycle('odd', 'even') }}{% endfor %}",
     "",
     "oddevenodd"},
    {"{% for i in range(3) %}{% if i == 1 %}{% set y = 5 %}{% endif %}{{ y }},{% endfor %}|{% set x = 1 %}{% for i in [1] %}{% set x = 2 %}{% endfor %}{{ x }}|{% set z = 1 %}{% for i in range(2) %}{{ z }}{% set z = 2 %}{{ z }}{% endfor %}",
     "",
     ",5,,|1|1212"},
    {"{% set ns = namespace(a=1, found=false) %}{% for i in range(3) %}{% set ns.a = ns.a + i %}{% if i == 1 %}{% set ns.found = true %}{% endif %}{% endfor %}{{ ns.a }} {{ ns.found }}",
     "",
     "4 True"},
    {"{% set a, b = 1, 2 %}{{ a }}{{ b }}|{% set t = (3, 4) %}{% set c, d = t %}{{ c + d }}|{% if true %}{% set inner = 'v' %}{% endif %}{{ inner }}",
     "",
     "12|7|v"},
    {"{% set x %}  block {{ 1 + 1 }} {% endset %}[{{ x }}]{% set y | trim | upper %}  abc  {% endset %}[{{ y }}]",
     "",
     "[  block 2 ][ABC]"},
    {"{% macro greet(name, greeting='Hello') %}{{ greeting }}, {{ name }}!{% endmacro %}{{ greet('A') }} {{ greet('B', greeting='Hi') }} {{ greet(greeting='Yo', name='C') }} {{ greet() }}",
     "",
     "Hello, A! Hi, B! Yo, C! Hello, !"},
    {"{% macro f() %}{{ x }}{% endmacro %}{% set x = 3 %}{{ f() }}|{% macro g(n) %}{% if n > 0 %}{{ n }}{{ g(n - 1) }}{% endif %}{% endmacro %}{{ g(3) }}|{% macro h(a, b=a * 2) %}{{ b }}{% endmacro %}{{ h(4) }}",
     "",
     "3|321|8"},
    {"{% macro wrap() %}<{{ caller() }}>{% endmacro %}{% call wrap() %}inner{% endcall %}|{% macro each(items) %}{% for i in items %}{{ caller(i) }}{% endfor %}{% endmacro %}{% call(x) each([1, 2]) %}[{{ x }}]{% endcall %}",
     "",
     "<inner>|[1][2]"},
    {"{% filter upper %}abc {{ 'd' }}{% endfilter %}|{% with a = 1, b = 2 %}{{ a + b }}{% endwith %}{{ a }}",
     "",
     "ABC D|3"},
};

// Filters: expected strings are jinja2 3.1's, rendered as transformers configures it.
const Case kFilters[] = {
    {"{{ x | tojson }}|{{ x | tojson(indent=2) }}|{{ s | tojson }}|{{ [] | tojson(indent=2) }}|{{ {'b': 1, 'a': 2} | tojson(sort_keys=true) }}|{{ 'é<&>' | tojson }}|{{ 'é' | tojson(ensure_ascii=true) }}|{{ (1, 2) | tojson(separators=(',', ':')) }}",
     "{\"x\": {\"a\": [1, 2.0, \"é\"], \"b\": null, \"c\": true}, \"s\": \"Hi\\n\\t\\\"q\\\"\\u0001\"}",
     "{\"a\": [1, 2.0, \"é\"], \"b\": null, \"c\": true}|{\n  \"a\": [\n    1,\n    2.0,\n    \"é\"\n  ],\n  \"b\": null,\n  \"c\": true\n}|\"Hi\\n\\t\\\"q\\\"\\u0001\"|[]|{\"a\": 2, \"b\": 1}|\"é<&>\"|\"\\u00e9\"|[1,2]"},
    {"{{ '  x  ' | trim }}|{{ 'xxaxx' | trim('x') }}|{{ 'Hello' | lower }}|{{ 'Hello' | upper }}|{{ 'hello WORLD' | capitalize }}|{{ 'a-b c(d eF' | title }}|{{ 'aaa' | replace('a', 'b', 2) }}",
     "",
     "x|a|hello|HELLO|Hello world|A-B C(D Ef|bba"},
    {"{{ [1, 2, 3] | length }}|{{ 'héllo' | length }}|{{ {'a': 1} | count }}|{{ undefined_name | length }}|{{ [1, 2] | first }}|{{ [1, 2] | last }}|{{ [] | first }}|{{ 'abc' | list }}|{{ {'a': 1} | list }}|{{ {'a': 1} | items | list }}",
     "",
     "3|5|1|0|1|2||['a', 'b', 'c']|['a']|[('a', 1)]"},
    {"{{ [1, 2, 3] | join(', ') }}|{{ [1, 'a', none] | join }}|{{ x | join('/', attribute='n') }}|{{ undefined_name | join }}",
     "{\"x\": [{\"n\": 1}, {\"n\": 2}]}",
     "1, 2, 3|1aNone|1/2|"},
    {"{{ undefined_name | default('d') }}|{{ '' | default('d') }}|{{ '' | default('d', true) }}|{{ none | d('n') }}|{{ 0 | d(5, boolean=true) }}",
     "",
     "d||d|None|5"},
    {"{{ '3' | int + 1 }}|{{ 'x' | int }}|{{ 'x' | int(7) }}|{{ '42.7' | int }}|{{ ' 0x1A ' | int(base=16) }}|{{ 3.9 | int }}|{{ '2.5' | float }}|{{ 3 | float }}|{{ 'x' | float }}|{{ -3.5 | abs }}|{{ -2 | abs }}|{{ true | int }}",
     "",
     "4|0|7|42|26|3|2.5|3.0|0.0|3.5|2|1"},
    {"{{ 'ab' | safe }}|{{ 1 | string }}|{{ none | string }}|{{ [true, none, 1.5] | string }}|{{ '<a & b>' | e }}|{{ 'abc' | reverse }}|{{ [1, 2] | reverse | list }}|{{ 'x' | center(5) }}|{{ 'one two  three' | wordcount }}",
     "",
     "ab|1|None|[True, None, 1.5]|&lt;a &amp; b&gt;|cba|[2, 1]|  x  |3"},
    {"{{ x | map(attribute='a.b') | list }}|{{ x | map(attribute='z', default=0) | list }}|{{ [3, 1, 2] | map('string') | join(',') }}|{{ ['a', 'B'] | map('upper') | list }}|{{ x | map(attribute='a') | map(attribute='b') | sum }}",
     "{\"x\": [{\"a\": {\"b\": 1}}, {\"a\": {\"b\": 2}}]}",
     "[1, 2]|[0, 0]|3,1,2|['A', 'B']|3"},
    {"{{ x | selectattr('role', 'equalto', 'user') | list | length }}|{{ x | rejectattr('role', 'eq', 'user') | map(attribute='role') | list }}|{{ x | selectattr('tool') | list | length }}|{{ [0, 1, '', 'x'] | select | list }}|{{ [1, 2, 3, 4] | select('odd') | list }}|{{ [1, 2, 3, 4] | reject('divisibleby', 2) | list }}|{{ [1, 5, 9] | select('gt', 4) | list }}",
     "{\"x\": [{\"role\": \"user\"}, {\"role\": \"assistant\", \"tool\": true}, {\"role\": \"user\"}]}",
     "2|['assistant']|1|[1, 'x']|[1, 3]|[1, 3]|[5, 9]"},
    {"{{ ['b', 'A', 'a'] | sort }}|{{ ['b', 'A', 'a'] | sort(case_sensitive=true) }}|{{ [3, 1, 2] | sort(reverse=true) }}|{{ [{'a': 3}, {'a': 1}] | sort(attribute='a') }}|{{ ['b', 'A', 'a', 'b'] | unique | list }}|{{ [1, 2, 1] | unique | list }}|{{ {'b': 1, 'a': 2} | dictsort }}",
     "",
     "['A', 'a', 'b']|['A', 'a', 'b']|[3, 2, 1]|[{'a': 1}, {'a': 3}]|['b', 'A']|[1, 2]|[('a', 2), ('b', 1)]"},
    {"{{ 2.5 | round }}|{{ 3.5 | round }}|{{ 3 | round }}|{{ 2.675 | round(2) }}|{{ 2.1 | round(0, 'ceil') }}|{{ 2.9 | round(method='floor') }}|{{ [1, 2, 3] | max }}|{{ ['b', 'C'] | min }}|{{ [1, 2] | sum(start=10) }}",
     "",
     "2.0|4.0|3|2.67|3.0|2.0|3|b|13"},
    {"{{ 'a\\nb\\n\\nc' | indent }}|{{ 'a\\nb' | indent(2, true) }}|{{ 'a\\n\\nb' | indent(2, blank=true) }}|{{ 'x\\n' | indent('> ') }}",
     "",
     "a\n    b\n\n    c|  a\n  b|a\n  \n  b|x\n"},
    {"{{ '%s-%d' | format('a', 3) }}|{{ '%5s|%-5s|%05d|%+.2f|%x|%r|%c|%%|%.1e|%g' | format('é', 'ab', 42, 3.14159, 255, 'q', 65, 1234.5, 0.0001) }}|{{ '%(a)s' | format(a=1) }}|{{ '%s' % 5 }}|{{ '%s and %s' % ('x', 'y') }}",
     "",
     "a-3|    é|ab   |00042|+3.14|ff|'q'|A|%|1.2e+03|0.0001|1|5|x and y"},
};

// Tests: expected strings are jinja2 3.1's, rendered as transformers configures it.
const Case kTests[] = {
    {"{{ 'abc' is string }}{{ 1 is integer }}{{ true is integer }}{{ 1.0 is float }}{{ 1 is number }}{{ true is number }}{{ {} is mapping }}{{ [] is mapping }}{{ [] is iterable }}{{ 1 is iterable }}{{ 'a' is sequence }}{{ none is none }}{{ true is boolean }}{{ 1 is boolean }}",
     "",
     "TrueTrueFalseTrueTrueTrueTrueFalseTrueFalseTrueTrueTrueFalse"},
    {"{{ false is false }}{{ 0 is false }}{{ true is true }}{{ 1 is eq 1 }}{{ 2 is equalto 2 }}{{ 1 is ne 2 }}{{ 1 is in [1] }}{{ x is undefined }}{{ x is not defined }}{{ 4 is divisibleby 2 }}{{ 4 is even }}{{ 3 is odd }}{{ 'ab' is lower }}{{ 'AB' is upper }}{{ 3 is gt 2 }}{{ 3 is lessthan 2 }}",
     "",
     "TrueFalseTrueTrueTrueTrueTrueTrueTrueTrueTrueTrueTrueTrueTrueFalse"},
    {"{{ undefined_name is iterable }}{{ undefined_name is sequence }}{{ undefined_name is none }}{{ none is defined }}{{ range is callable }}{{ 'upper' is filter }}{{ 'odd' is test }}{{ (x is defined) and x }}",
     "",
     "TrueTrueFalseTrueTrueTrueTrueFalse"},
};

// Methods: expected strings are jinja2 3.1's, rendered as transformers configures it.
const Case kMethods[] = {
    {"{{ 'Hello World'.startswith('Hello') }}|{{ 'Hello World'.endswith(('x', 'World')) }}|{{ '  a '.strip() }}|{{ 'xxaxx'.lstrip('x') }}|{{ 'xxaxx'.rstrip('x') }}|{{ 'ABC'.lower() }}|{{ 'abc'.upper() }}|{{ 'a-b'.replace('-', '+') }}|{{ 'hi there'.title() }}|{{ 'hI'.capitalize() }}",
     "",
     "True|True|a|axx|xxa|abc|ABC|a+b|Hi There|Hi"},
    {"{{ 'a,b,,c'.split(',') }}|{{ ' a  b '.split() }}|{{ 'a b c'.split(None, 1) }}|{{ 'abc'.rsplit('b') }}|{{ 'a b c'.rsplit(' ', 1) }}|{{ 'l1\\nl2\\r\\nl3'.splitlines() }}|{{ '-'.join(['a', 'b']) }}|{{ 'abcb'.find('b') }}|{{ 'abcb'.rfind('b') }}|{{ 'abcb'.count('b') }}|{{ 'x'.zfill(3) }}|{{ 'k=v'.partition('=') }}",
     "",
     "['a', 'b', '', 'c']|['a', 'b']|['a', 'b c']|['a', 'c']|['a b', 'c']|['l1', 'l2', 'l3']|a-b|1|3|2|00x|('k', '=', 'v')"},
    {"{{ '{} and {:>5}|{:.2f}|{name!r}|{0}'.format if false }}{{ '{} and {:>5}|{:.2f}|{name!r}'.format('a', 'b', 3.14159, name='n') }}|{{ '{:*^9}|{:,}|{:+d}|{:.3}|{}|{:e}|{:>6.2%}|{!r:>6}'.format('mid', 1234567, 5, 1.0, 2.50, 12.5, 0.256, 'x') }}|{{ '{0}{1}{0}'.format('a', 'b') }}|{{ '{x[k]}'.format(x={'k': 1}) }}",
     "",
     "a and     b|3.14|'n'|***mid***|1,234,567|+5|1.0|2.5|1.250000e+01|25.60%|   'x'|aba|1"},
    {"{{ d.items() | list }}|{{ d.keys() | list }}|{{ d.values() | list }}|{{ d.get('a') }}|{{ d.get('z') }}|{{ d.get('z', 5) }}|{{ [1, 2, 1].count(1) }}|{{ [1, 2].index(2) }}|{{ d.pop is defined }}|{{ l.append is defined }}",
     "{\"d\": {\"a\": 1, \"b\": [2, 3]}, \"l\": [1]}",
     "[('a', 1), ('b', [2, 3])]|['a', 'b']|[1, [2, 3]]|1|None|5|2|1|False|False"},
    {"{{ dict(a=1, b='x') }}|{{ dict({'a': 1}, b=2) }}|{{ dict([('k', 'v')]) }}|{{ namespace(x=1).x }}|{{ namespace({'y': 2}).y }}|{% set j = joiner('+') %}{% for i in range(3) %}{{ j() }}{{ i }}{% endfor %}",
     "",
     "{'a': 1, 'b': 'x'}|{'a': 1, 'b': 2}|{'k': 'v'}|1|2|0+1+2"},
};

TEST(JinjaWhitespace, MatchesJinja2) { expect_cases(kWhitespace, std::size(kWhitespace)); }
TEST(JinjaExpressions, MatchJinja2) { expect_cases(kExpressions, std::size(kExpressions)); }
TEST(JinjaStatements, MatchJinja2) { expect_cases(kStatements, std::size(kStatements)); }
TEST(JinjaFilters, MatchJinja2) { expect_cases(kFilters, std::size(kFilters)); }
TEST(JinjaTests, MatchJinja2) { expect_cases(kTests, std::size(kTests)); }
TEST(JinjaMethods, MatchJinja2) { expect_cases(kMethods, std::size(kMethods)); }

// transformers' AssistantTracker extension: {% generation %} renders its body.
TEST(JinjaStatements, GenerationRendersItsBody) {
  auto r = render("{% for m in ['a', 'b'] %}{% generation %}<{{ m }}>{% endgeneration %}{% endfor %}");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(*r, "<a><b>");
}

TEST(JinjaContext, KeyOrderFollowsTheJsonType) {
  const std::string source = "{{ tool | tojson }}|{% for k in tool %}{{ k }}{% endfor %}";
  auto t = Template::parse(source, "order.jinja");
  ASSERT_TRUE(t.ok());
  // ordered_json keeps the request's order, as Python's dict does ...
  auto ordered = t->render(ordered_json::parse(R"({"tool": {"name": "f", "description": "d"}})"));
  ASSERT_TRUE(ordered.ok());
  EXPECT_EQ(*ordered, R"({"name": "f", "description": "d"}|namedescription)");
  // ... nlohmann::json sorts keys.
  auto sorted = t->render(nlohmann::json::parse(R"({"tool": {"name": "f", "description": "d"}})"));
  ASSERT_TRUE(sorted.ok());
  EXPECT_EQ(*sorted, R"({"description": "d", "name": "f"}|descriptionname)");
}

TEST(JinjaContext, RefusesWhatPythonCouldNotHold) {
  auto t = Template::parse("{{ messages }}", "ctx.jinja");
  ASSERT_TRUE(t.ok());
  auto not_object = t->render(ordered_json::array());
  ASSERT_FALSE(not_object.ok());
  EXPECT_ERROR_HAS(not_object.status(), "must be a JSON object");
  ordered_json bad = ordered_json::parse(R"({"messages": [{"role": "user", "content": "x"}]})");
  bad["messages"][0]["content"] = std::string("a\xff");
  auto invalid = t->render(bad);
  ASSERT_FALSE(invalid.ok());
  EXPECT_ERROR_HAS(invalid.status(), "ctx.jinja: context.messages[0].content: invalid UTF-8");
  // Large unsigned integers become floats; null context is an empty one.
  auto big = render("{{ n }}", ordered_json::parse(R"({"n": 18446744073709551615})"));
  ASSERT_TRUE(big.ok());
  EXPECT_EQ(*big, "1.8446744073709552e+19");
  auto null_ctx = Template::parse("[{{ x }}]", "n").value().render(ordered_json());
  ASSERT_TRUE(null_ctx.ok());
  EXPECT_EQ(*null_ctx, "[]");
}

TEST(JinjaGlobals, StrftimeNowAndContextShadowing) {
  auto year = render("{{ strftime_now('%Y') }}");
  ASSERT_TRUE(year.ok());
  ASSERT_EQ(year->size(), 4u);
  EXPECT_GE(std::stoi(*year), 2024);
  // Variables from the context shadow globals, as render kwargs do in jinja2.
  auto shadow = render("{{ range }}", ordered_json::parse(R"({"range": "mine"})"));
  ASSERT_TRUE(shadow.ok());
  EXPECT_EQ(*shadow, "mine");
}

TEST(JinjaTemplate, RendersConcurrently) {
  auto t = Template::parse(
      "{% set ns = namespace(n=0) %}{% for m in messages %}{% set ns.n = ns.n + m | length %}{% endfor %}{{ ns.n }}",
      "threads.jinja");
  ASSERT_TRUE(t.ok());
  const Template shared = *t;  // copies share the parsed tree
  std::vector<std::thread> threads;
  std::vector<std::string> results(8);
  for (int k = 0; k < 8; ++k) {
    threads.emplace_back([&, k] {
      ordered_json ctx = {{"messages", ordered_json::array()}};
      for (int i = 0; i <= k; ++i) ctx["messages"].push_back("abc");
      auto r = shared.render(ctx);
      results[static_cast<size_t>(k)] = r.ok() ? *r : r.status().message();
    });
  }
  for (auto& th : threads) th.join();
  for (int k = 0; k < 8; ++k) EXPECT_EQ(results[static_cast<size_t>(k)], std::to_string(3 * (k + 1)));
}

// ---- errors: each names the template and line:column ----

TEST(JinjaErrors, UnclosedTagsAndBlocks) {
  auto expr = Template::parse("line one\n  {{ x ", "t.jinja");
  ASSERT_FALSE(expr.ok());
  EXPECT_ERROR_HAS(expr.status(), "t.jinja:2:3: unclosed tag");
  auto comment = Template::parse("a {# never closed", "t.jinja");
  ASSERT_FALSE(comment.ok());
  EXPECT_ERROR_HAS(comment.status(), "t.jinja:1:3: unclosed comment");
  auto block = Template::parse("{% for x in xs %}\n{% if x %}\n{% endif %}", "t.jinja");
  ASSERT_FALSE(block.ok());
  EXPECT_ERROR_HAS(block.status(), "t.jinja:1:4: 'for' is not closed: expected '{% endfor %}'");
  auto inner = Template::parse("{% for x in xs %}\n{% if x %}\n{% endfor %}", "t.jinja");
  ASSERT_FALSE(inner.ok());
  EXPECT_ERROR_HAS(inner.status(), "t.jinja:3:4: unexpected 'endfor'");
  auto string = Template::parse("{{ 'abc }}", "t.jinja");
  ASSERT_FALSE(string.ok());
  EXPECT_ERROR_HAS(string.status(), "t.jinja:1:4: unterminated string literal");
}

TEST(JinjaErrors, UnknownNamesAreSyntaxErrors) {
  // jinja2 checks filter and test names when compiling: a branch that never
  // runs still fails.
  auto filter = Template::parse("{% if false %}{{ x | no_such_filter }}{% endif %}", "t.jinja");
  ASSERT_FALSE(filter.ok());
  EXPECT_ERROR_HAS(filter.status(), "t.jinja:1:22: no filter named 'no_such_filter'");
  auto test = Template::parse("\n{{ x is no_such_test }}", "t.jinja");
  ASSERT_FALSE(test.ok());
  EXPECT_ERROR_HAS(test.status(), "t.jinja:2:6: no test named 'no_such_test'");
  auto tag = Template::parse("{% include 'other.jinja' %}", "t.jinja");
  ASSERT_FALSE(tag.ok());
  EXPECT_ERROR_HAS(tag.status(), "t.jinja:1:4: unknown tag 'include'");
  auto brk = Template::parse("{% break %}", "t.jinja");
  ASSERT_FALSE(brk.ok());
  EXPECT_ERROR_HAS(brk.status(), "'break' outside of a for loop");
  auto syntax = Template::parse("{{ 1 + }}", "t.jinja");
  ASSERT_FALSE(syntax.ok());
  EXPECT_ERROR_HAS(syntax.status(), "t.jinja:1:8: unexpected '}}'");
}

TEST(JinjaErrors, RaiseExceptionNamesTheTemplateAndLine) {
  const std::string source =
      "{% for m in messages %}\n"
      "{% if m.role not in ['user', 'assistant'] %}\n"
      "  {{ raise_exception('Unknown role: ' + m.role) }}\n"
      "{% endif %}\n"
      "{% endfor %}";
  const Status s = render_error(source, ordered_json::parse(R"({"messages": [{"role": "tool"}]})"));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "test.jinja:3:6: raise_exception: Unknown role: tool");
}

TEST(JinjaErrors, EvaluationErrorsNameTheLine) {
  EXPECT_ERROR_HAS(render_error("ok\n{{ missing + 1 }}"), "test.jinja:2:4: 'missing' is undefined");
  EXPECT_ERROR_HAS(render_error("{{ missing.attr }}"), "test.jinja:1:4: 'missing' is undefined");
  EXPECT_ERROR_HAS(render_error("{{ 1 + 'a' }}"), "unsupported operand type(s) for +: 'int' and 'str'");
  EXPECT_ERROR_HAS(render_error("{{ 1 / 0 }}"), "division by zero");
  EXPECT_ERROR_HAS(render_error("{{ 1 < 'a' }}"), "'<' not supported between instances of 'int' and 'str'");
  EXPECT_ERROR_HAS(render_error("{{ x | tojson }}"), "Object of type Undefined is not JSON serializable");
  EXPECT_ERROR_HAS(render_error("{{ [1].append(2) }}"), "access to attribute 'append' of 'list' object is unsafe");
  EXPECT_ERROR_HAS(render_error("{% macro f(a) %}{% endmacro %}{{ f(1, 2) }}"),
                   "macro 'f' takes not more than 1 argument(s)");
  EXPECT_ERROR_HAS(render_error("{% macro f(a) %}{% endmacro %}{{ f(b=1) }}"), "macro 'f' takes no keyword argument 'b'");
  EXPECT_ERROR_HAS(render_error("{{ 'x' | tojson(indnt=2) }}"), "tojson() got an unexpected keyword argument 'indnt'");
  EXPECT_ERROR_HAS(render_error("{% set a, b = [1] %}"), "not enough values to unpack (expected 2, got 1)");
  EXPECT_ERROR_HAS(render_error("{% set x = 1 %}{% set x.y = 2 %}"), "it is not a namespace");
  EXPECT_ERROR_HAS(render_error("{{ range(200000) | length }}"), "MAX_RANGE (100000)");
  EXPECT_ERROR_HAS(render_error("{{ 9223372036854775807 + 1 }}"), "integer overflow");
  EXPECT_ERROR_HAS(render_error("{{ [1, 2][::0] }}"), "slice step cannot be zero");
}

// ---- limits: hostile templates end with an error, never a crash or hang ----

// round() with more negative digits than a double has tens is zero with
// the value's sign, as in Python; INT64_MIN digits once overflowed negating
// them (a UBSan report).
TEST(JinjaFilters, RoundPastTheRangeOfTens) {
  EXPECT_EQ(*render("{{ 1.5 | round(-9223372036854775807 - 1) }}|{{ -1.5 | round(-400) }}|{{ 1e300 | round(-308) }}|"
                    "{{ 123.4 | round(-1) }}"),
            "0.0|-0.0|0.0|120.0");
}

// A presentation type a number cannot take is refused as Python refuses it.
// Each reached snprintf as a conversion for an argument never passed ('s'
// read a pointer where a double was); found by the template fuzzer.
TEST(JinjaErrors, FormatCodesANumberCannotTake) {
  EXPECT_ERROR_HAS(render_error("{{ '{:.2s}'.format(1.5) }}"), "unknown format code 's' for float");
  EXPECT_ERROR_HAS(render_error("{{ '{:s}'.format(7) }}"), "unknown format code 's' for int");
  EXPECT_ERROR_HAS(render_error("{{ '{:p}'.format(2.5) }}"), "unknown format code 'p' for float");
  EXPECT_ERROR_HAS(render_error("{{ '{:.2[}'.format(2.5) }}"), "unknown format code '[' for float");
  EXPECT_EQ(*render("{{ '{:e}|{:.1%}|{:G}|{:F}'.format(12.5, 0.25, 1e20, 2) }}"), "1.250000e+01|25.0%|1E+20|2.000000");
}

TEST(JinjaLimits, RunawayRecursion) {
  const Status s = render_error("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}");
  EXPECT_EQ(s.code(), StatusCode::kOutOfBudget);
  EXPECT_ERROR_HAS(s, "macro calls nested more than 100 deep (calling 'f')");
}

TEST(JinjaLimits, LoopIterations) {
  RenderLimits limits;
  limits.max_loop_iterations = 1000;
  const Status s =
      render_error("{% for i in range(100) %}{% for j in range(100) %}{% endfor %}{% endfor %}", {}, limits);
  EXPECT_EQ(s.code(), StatusCode::kOutOfBudget);
  EXPECT_ERROR_HAS(s, "template loops ran more than 1000 iterations");
}

TEST(JinjaLimits, OutputAndStringSize) {
  RenderLimits limits;
  limits.max_output_bytes = 1000;
  const Status out = render_error("{% for i in range(100) %}{{ 'x' * 20 }}{% endfor %}", {}, limits);
  EXPECT_EQ(out.code(), StatusCode::kOutOfBudget);
  EXPECT_ERROR_HAS(out, "exceeds the limit of 1000 bytes");
  // Strings built on the way count too, not just what is printed.
  EXPECT_ERROR_HAS(render_error("{% set s = 'a' * 5000 %}", {}, limits), "test.jinja:1:12: a string of 5000 bytes exceeds the limit of 1000 bytes");
  EXPECT_ERROR_HAS(render_error("{% set ns = namespace(s='ab') %}{% for i in range(60) %}"
                                "{% set ns.s = ns.s ~ ns.s %}{% endfor %}"),
                   "exceeds the limit of 67108864 bytes");
}

TEST(JinjaLimits, WorkBudget) {
  RenderLimits limits;
  limits.max_steps = 100000;
  const Status s = render_error(
      "{% set ns = namespace(x=[]) %}{% for i in range(5000) %}{% set ns.x = ns.x + [i] %}{% endfor %}", {}, limits);
  EXPECT_EQ(s.code(), StatusCode::kOutOfBudget);
  EXPECT_ERROR_HAS(s, "work budget of 100000 steps");
  // Shared sublists printed as a tree grow exponentially.
  EXPECT_ERROR_HAS(render_error("{% set ns = namespace(x=[1]) %}{% for i in range(40) %}"
                                "{% set ns.x = [ns.x, ns.x] %}{% endfor %}{{ ns.x }}"),
                   "exceeds the limit");
}

TEST(JinjaLimits, Nesting) {
  EXPECT_ERROR_HAS(Template::parse("{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}", "t")
                       .status(),
                   "expression nested more than 256 levels deep");
  std::string chain = "{{ 1";
  for (int k = 0; k < 5000; ++k) chain += " + 1";
  EXPECT_ERROR_HAS(Template::parse(chain + " }}", "t").status(), "expression nested more than 256 levels deep");
  std::string blocks;
  for (int k = 0; k < 200; ++k) blocks += "{% if true %}";
  EXPECT_ERROR_HAS(Template::parse(blocks, "t").status(), "blocks nested more than 64 deep");
  EXPECT_ERROR_HAS(render_error("{% set ns = namespace(x=[]) %}{% for i in range(1000) %}"
                                "{% set ns.x = [ns.x] %}{% endfor %}"),
                   "a value nested more than 128 levels deep");
  std::string deep = "1";
  for (int k = 0; k < 500; ++k) deep = "[" + deep + "]";
  auto t = Template::parse("{{ x }}", "deep.jinja");
  ASSERT_TRUE(t.ok());
  auto r = t->render(ordered_json::parse("{\"x\": " + deep + "}"));
  ASSERT_FALSE(r.ok());
  EXPECT_ERROR_HAS(r.status(), "deep.jinja: context.x");
  EXPECT_ERROR_HAS(r.status(), "nested too deep");
}

TEST(JinjaLimits, NamespaceCyclesPrintAndFree) {
  auto r = render("{% set ns = namespace() %}{% set ns.self = ns %}{{ ns }}");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(*r, "<Namespace {'self': <Namespace {...}>}>");
  // A long chain of namespaces is freed without recursing down it.
  auto chain = render(
      "{% set ns = namespace(x=none) %}{% for i in range(100000) %}{% set ns.x = namespace(n=ns.x) %}{% endfor %}ok");
  ASSERT_TRUE(chain.ok()) << chain.status().message();
  EXPECT_EQ(*chain, "ok");
}

}  // namespace
}  // namespace replayssm::chat
