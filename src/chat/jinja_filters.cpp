// jinja2's filters, with transformers' tojson (see jinja_builtins.h).
//
// Each follows the jinja2 3.1 function of the same name (do_join, do_map,
// ...), including its quirks: |int parses "42.7" as 42, |round rounds half
// to even as Python's round() does, |sort and |unique compare strings
// case-insensitively unless told otherwise, |first of an empty sequence is
// Undefined.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <unordered_map>

#include "chat/jinja_builtins.h"
#include "chat/jinja_eval.h"
#include "chat/jinja_operators.h"
#include "chat/jinja_string.h"

namespace replayssm::chat {

namespace {

using Args = std::vector<std::optional<Value>>;

Status bad_arg(const char* filter, const char* param, const char* want, const Value& got) {
  return invalid_argument(std::string(filter) + ": '" + param + "' must be " + want + ", not " + got.type_name());
}

Result<int64_t> int_param(const char* filter, const char* param, const std::optional<Value>& v, int64_t dflt) {
  if (!v || v->is_none()) return dflt;
  if (v->type() == Value::Type::kInt) return v->as_int();
  if (v->type() == Value::Type::kBool) return int64_t{v->as_bool()};
  return bad_arg(filter, param, "an integer", *v);
}

bool bool_param(const std::optional<Value>& v, bool dflt) { return v ? v->truthy() : dflt; }

Result<Value> meter_error(Evaluator& ev) { return out_of_budget(ev.meter().why()); }

// jinja2's make_attrgetter: "a.b.0" looks up a, then b, then item 0, each
// with getitem semantics (item first, then attribute).
Value get_path(const Value& item, const std::string& path) {
  Value v = item;
  size_t b = 0;
  while (b <= path.size()) {
    const size_t e = std::min(path.find('.', b), path.size());
    const std::string part = path.substr(b, e - b);
    if (v.is_undefined()) return v;
    char* end = nullptr;
    const long long idx = std::strtoll(part.c_str(), &end, 10);
    const bool numeric = !part.empty() && end && *end == '\0';
    v = get_item(v, numeric ? Value::integer(idx) : Value::string(part));
    b = e + 1;
  }
  return v;
}

// The sort/unique key: lowercased strings unless case-sensitive.
Value fold_case(const Value& v, bool case_sensitive) {
  if (case_sensitive || !v.is_string()) return v;
  return Value::string(py_lower(v.as_string()));
}

Result<std::vector<Value>> items_of(Evaluator& ev, const Value& v) { return iterate(v, ev.meter()); }

// ---- filters ----

Result<Value> f_abs(Evaluator&, const Value& v, const CallArgs& args) {
  RSSM_ASSIGN_OR_RETURN(Args a, bind_args("abs", args, {}));
  if (v.is_float()) return Value::number(std::fabs(v.as_float()));
  if (v.is_number()) {
    const int64_t i = v.type() == Value::Type::kBool ? v.as_bool() : v.as_int();
    if (i == INT64_MIN) return invalid_argument("abs: integer overflow");
    return Value::integer(i < 0 ? -i : i);
  }
  if (v.is_undefined()) return undefined_error(v);
  return invalid_argument(std::string("bad operand type for abs(): '") + v.type_name() + "'");
}

Result<Value> f_attr(Evaluator&, const Value& v, const CallArgs& args) {
  RSSM_ASSIGN_OR_RETURN(Args a, bind_args("attr", args, {"name"}));
  if (!a[0] || !a[0]->is_string()) return invalid_argument("attr: 'name' must be a string");
  if (v.is_undefined()) return undefined_error(v);
  const std::string& name = a[0]->as_string();
  if (v.type() == Value::Type::kNamespace) return get_attr(v, name);
  if (auto m = find_method(v, name)) return *m;
  return Value::undefined(object_type_repr(v) + " has no attribute '" + name + "'");
}

Result<Value> f_capitalize(Evaluator& ev, const Value& v, const CallArgs& args) {
  RSSM_ASSIGN_OR_RETURN(Args a, bind_args("capitalize", args, {}));
  return Value::string(py_capitalize(to_str(v, ev.meter())));
}

Result<Value> f_center(Evaluator& ev, const Value& v, const CallArgs& args) {
  RSSM_ASSIGN_OR_RETURN(Args a, bind_args("center", args, {"width"}));
  RSSM_ASSIGN_OR_RETURN(int64_t width, int_param("center", "width", a[0], 80));
  const std::string s = to_str(v, ev.meter());
  const auto len = static_cast<int64_t>(py_len(s));
  if (width <= len) return Value::string(s);
  if (!ev.meter().build_string(s.size() + static_cast<size_t>(width - len))) return meter_error(ev);
  // str.center puts the odd space on the right unless the text length is odd.
  const int64_t pad = width - len;
  const int64_t left = pad / 2 + (pad & width & 1);
  return Value::string(std::string(static_cast<size_t>(left), ' ') + s +
                       std::string(static_cast<size_t>(pad - left), ' '));
}

Result<Value> f_length(Evaluator&, const Value& v, const CallArgs& args) {
  RSSM_ASSIGN_OR_RETURN(Args a, bind_args("length", args, {}));
  RSSM_ASSIGN_OR_RETURN(int64_t n, length(v));
  return Value::integer(n);
}

Result<Value> f_default(Evaluator&, const Value& v, const CallArgs& args) {
  RSSM_ASSIGN_OR_RETURN(Args a, bind_args("default", args, {"default_value", "boolean"}));
  const bool use_default = v.is_undefined() || (bool_param(a[1], false) && !v.truthy());
  if (!use_default) return v;
  return a[0] ? *a[0] : Value::string("");
}

Result<Value> f_dictsort(Evaluator& ev, const Value& v, const CallArgs& args) {
  RSSM_ASSIGN_OR_RETURN(Args a, bind_args("dictsort", args, {"case_sensitive", "by", "reverse"}));
  if (!v.is_dict()) return invalid_argument("dictsort: can only sort a dict");
  const bool cs = bool_param(a[0], false);
  const bool by_value = a[1] && a[1]->is_string() && a[1]->as_string() == "value";
  if (a[1] && !(a[1]->is_string() && (a[1]->as_string() == "key" || a[1]->as_string() == "value")))
    return invalid_argument("dictsort: 'by' must be 'key' or 'value'");
  std::vector<Value> pairs;
  for (const auto& [k, val] : v.as_dict().entries()) pairs.push_back(Value::list({k, val}, true));
  bool type_error = false;
  std::stable_sort(pairs.begin(), pairs.end(), [&](const Value& x, const Value& y) {
    const Value kx = fold_case(x.as_list().items[by_value ? 1 : 0], cs);
    const Value ky = fold_case(y.as_list().items[by_value ? 1 : 0], cs);
    const auto o = py_compare(kx, ky, ev.meter());
    if (!o) type_error = true;
    return o && *o < 0;
  });
  if (type_error) return invalid_argument("dictsort: values of different types cannot be ordered");
  if (bool_param(a[2], false)) std::reverse(pairs.begin(), pairs.end());
  return Value::list(std::move(pairs));
}

Result<Value> f_escape(Evaluator& ev, const Value& v, const CallArgs& args) {
  RSSM_ASSIGN_OR_RETURN(Args a, bind_args("escape", args, {}));
  const std::string s = to_str(v, ev.meter());
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out.push_back(c);
    }
  }
  return Value::string(std::move(out));
}

