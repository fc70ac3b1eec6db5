// Values and their Python rules (see jinja_value.h).
#include "chat/jinja_value.h"

#include <algorithm>
#include <charconv>
#include <cmath>

#include "chat/jinja_string.h"
#include "io/utf8.h"

namespace replayssm::chat {

namespace {

// Past this many levels repr() and json.dumps() stop: only a chain of
// namespaces can get here (list and dict depth is bounded at creation).
constexpr int kMaxWalkDepth = 512;

const std::string& empty_string() {
  static const std::string kEmpty;
  return kEmpty;
}

// Python == on two scalars that may be dict keys.
bool key_equal(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.type() != Value::Type::kFloat && b.type() != Value::Type::kFloat)
      return (a.type() == Value::Type::kBool ? a.as_bool() : a.as_int()) ==
             (b.type() == Value::Type::kBool ? b.as_bool() : b.as_int());
    return a.to_double() == b.to_double();
  }
  if (a.type() != b.type()) return false;
  if (a.is_none()) return true;
  if (a.is_string()) return a.as_string() == b.as_string();
  return false;
}

// State for one repr() walk: the namespaces being printed, so that one that
// holds itself prints as Python's reprlib guard does ("{...}").
struct ReprWalk {
  Meter& meter;
  std::vector<const Namespace*> active;
  int depth = 0;
};

void repr_into(const Value& v, ReprWalk& w, std::string* out);

void str_into(const Value& v, ReprWalk& w, std::string* out) {
  switch (v.type()) {
    case Value::Type::kUndefined:
      return;
    case Value::Type::kString:
      out->append(v.as_string());
      return;
    default:
      repr_into(v, w, out);
  }
}

void repr_into(const Value& v, ReprWalk& w, std::string* out) {
  if (w.meter.failed() || !w.meter.charge(1) || !w.meter.fits(out->size())) return;
  if (w.depth > kMaxWalkDepth) {
    w.meter.fail("a value nested more than " + std::to_string(kMaxWalkDepth) + " levels deep cannot be printed");
    return;
  }
  ++w.depth;
  switch (v.type()) {
    case Value::Type::kUndefined:
      out->append("Undefined");
      break;
    case Value::Type::kNone:
      out->append("None");
      break;
    case Value::Type::kBool:
      out->append(v.as_bool() ? "True" : "False");
      break;
    case Value::Type::kInt:
      out->append(std::to_string(v.as_int()));
      break;
    case Value::Type::kFloat:
      out->append(format_float(v.as_float()));
      break;
    case Value::Type::kString:
      append_py_repr(v.as_string(), out);
      break;
    case Value::Type::kList: {
      const List& l = v.as_list();
      out->push_back(l.tuple ? '(' : '[');
      for (size_t k = 0; k < l.items.size(); ++k) {
        if (k) out->append(", ");
        repr_into(l.items[k], w, out);
      }
      if (l.tuple && l.items.size() == 1) out->push_back(',');
      out->push_back(l.tuple ? ')' : ']');
      break;
    }
    case Value::Type::kDict: {
      out->push_back('{');
      bool first = true;
      for (const auto& [key, value] : v.as_dict().entries()) {
        if (!first) out->append(", ");
        first = false;
        repr_into(key, w, out);
        out->append(": ");
        repr_into(value, w, out);
      }
      out->push_back('}');
      break;
    }
    case Value::Type::kNamespace: {
      const Namespace* ns = &v.as_namespace();
      out->append("<Namespace ");
      if (std::find(w.active.begin(), w.active.end(), ns) != w.active.end()) {
        out->append("{...}");
      } else {
        w.active.push_back(ns);
        out->push_back('{');
        bool first = true;
        for (const auto& [key, value] : ns->attrs.entries()) {
          if (!first) out->append(", ");
          first = false;
          repr_into(key, w, out);
          out->append(": ");
          repr_into(value, w, out);
        }
        out->push_back('}');
        w.active.pop_back();
      }
      out->push_back('>');
      break;
    }
    case Value::Type::kCallable: {
      const Callable& c = v.as_callable();
      if (c.kind == Callable::Kind::kMacro) {
        out->append("<Macro ");
        append_py_repr(c.name, out);
        out->push_back('>');
      } else if (c.kind == Callable::Kind::kMethod) {
        out->append("<built-in method " + c.name + ">");
      } else {
        out->append("<function " + c.name + ">");
      }
      break;
    }
  }
  --w.depth;
}