Result<Value> f_first(Evaluator& ev, const Value& v, const CallArgs& args) {
  RSSM_ASSIGN_OR_RETURN(Args a, bind_args("first", args, {}));
  RSSM_ASSIGN_OR_RETURN(std::vector<Value> items, items_of(ev, v));
  if (items.empty()) return Value::undefined("No first item, sequence was empty.");
  return items.front();
}

Result<Value> f_last(Evaluator& ev, const Value& v, const CallArgs& args) {
  RSSM_ASSIGN_OR_RETURN(Args a, bind_args("last", args, {}));
  RSSM_ASSIGN_OR_RETURN(std::vector<Value> items, items_of(ev, v));
  if (items.empty()) return Value::undefined("No last item, sequence was empty.");
  return items.back();
}

// Python's float(str): surrounding whitespace, underscores between digits,
// "inf" / "nan" in any case.
std::optional<double> parse_float(const std::string& text) {
  std::string s = py_strip(text, std::nullopt, true, true);
  std::string clean;
  for (size_t k = 0; k < s.size(); ++k) {
    if (s[k] == '_' && k > 0 && k + 1 < s.size() && std::isdigit(static_cast<unsigned char>(s[k - 1])) &&
        std::isdigit(static_cast<unsigned char>(s[k + 1])))
      continue;
    clean.push_back(s[k]);
  }
  if (clean.empty()) return std::nullopt;
  const std::string lower = py_lower(clean);
  const std::string_view body = lower[0] == '+' || lower[0] == '-' ? std::string_view(lower).substr(1) : lower;
  if (body == "inf" || body == "infinity" || body == "nan") {
    const double x = body == "nan" ? NAN : INFINITY;
    return lower[0] == '-' ? -x : x;
  }
  for (char c : body)
    if (!std::isdigit(static_cast<unsigned char>(c)) && c != '.' && c != 'e' && c != '+' && c != '-') return std::nullopt;
  char* end = nullptr;
  const double d = std::strtod(clean.c_str(), &end);
  if (end != clean.c_str() + clean.size()) return std::nullopt;
  return d;
}

// Python's int(str, base): whitespace, sign, underscores, a 0x/0o/0b
// prefix matching the base (or any, with base 0).
std::optional<int64_t> parse_int(const std::string& text, int64_t base) {
  std::string s = py_strip(text, std::nullopt, true, true);
  bool neg = false;
  size_t k = 0;
  if (k < s.size() && (s[k] == '+' || s[k] == '-')) neg = s[k++] == '-';
  if (k + 1 < s.size() && s[k] == '0') {
    const char p = static_cast<char>(s[k + 1] | 0x20);
    const int64_t pb = p == 'x' ? 16 : p == 'o' ? 8 : p == 'b' ? 2 : 0;
    if (pb && (base == pb || base == 0)) {
      base = pb;
      k += 2;
      if (k < s.size() && s[k] == '_') ++k;
    }
  }
  if (base == 0) base = 10;
  if (base < 2 || base > 36 || k >= s.size()) return std::nullopt;
  uint64_t v = 0;
  bool prev_digit = false;
  for (; k < s.size(); ++k) {
    const char c = s[k];
    if (c == '_' && prev_digit && k + 1 < s.size() && s[k + 1] != '_') {
      prev_digit = false;
      continue;
    }
    int d = -1;
    if (c >= '0' && c <= '9') d = c - '0';
    else if ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') d = (c | 0x20) - 'a' + 10;
    if (d < 0 || d >= base) return std::nullopt;
    if (v > (static_cast<uint64_t>(INT64_MAX) + 1 - static_cast<uint64_t>(d)) / static_cast<uint64_t>(base))
      return std::nullopt;
    v = v * static_cast<uint64_t>(base) + static_cast<uint64_t>(d);
    prev_digit = true;
  }
  if (!prev_digit) return std::nullopt;
  if (!neg && v > static_cast<uint64_t>(INT64_MAX)) return std::nullopt;
  return neg ? static_cast<int64_t>(0 - v) : static_cast<int64_t>(v);
}

Result<Value> f_float(Evaluator&, const Value& v, const CallArgs& args) {
  RSSM_ASSIGN_OR_RETURN(Args a, bind_args("float", args, {"default"}));
  const Value dflt = a[0] ? *a[0] : Value::number(0.0);
  if (v.is_number()) return Value::number(v.to_double());
  if (v.is_string()) {
    if (auto d = parse_float(v.as_string())) return Value::number(*d);
  }
  return dflt;
}