void json_string(std::string_view s, bool ensure_ascii, std::string* out) {
  static const char kHex[] = "0123456789abcdef";
  auto put_u = [&](uint32_t u) {
    out->append("\\u");
    for (int d = 3; d >= 0; --d) out->push_back(kHex[(u >> (4 * d)) & 0xF]);
  };
  out->push_back('"');
  for (size_t i = 0; i < s.size();) {
    const auto b = static_cast<unsigned char>(s[i]);
    if (b < 0x80) {
      switch (b) {
        case '"': out->append("\\\""); break;
        case '\\': out->append("\\\\"); break;
        case '\n': out->append("\\n"); break;
        case '\r': out->append("\\r"); break;
        case '\t': out->append("\\t"); break;
        case '\b': out->append("\\b"); break;
        case '\f': out->append("\\f"); break;
        default:
          if (b < 0x20 || (ensure_ascii && b == 0x7F)) put_u(b);
          else out->push_back(static_cast<char>(b));
      }
      ++i;
      continue;
    }
    const size_t len = utf8_char_len(s, i);
    if (!ensure_ascii) {
      out->append(s.substr(i, len));
    } else {
      const char32_t c = utf8_decode(s, i);
      if (c < 0x10000) {
        put_u(c);
      } else {
        const uint32_t v = c - 0x10000;
        put_u(0xD800 + (v >> 10));
        put_u(0xDC00 + (v & 0x3FF));
      }
    }
    i += len;
  }
  out->push_back('"');
}

std::string json_float(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d > 0 ? "Infinity" : "-Infinity";
  return format_float(d);
}

Status json_into(const Value& v, const JsonStyle& st, Meter& meter, int level, std::string* out) {
  if (!meter.charge(1) || !meter.fits(out->size())) return Status();  // the caller reports the meter
  if (level > kMaxWalkDepth) return invalid_argument("tojson: value nested too deep");
  auto newline = [&](int lvl) {
    if (!st.indent) return;
    out->push_back('\n');
    for (int k = 0; k < lvl; ++k) out->append(*st.indent);
  };
  switch (v.type()) {
    case Value::Type::kNone:
      out->append("null");
      return Status();
    case Value::Type::kBool:
      out->append(v.as_bool() ? "true" : "false");
      return Status();
    case Value::Type::kInt:
      out->append(std::to_string(v.as_int()));
      return Status();
    case Value::Type::kFloat:
      out->append(json_float(v.as_float()));
      return Status();
    case Value::Type::kString:
      json_string(v.as_string(), st.ensure_ascii, out);
      return Status();
    case Value::Type::kList: {
      const auto& items = v.as_list().items;
      if (items.empty()) {
        out->append("[]");
        return Status();
      }
      out->push_back('[');
      for (size_t k = 0; k < items.size(); ++k) {
        if (k) out->append(st.item_separator);
        newline(level + 1);
        RSSM_RETURN_IF_ERROR(json_into(items[k], st, meter, level + 1, out));
      }
      newline(level);
      out->push_back(']');
      return Status();
    }
    case Value::Type::kDict: {
      // json.dumps turns int, float, bool and None keys into strings.
      std::vector<std::pair<std::string, const Value*>> entries;
      for (const auto& [key, value] : v.as_dict().entries()) {
        std::string k;
        switch (key.type()) {
          case Value::Type::kString: k = key.as_string(); break;
          case Value::Type::kInt: k = std::to_string(key.as_int()); break;
          case Value::Type::kFloat: k = json_float(key.as_float()); break;
          case Value::Type::kBool: k = key.as_bool() ? "true" : "false"; break;
          case Value::Type::kNone: k = "null"; break;
          default:
            return invalid_argument(std::string("tojson: keys must be str, int, float, bool or None, not ") +
                                    key.type_name());
        }
        entries.emplace_back(std::move(k), &value);
      }
      if (entries.empty()) {
        out->append("{}");
        return Status();
      }
      if (st.sort_keys)
        std::stable_sort(entries.begin(), entries.end(),
                         [](const auto& a, const auto& b) { return a.first < b.first; });
      out->push_back('{');
      for (size_t k = 0; k < entries.size(); ++k) {
        if (k) out->append(st.item_separator);
        newline(level + 1);
        json_string(entries[k].first, st.ensure_ascii, out);
        out->append(st.key_separator);
        RSSM_RETURN_IF_ERROR(json_into(*entries[k].second, st, meter, level + 1, out));
      }
      newline(level);
      out->push_back('}');
      return Status();
    }
    default:
      return invalid_argument(std::string("tojson: Object of type ") +
                              (v.is_undefined() ? "Undefined" : v.type_name()) + " is not JSON serializable");
  }
}