Result<Value> f_int(Evaluator&, const Value& v, const CallArgs& args) {
  RSSM_ASSIGN_OR_RETURN(Args a, bind_args("int", args, {"default", "base"}));
  const Value dflt = a[0] ? *a[0] : Value::integer(0);
  RSSM_ASSIGN_OR_RETURN(int64_t base, int_param("int", "base", a[1], 10));
  if (v.is_float()) {
    const double d = v.as_float();
    if (std::isnan(d)) return dflt;
    if (std::isinf(d) || std::fabs(d) >= 9.2233720368547758e18)
      return invalid_argument("int: cannot convert " + format_float(d) + " to a 64-bit integer");
    return Value::integer(static_cast<int64_t>(d));
  }
  if (v.is_number()) return Value::integer(v.type() == Value::Type::kBool ? v.as_bool() : v.as_int());
  if (v.is_string()) {
    if (auto i = parse_int(v.as_string(), base)) return Value::integer(*i);
    // jinja2's quirk: "42.23"|int is 42, through float().
    if (auto d = parse_float(v.as_string())) {
      if (std::isnan(*d)) return dflt;
      if (std::isinf(*d) || std::fabs(*d) >= 9.2233720368547758e18)
        return invalid_argument("int: cannot convert " + v.as_string() + " to a 64-bit integer");
      return Value::integer(static_cast<int64_t>(*d));
    }
  }
  return dflt;
}

Result<Value> f_format(Evaluator& ev, const Value& v, const CallArgs& args) {
  if (!args.positional.empty() && !args.keyword.empty())
    return invalid_argument("format: can't handle positional and keyword arguments at the same time");
  Value operands;
  if (!args.keyword.empty()) {
    Dict d;
    for (const auto& [k, val] : args.keyword) d.set(Value::string(k), val);
    operands = Value::dict(std::move(d));
  } else {
    operands = Value::list(args.positional, true);
  }
  RSSM_ASSIGN_OR_RETURN(std::string s, percent_format(to_str(v, ev.meter()), operands, ev.meter()));
  return Value::string(std::move(s));
}

Result<Value> f_indent(Evaluator& ev, const Value& v, const CallArgs& args) {
  RSSM_ASSIGN_OR_RETURN(Args a, bind_args("indent", args, {"width", "first", "blank"}));
  std::string indention;
  if (a[0] && a[0]->is_string()) {
    indention = a[0]->as_string();
  } else {
    RSSM_ASSIGN_OR_RETURN(int64_t width, int_param("indent", "width", a[0], 4));
    indention.assign(static_cast<size_t>(std::max<int64_t>(0, std::min<int64_t>(width, 4096))), ' ');
  }
  const bool first = bool_param(a[1], false);
  const bool blank = bool_param(a[2], false);
  // jinja2 appends "\n" and splits with splitlines(), so a trailing newline
  // does not grow an indented empty line.
  const std::vector<std::string> lines = py_splitlines(to_str(v, ev.meter()) + "\n", false);
  std::string out;
  for (size_t k = 0; k < lines.size(); ++k) {
    if (k > 0) {
      out += "\n";
      if (blank || !lines[k].empty()) out += indention;
    }
    out += lines[k];
    if (!ev.meter().fits(out.size())) return meter_error(ev);
  }
  if (first) out = indention + out;
  ev.meter().build_string(out.size());
  return Value::string(std::move(out));
}

Result<Value> f_items(Evaluator&, const Value& v, const CallArgs& args) {
  RSSM_ASSIGN_OR_RETURN(Args a, bind_args("items", args, {}));
  if (v.is_undefined()) return Value::list({});
  if (!v.is_dict()) return invalid_argument("items: can only get item pairs from a mapping");
  std::vector<Value> pairs;
  for (const auto& [k, val] : v.as_dict().entries()) pairs.push_back(Value::list({k, val}, true));
  return Value::list(std::move(pairs));
}

Result<Value> f_join(Evaluator& ev, const Value& v, const CallArgs& args) {
  RSSM_ASSIGN_OR_RETURN(Args a, bind_args("join", args, {"d", "attribute"}));
  const std::string sep = a[0] ? to_str(*a[0], ev.meter()) : "";
  RSSM_ASSIGN_OR_RETURN(std::vector<Value> items, items_of(ev, v));
  std::string out;
  for (size_t k = 0; k < items.size(); ++k) {
    if (k) out += sep;
    const Value item = a[1] && !a[1]->is_none() ? get_path(items[k], to_str(*a[1], ev.meter())) : items[k];
    append_str(item, ev.meter(), &out);
    if (!ev.meter().fits(out.size())) return meter_error(ev);
  }
  ev.meter().build_string(out.size());
  return Value::string(std::move(out));
}

Result<Value> f_list(Evaluator& ev, const Value& v, const CallArgs& args) {
  RSSM_ASSIGN_OR_RETURN(Args a, bind_args("list", args, {}));
  RSSM_ASSIGN_OR_RETURN(std::vector<Value> items, items_of(ev, v));
  return Value::list(std::move(items));
}

Result<Value> f_lower(Evaluator& ev, const Value& v, const CallArgs& args) {
  RSSM_ASSIGN_OR_RETURN(Args a, bind_args("lower", args, {}));
  return Value::string(py_lower(to_str(v, ev.meter())));
}

Result<Value> f_upper(Evaluator& ev, const Value& v, const CallArgs& args) {
  RSSM_ASSIGN_OR_RETURN(Args a, bind_args("upper", args, {}));
  return Value::string(py_upper(to_str(v, ev.meter())));
}

Result<Value> f_title(Evaluator& ev, const Value& v, const CallArgs& args) {
  RSSM_ASSIGN_OR_RETURN(Args a, bind_args("title", args, {}));
  return Value::string(jinja_title(to_str(v, ev.meter())));
}

// map(attribute="x", default=d) or map("filter", args...).
Result<Value> f_map(Evaluator& ev, const Value& v, const CallArgs& args) {
  RSSM_ASSIGN_OR_RETURN(std::vector<Value> items, items_of(ev, v));
  std::vector<Value> out;
  out.reserve(items.size());
  if (args.positional.empty()) {
    RSSM_ASSIGN_OR_RETURN(Args a, bind_args("map", args, {"attribute", "default"}));
    if (!a[0]) return invalid_argument("map: needs a filter name or attribute=");
    const std::string path = to_str(*a[0], ev.meter());
    for (const Value& item : items) {
      Value x = get_path(item, path);
      if (x.is_undefined() && a[1]) x = *a[1];
      out.push_back(std::move(x));
    }
    return Value::list(std::move(out));
  }
  if (!args.positional[0].is_string()) return invalid_argument("map: the filter name must be a string");
  const std::string name = args.positional[0].as_string();
  CallArgs rest{std::vector<Value>(args.positional.begin() + 1, args.positional.end()), args.keyword};
  for (const Value& item : items) {
    RSSM_ASSIGN_OR_RETURN(Value x, ev.apply_filter(name, item, rest));
    out.push_back(std::move(x));
  }
  return Value::list(std::move(out));
}

Result<Value> min_or_max(Evaluator& ev, const Value& v, const CallArgs& args, bool want_max) {
  const char* fn = want_max ? "max" : "min";
  RSSM_ASSIGN_OR_RETURN(Args a, bind_args(fn, args, {"case_sensitive", "attribute"}));
  RSSM_ASSIGN_OR_RETURN(std::vector<Value> items, items_of(ev, v));
  if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
  const bool cs = bool_param(a[0], false);
  auto key = [&](const Value& x) {
    return fold_case(a[1] && !a[1]->is_none() ? get_path(x, to_str(*a[1], ev.meter())) : x, cs);
  };
  size_t best = 0;
  for (size_t k = 1; k < items.size(); ++k) {
    const auto o = py_compare(key(items[k]), key(items[best]), ev.meter());
    if (!o) return invalid_argument(std::string(fn) + ": items of different types cannot be ordered");
    if (want_max ? *o > 0 : *o < 0) best = k;
  }
  return items[best];
}

Result<Value> f_max(Evaluator& ev, const Value& v, const CallArgs& args) { return min_or_max(ev, v, args, true); }
Result<Value> f_min(Evaluator& ev, const Value& v, const CallArgs& args) { return min_or_max(ev, v, args, false); }