// A child's conversion error under its path segment (".key" or "[i]"), so
// the message ends up as ".messages[2].content: invalid UTF-8 ...".
Status under(const std::string& segment, const Status& s) {
  const std::string& m = s.message();
  const bool has_path = !m.empty() && (m[0] == '.' || m[0] == '[');
  return Status(s.code(), segment + (has_path ? "" : ": ") + m);
}

template <typename Json>
Result<Value> from_json_impl(const Json& j, int depth_left) {
  using VT = nlohmann::detail::value_t;
  switch (j.type()) {
    case VT::null:
      return Value::none();
    case VT::boolean:
      return Value::boolean(j.template get<bool>());
    case VT::number_integer:
      return Value::integer(j.template get<int64_t>());
    case VT::number_unsigned: {
      const auto u = j.template get<uint64_t>();
      if (u <= static_cast<uint64_t>(INT64_MAX)) return Value::integer(static_cast<int64_t>(u));
      return Value::number(static_cast<double>(u));
    }
    case VT::number_float:
      return Value::number(j.template get<double>());
    case VT::string: {
      const auto& s = j.template get_ref<const std::string&>();
      const size_t bad = utf8_first_invalid(s);
      if (bad != std::string_view::npos)
        return invalid_argument("invalid UTF-8 at byte " + std::to_string(bad) + " of a string");
      return Value::string(s);
    }
    case VT::array: {
      if (depth_left <= 0) return invalid_argument("nested too deep");
      std::vector<Value> items;
      items.reserve(j.size());
      for (size_t k = 0; k < j.size(); ++k) {
        auto item = from_json_impl(j[k], depth_left - 1);
        if (!item.ok()) return under("[" + std::to_string(k) + "]", item.status());
        items.push_back(std::move(item).value());
      }
      return Value::list(std::move(items));
    }
    case VT::object: {
      if (depth_left <= 0) return invalid_argument("nested too deep");
      Dict d;
      for (auto it = j.begin(); it != j.end(); ++it) {
        auto item = from_json_impl(it.value(), depth_left - 1);
        if (!item.ok()) return under("." + it.key(), item.status());
        d.set(Value::string(it.key()), std::move(item).value());
      }
      return Value::dict(std::move(d));
    }
    default:
      return unsupported("binary JSON values are not supported");
  }
}

}  // namespace

Value Value::undefined(std::string hint) {
  return Value(UndefinedTag{std::make_shared<const std::string>(std::move(hint))});
}

Value Value::list(std::vector<Value> items, bool tuple) {
  auto l = std::make_shared<List>();
  int depth = 0;
  for (const Value& v : items) depth = std::max(depth, v.depth());
  l->items = std::move(items);
  l->tuple = tuple;
  l->depth = depth + 1;
  return Value(ListPtr(std::move(l)));
}

Value Value::dict(Dict d) { return Value(std::make_shared<const Dict>(std::move(d))); }

int Value::depth() const {
  if (is_list()) return as_list().depth;
  if (is_dict()) return as_dict().depth();
  return 0;
}