// select / reject / selectattr / rejectattr.
Result<Value> select_impl(Evaluator& ev, const Value& v, const CallArgs& args, bool by_attr, bool keep_matches) {
  const char* fn = by_attr ? (keep_matches ? "selectattr" : "rejectattr") : (keep_matches ? "select" : "reject");
  RSSM_ASSIGN_OR_RETURN(std::vector<Value> items, items_of(ev, v));
  size_t next = 0;
  std::string attr;
  if (by_attr) {
    if (args.positional.empty() || !args.positional[0].is_string())
      return invalid_argument(std::string(fn) + ": needs an attribute name");
    attr = args.positional[0].as_string();
    next = 1;
  }
  std::optional<std::string> test;
  if (next < args.positional.size()) {
    if (!args.positional[next].is_string()) return invalid_argument(std::string(fn) + ": the test name must be a string");
    test = args.positional[next].as_string();
    ++next;
  }
  CallArgs rest{std::vector<Value>(args.positional.begin() + static_cast<ptrdiff_t>(next), args.positional.end()),
                args.keyword};
  std::vector<Value> out;
  for (const Value& item : items) {
    const Value x = by_attr ? get_path(item, attr) : item;
    bool hit = x.truthy();
    if (test) {
      RSSM_ASSIGN_OR_RETURN(hit, ev.apply_test(*test, x, rest));
    }
    if (hit == keep_matches) out.push_back(item);
  }
  return Value::list(std::move(out));
}

Result<Value> f_select(Evaluator& ev, const Value& v, const CallArgs& a) { return select_impl(ev, v, a, false, true); }
Result<Value> f_reject(Evaluator& ev, const Value& v, const CallArgs& a) { return select_impl(ev, v, a, false, false); }
Result<Value> f_selectattr(Evaluator& ev, const Value& v, const CallArgs& a) { return select_impl(ev, v, a, true, true); }
Result<Value> f_rejectattr(Evaluator& ev, const Value& v, const CallArgs& a) { return select_impl(ev, v, a, true, false); }

Result<Value> f_replace(Evaluator& ev, const Value& v, const CallArgs& args) {
  RSSM_ASSIGN_OR_RETURN(Args a, bind_args("replace", args, {"old", "new", "count"}));
  if (!a[0] || !a[1]) return invalid_argument("replace: needs 'old' and 'new'");
  RSSM_ASSIGN_OR_RETURN(int64_t count, int_param("replace", "count", a[2], -1));
  const std::string s = to_str(v, ev.meter());
  const std::string old = to_str(*a[0], ev.meter());
  const std::string repl = to_str(*a[1], ev.meter());
  // Bound the result before building it: each match may grow the text.
  const int64_t hits = std::min<int64_t>(py_count(s, old), count < 0 ? INT64_MAX : count);
  if (repl.size() > old.size() &&
      !ev.meter().fits(s.size() + static_cast<size_t>(hits) * (repl.size() - old.size())))
    return meter_error(ev);
  std::string out = py_replace(s, old, repl, count);
  ev.meter().build_string(out.size());
  return Value::string(std::move(out));
}

Result<Value> f_reverse(Evaluator& ev, const Value& v, const CallArgs& args) {
  RSSM_ASSIGN_OR_RETURN(Args a, bind_args("reverse", args, {}));
  if (v.is_string()) return Value::string(py_slice(v.as_string(), static_cast<int64_t>(py_len(v.as_string())) - 1, -1, -1));
  RSSM_ASSIGN_OR_RETURN(std::vector<Value> items, items_of(ev, v));
  std::reverse(items.begin(), items.end());
  return Value::list(std::move(items));
}

Result<Value> f_round(Evaluator&, const Value& v, const CallArgs& args) {
  RSSM_ASSIGN_OR_RETURN(Args a, bind_args("round", args, {"precision", "method"}));
  RSSM_ASSIGN_OR_RETURN(int64_t precision, int_param("round", "precision", a[0], 0));
  const std::string method = a[1] && a[1]->is_string() ? a[1]->as_string() : "common";
  if (method != "common" && method != "ceil" && method != "floor")
    return invalid_argument("round: method must be common, ceil or floor");
  if (!v.is_number()) return invalid_argument(std::string("round: expected a number, not ") + v.type_name());
  if (method == "common" && !v.is_float()) return Value::integer(v.type() == Value::Type::kBool ? v.as_bool() : v.as_int());
  const double x = v.to_double();
  if (method != "common") {
    const double scale = std::pow(10.0, static_cast<double>(precision));
    return Value::number((method == "ceil" ? std::ceil(x * scale) : std::floor(x * scale)) / scale);
  }
  if (!std::isfinite(x) || precision > 300) return Value::number(x);
  // Python's round() past a double's range of tens: zero with x's sign. The
  // scale below would be infinite, and -precision overflows at INT64_MIN.
  if (precision < -308) return Value::number(0.0 * x);
  if (precision < 0) {
    const double scale = std::pow(10.0, static_cast<double>(-precision));
    return Value::number(std::nearbyint(x / scale) * scale);
  }
  // printf rounds the exact binary value, half to even: Python's round().
  char buf[512];
  std::snprintf(buf, sizeof(buf), "%.*f", static_cast<int>(precision), x);
  return Value::number(std::strtod(buf, nullptr));
}