double Value::to_double() const {
  switch (type()) {
    case Type::kBool: return as_bool() ? 1.0 : 0.0;
    case Type::kInt: return static_cast<double>(as_int());
    case Type::kFloat: return as_float();
    default: return 0.0;
  }
}

const std::string& Value::undefined_hint() const {
  const auto& h = std::get<UndefinedTag>(v_).hint;
  return h ? *h : empty_string();
}

bool Value::truthy() const {
  switch (type()) {
    case Type::kUndefined:
    case Type::kNone: return false;
    case Type::kBool: return as_bool();
    case Type::kInt: return as_int() != 0;
    case Type::kFloat: return as_float() != 0.0;
    case Type::kString: return !as_string().empty();
    case Type::kList: return !as_list().items.empty();
    case Type::kDict: return as_dict().size() != 0;
    default: return true;
  }
}

const char* Value::type_name() const {
  switch (type()) {
    case Type::kUndefined: return "Undefined";
    case Type::kNone: return "NoneType";
    case Type::kBool: return "bool";
    case Type::kInt: return "int";
    case Type::kFloat: return "float";
    case Type::kString: return "str";
    case Type::kList: return as_list().tuple ? "tuple" : "list";
    case Type::kDict: return "dict";
    case Type::kNamespace: return "Namespace";
    case Type::kCallable: return as_callable().kind == Callable::Kind::kMacro ? "Macro" : "function";
  }
  return "object";
}

bool Value::same_object(const Value& other) const {
  if (type() != other.type()) return false;
  switch (type()) {
    case Type::kString: return std::get<StrPtr>(v_) == std::get<StrPtr>(other.v_);
    case Type::kList: return std::get<ListPtr>(v_) == std::get<ListPtr>(other.v_);
    case Type::kDict: return std::get<DictPtr>(v_) == std::get<DictPtr>(other.v_);
    case Type::kNamespace: return std::get<NsPtr>(v_) == std::get<NsPtr>(other.v_);
    case Type::kCallable: return std::get<FnPtr>(v_) == std::get<FnPtr>(other.v_);
    case Type::kNone:
    case Type::kUndefined: return true;
    case Type::kBool: return as_bool() == other.as_bool();
    case Type::kInt: return as_int() == other.as_int();  // CPython caches small ints; close enough
    case Type::kFloat: return false;
  }
  return false;
}

const Value* Dict::find(std::string_view key) const {
  auto it = string_index_.find(key);
  return it == string_index_.end() ? nullptr : &entries_[it->second].second;
}

const Value* Dict::find(const Value& key) const {
  if (key.is_string()) return find(std::string_view(key.as_string()));
  for (const auto& [k, v] : entries_)
    if (!k.is_string() && key_equal(k, key)) return &v;
  return nullptr;
}

bool Dict::set(const Value& key, Value value) {
  const auto t = key.type();
  if (t != Value::Type::kString && t != Value::Type::kNone && !key.is_number()) return false;
  depth_ = std::max(depth_, value.depth() + 1);
  if (key.is_string()) {
    auto [it, inserted] = string_index_.try_emplace(key.as_string(), entries_.size());
    if (!inserted) {
      entries_[it->second].second = std::move(value);
      return true;
    }
    entries_.emplace_back(key, std::move(value));
    return true;
  }
  for (auto& [k, v] : entries_) {
    if (!k.is_string() && key_equal(k, key)) {
      v = std::move(value);
      return true;
    }
  }
  entries_.emplace_back(key, std::move(value));
  return true;
}