Result<Value> f_safe(Evaluator&, const Value& v, const CallArgs& args) {
  RSSM_ASSIGN_OR_RETURN(Args a, bind_args("safe", args, {}));
  return v;  // no autoescaping in chat templates: already "safe"
}

Result<Value> f_sort(Evaluator& ev, const Value& v, const CallArgs& args) {
  RSSM_ASSIGN_OR_RETURN(Args a, bind_args("sort", args, {"reverse", "case_sensitive", "attribute"}));
  RSSM_ASSIGN_OR_RETURN(std::vector<Value> items, items_of(ev, v));
  const bool reverse = bool_param(a[0], false);
  const bool cs = bool_param(a[1], false);
  std::vector<std::pair<Value, Value>> keyed;  // (key, item)
  for (Value& item : items) {
    Value k = a[2] && !a[2]->is_none() ? get_path(item, to_str(*a[2], ev.meter())) : item;
    keyed.emplace_back(fold_case(k, cs), std::move(item));
  }
  bool type_error = false;
  ev.meter().charge(static_cast<int64_t>(keyed.size()) * 16);
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& x, const auto& y) {
    const auto o = reverse ? py_compare(y.first, x.first, ev.meter()) : py_compare(x.first, y.first, ev.meter());
    if (!o) type_error = true;
    return o && *o < 0;
  });
  if (type_error) return invalid_argument("sort: items of different types cannot be ordered");
  std::vector<Value> out;
  for (auto& kv : keyed) out.push_back(std::move(kv.second));
  return Value::list(std::move(out));
}

Result<Value> f_string(Evaluator& ev, const Value& v, const CallArgs& args) {
  RSSM_ASSIGN_OR_RETURN(Args a, bind_args("string", args, {}));
  return Value::string(to_str(v, ev.meter()));
}

Result<Value> f_sum(Evaluator& ev, const Value& v, const CallArgs& args) {
  RSSM_ASSIGN_OR_RETURN(Args a, bind_args("sum", args, {"attribute", "start"}));
  RSSM_ASSIGN_OR_RETURN(std::vector<Value> items, items_of(ev, v));
  Value total = a[1] ? *a[1] : Value::integer(0);
  for (const Value& item : items) {
    const Value x = a[0] && !a[0]->is_none() ? get_path(item, to_str(*a[0], ev.meter())) : item;
    RSSM_ASSIGN_OR_RETURN(total, binary_op(ast::BinaryOp::kAdd, total, x, ev.meter()));
  }
  return total;
}

// transformers' tojson: json.dumps(x, ensure_ascii=False, indent=None,
// separators=None, sort_keys=False), so no HTML escaping (jinja2's own
// tojson escapes <, >, & and ').
Result<Value> f_tojson(Evaluator& ev, const Value& v, const CallArgs& args) {
  RSSM_ASSIGN_OR_RETURN(Args a, bind_args("tojson", args, {"ensure_ascii", "indent", "separators", "sort_keys"}));
  JsonStyle style;
  style.ensure_ascii = bool_param(a[0], false);
  style.sort_keys = bool_param(a[3], false);
  if (a[1] && !a[1]->is_none()) {
    if (a[1]->is_string()) {
      style.indent = a[1]->as_string();
    } else {
      RSSM_ASSIGN_OR_RETURN(int64_t n, int_param("tojson", "indent", a[1], 0));
      style.indent = std::string(static_cast<size_t>(std::clamp<int64_t>(n, 0, 64)), ' ');
    }
    style.item_separator = ",";
  }
  if (a[2] && !a[2]->is_none()) {
    const Value& sep = *a[2];
    if (!sep.is_list() || sep.as_list().items.size() != 2 || !sep.as_list().items[0].is_string() ||
        !sep.as_list().items[1].is_string())
      return invalid_argument("tojson: 'separators' must be a pair of strings");
    style.item_separator = sep.as_list().items[0].as_string();
    style.key_separator = sep.as_list().items[1].as_string();
  }
  std::string out;
  RSSM_RETURN_IF_ERROR(append_json(v, style, ev.meter(), &out));
  if (ev.meter().failed()) return meter_error(ev);
  return Value::string(std::move(out));
}

Result<Value> f_trim(Evaluator& ev, const Value& v, const CallArgs& args) {
  RSSM_ASSIGN_OR_RETURN(Args a, bind_args("trim", args, {"chars"}));
  std::optional<std::string> chars;
  if (a[0] && !a[0]->is_none()) chars = to_str(*a[0], ev.meter());
  const std::string s = to_str(v, ev.meter());
  return Value::string(chars ? py_strip(s, std::string_view(*chars), true, true)
                             : py_strip(s, std::nullopt, true, true));
}

Result<Value> f_unique(Evaluator& ev, const Value& v, const CallArgs& args) {
  RSSM_ASSIGN_OR_RETURN(Args a, bind_args("unique", args, {"case_sensitive", "attribute"}));
  RSSM_ASSIGN_OR_RETURN(std::vector<Value> items, items_of(ev, v));
  const bool cs = bool_param(a[0], false);
  std::vector<Value> seen, out;
  for (const Value& item : items) {
    const Value k = fold_case(a[1] && !a[1]->is_none() ? get_path(item, to_str(*a[1], ev.meter())) : item, cs);
    if (k.is_list() || k.is_dict()) return invalid_argument(std::string("unique: unhashable type: '") + k.type_name() + "'");
    bool dup = false;
    for (const Value& s : seen) {
      if (py_equal(s, k, ev.meter())) {
        dup = true;
        break;
      }
    }
    if (ev.meter().failed()) return meter_error(ev);
    if (!dup) {
      seen.push_back(k);
      out.push_back(item);
    }
  }
  return Value::list(std::move(out));
}

Result<Value> f_wordcount(Evaluator& ev, const Value& v, const CallArgs& args) {
  RSSM_ASSIGN_OR_RETURN(Args a, bind_args("wordcount", args, {}));
  return Value::integer(static_cast<int64_t>(py_split(to_str(v, ev.meter()), std::nullopt, -1).size()));
}

}  // namespace

FilterFn find_filter(std::string_view name) {
  static const std::unordered_map<std::string_view, FilterFn> kFilters = {
      {"abs", f_abs},           {"attr", f_attr},         {"capitalize", f_capitalize},
      {"center", f_center},     {"count", f_length},      {"d", f_default},
      {"default", f_default},   {"dictsort", f_dictsort}, {"e", f_escape},
      {"escape", f_escape},     {"first", f_first},       {"float", f_float},
      {"format", f_format},     {"indent", f_indent},     {"int", f_int},
      {"items", f_items},       {"join", f_join},         {"last", f_last},
      {"length", f_length},     {"list", f_list},         {"lower", f_lower},
      {"map", f_map},           {"max", f_max},           {"min", f_min},
      {"reject", f_reject},     {"rejectattr", f_rejectattr}, {"replace", f_replace},
      {"reverse", f_reverse},   {"round", f_round},       {"safe", f_safe},
      {"select", f_select},     {"selectattr", f_selectattr}, {"sort", f_sort},
      {"string", f_string},     {"sum", f_sum},           {"title", f_title},
      {"tojson", f_tojson},     {"trim", f_trim},         {"unique", f_unique},
      {"upper", f_upper},       {"wordcount", f_wordcount},
  };
  auto it = kFilters.find(name);
  return it == kFilters.end() ? nullptr : it->second;
}

}  // namespace replayssm::chat