std::string format_float(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  // Shortest round-trip digits, then Python's layout: repr uses an exponent
  // when the decimal exponent is below -4 or at least 16.
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof(buf), d, std::chars_format::scientific);
  const std::string_view sci(buf, static_cast<size_t>(r.ptr - buf));
  const size_t e_pos = sci.find('e');
  const bool negative = sci[0] == '-';
  std::string digits;
  for (char c : sci.substr(negative ? 1 : 0, e_pos - (negative ? 1 : 0)))
    if (c != '.') digits.push_back(c);
  int exp = 0;
  std::from_chars(sci.data() + e_pos + 1 + (sci[e_pos + 1] == '+' ? 1 : 0), sci.data() + sci.size(), exp);
  std::string out = negative ? "-" : "";
  if (exp < -4 || exp >= 16) {
    out += digits[0];
    if (digits.size() > 1) out += "." + digits.substr(1);
    out += exp < 0 ? "e-" : "e+";
    const std::string e = std::to_string(std::abs(exp));
    out += (e.size() < 2 ? "0" : "") + e;
    return out;
  }
  if (exp >= 0) {
    const size_t int_len = static_cast<size_t>(exp) + 1;
    if (digits.size() <= int_len) {
      out += digits + std::string(int_len - digits.size(), '0') + ".0";
    } else {
      out += digits.substr(0, int_len) + "." + digits.substr(int_len);
    }
    return out;
  }
  out += "0." + std::string(static_cast<size_t>(-exp - 1), '0') + digits;
  return out;
}

void append_str(const Value& v, Meter& meter, std::string* out) {
  ReprWalk w{meter, {}, 0};
  str_into(v, w, out);
}

void append_repr(const Value& v, Meter& meter, std::string* out) {
  ReprWalk w{meter, {}, 0};
  repr_into(v, w, out);
}

std::string to_str(const Value& v, Meter& meter) {
  if (v.is_string()) return v.as_string();
  std::string s;
  append_str(v, meter, &s);
  return s;
}

bool py_equal(const Value& a, const Value& b, Meter& meter) {
  if (!meter.charge(1)) return false;
  if (a.same_object(b) && a.type() != Value::Type::kFloat) return true;
  if (a.is_number() && b.is_number()) return key_equal(a, b);
  if (a.type() != b.type()) return false;
  switch (a.type()) {
    case Value::Type::kString:
      return a.as_string() == b.as_string();
    case Value::Type::kList: {
      const List& x = a.as_list();
      const List& y = b.as_list();
      if (x.tuple != y.tuple || x.items.size() != y.items.size()) return false;
      for (size_t k = 0; k < x.items.size(); ++k)
        if (!py_equal(x.items[k], y.items[k], meter)) return false;
      return true;
    }
    case Value::Type::kDict: {
      const Dict& x = a.as_dict();
      const Dict& y = b.as_dict();
      if (x.size() != y.size()) return false;
      for (const auto& [key, value] : x.entries()) {
        const Value* other = y.find(key);
        if (!other || !py_equal(value, *other, meter)) return false;
      }
      return true;
    }
    default:
      return false;  // namespaces and callables: only the same object, handled above
  }
}

std::optional<std::partial_ordering> py_compare(const Value& a, const Value& b, Meter& meter) {
  meter.charge(1);
  if (a.is_number() && b.is_number()) {
    if (a.type() != Value::Type::kFloat && b.type() != Value::Type::kFloat) {
      const int64_t x = a.type() == Value::Type::kBool ? a.as_bool() : a.as_int();
      const int64_t y = b.type() == Value::Type::kBool ? b.as_bool() : b.as_int();
      return x <=> y;
    }
    return a.to_double() <=> b.to_double();
  }
  if (a.is_string() && b.is_string()) return a.as_string().compare(b.as_string()) <=> 0;
  if (a.is_list() && b.is_list() && a.as_list().tuple == b.as_list().tuple) {
    const auto& x = a.as_list().items;
    const auto& y = b.as_list().items;
    for (size_t k = 0; k < x.size() && k < y.size(); ++k) {
      if (meter.failed()) return std::partial_ordering::equivalent;
      if (py_equal(x[k], y[k], meter)) continue;
      return py_compare(x[k], y[k], meter);
    }
    return x.size() <=> y.size();
  }
  return std::nullopt;
}

Status append_json(const Value& v, const JsonStyle& style, Meter& meter, std::string* out) {
  return json_into(v, style, meter, 0, out);
}

Result<Value> value_from_json(const nlohmann::json& j, int max_depth) {
  return from_json_impl(j, max_depth);
}

Result<Value> value_from_json(const nlohmann::ordered_json& j, int max_depth) {
  return from_json_impl(j, max_depth);
}

}  // namespace replayssm::chat
