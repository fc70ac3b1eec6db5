// Python's two string formatting languages: printf-style `%` (the |format
// filter) and str.format (see jinja_builtins.h).
//
// Numbers go through snprintf, whose conversions Python's own follow for
// these types; padding is done here, in code points, so "é" is one column
// as in Python.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>

#include "chat/jinja_builtins.h"
#include "chat/jinja_operators.h"
#include "chat/jinja_string.h"
#include "io/utf8.h"

namespace replayssm::chat {

namespace {

std::string c_format(const std::string& fmt, double x) {
  char buf[512];
  const int n = std::snprintf(buf, sizeof(buf), fmt.c_str(), x);
  if (n < 0) return "";
  if (static_cast<size_t>(n) < sizeof(buf)) return buf;
  std::string big(static_cast<size_t>(n) + 1, '\0');
  std::snprintf(big.data(), big.size(), fmt.c_str(), x);
  big.resize(static_cast<size_t>(n));
  return big;
}

std::string c_format_int(const std::string& fmt, long long x) {
  char buf[128];
  std::snprintf(buf, sizeof(buf), fmt.c_str(), x);
  return buf;
}

// Pads `s` with spaces to `width` code points: right-aligned unless `left`.
std::string pad(const std::string& s, int64_t width, bool left) {
  const auto len = static_cast<int64_t>(py_len(s));
  if (width <= len) return s;
  const std::string padding(static_cast<size_t>(width - len), ' ');
  return left ? s + padding : padding + s;
}

std::string insert_grouping(const std::string& digits, char sep) {
  // digits: an optional sign, then the integer part, then anything else.
  size_t b = 0;
  while (b < digits.size() && !std::isdigit(static_cast<unsigned char>(digits[b]))) ++b;
  size_t e = b;
  while (e < digits.size() && std::isdigit(static_cast<unsigned char>(digits[e]))) ++e;
  std::string out = digits.substr(0, b);
  for (size_t k = b; k < e; ++k) {
    out.push_back(digits[k]);
    const size_t left = e - k - 1;
    if (left > 0 && left % 3 == 0) out.push_back(sep);
  }
  return out + digits.substr(e);
}

Result<int64_t> as_int(const Value& v, char conv) {
  if (v.type() == Value::Type::kInt) return v.as_int();
  if (v.type() == Value::Type::kBool) return int64_t{v.as_bool()};
  if (v.is_float() && (conv == 'd' || conv == 'i' || conv == 'u')) {
    const double d = v.as_float();
    if (!std::isfinite(d) || std::fabs(d) >= 9.2233720368547758e18)
      return invalid_argument("cannot convert float " + format_float(d) + " to integer");
    return static_cast<int64_t>(d);
  }
  if (v.is_undefined()) return undefined_error(v);
  return invalid_argument(std::string("%") + conv + " format: " +
                          (conv == 'd' || conv == 'i' || conv == 'u' ? "a real number" : "an integer") +
                          " is required, not " + v.type_name());
}

// A Python format spec, parsed.
struct Spec {
  char32_t fill = U' ';
  char align = 0;  // '<', '>', '^', '=' or 0 (the type's default)
  char sign = '-';
  bool alt = false;
  int64_t width = 0;
  char grouping = 0;
  int precision = -1;
  char type = 0;
};

Result<Spec> parse_spec(std::string_view s) {
  Spec sp;
  size_t k = 0;
  auto is_align = [](char c) { return c == '<' || c == '>' || c == '^' || c == '='; };
  if (s.size() >= 2 && is_align(s[1]) && static_cast<unsigned char>(s[0]) < 0x80) {
    sp.fill = static_cast<char32_t>(s[0]);
    sp.align = s[1];
    k = 2;
  } else if (!s.empty() && is_align(s[0])) {
    sp.align = s[0];
    k = 1;
  }
  if (k < s.size() && (s[k] == '+' || s[k] == '-' || s[k] == ' ')) sp.sign = s[k++];
  if (k < s.size() && s[k] == '#') {
    sp.alt = true;
    ++k;
  }
  if (k < s.size() && s[k] == '0') {
    if (!sp.align) {
      sp.fill = U'0';
      sp.align = '=';
    }
    ++k;
  }
  while (k < s.size() && std::isdigit(static_cast<unsigned char>(s[k])))
    sp.width = std::min<int64_t>(sp.width * 10 + (s[k++] - '0'), 1 << 20);
  if (k < s.size() && (s[k] == ',' || s[k] == '_')) sp.grouping = s[k++];
  if (k < s.size() && s[k] == '.') {
    ++k;
    sp.precision = 0;
    while (k < s.size() && std::isdigit(static_cast<unsigned char>(s[k])))
      sp.precision = std::min(sp.precision * 10 + (s[k++] - '0'), 400);
  }
  if (k < s.size()) sp.type = s[k++];
  if (k != s.size()) return invalid_argument("invalid format specifier '" + std::string(s) + "'");
  return sp;
}

std::string align_text(const std::string& body, const Spec& sp, char default_align) {
  const auto len = static_cast<int64_t>(py_len(body));
  if (sp.width <= len) return body;
  std::string fill;
  {
    std::string one;
    if (sp.fill < 0x80) one.push_back(static_cast<char>(sp.fill));
    else one = " ";
    for (int64_t k = 0; k < sp.width - len; ++k) fill += one;
  }
  const char align = sp.align ? sp.align : default_align;
  if (align == '<') return body + fill;
  if (align == '^') {
    const size_t left = static_cast<size_t>((sp.width - len) / 2);
    return fill.substr(0, left) + body + fill.substr(left);
  }
  if (align == '=' && !body.empty() && (body[0] == '-' || body[0] == '+' || body[0] == ' '))
    return body.substr(0, 1) + fill + body.substr(1);
  return fill + body;
}

// format(v, spec).
Result<std::string> format_value(const Value& v, std::string_view spec_text, Meter& meter) {
  if (spec_text.empty()) return to_str(v, meter);
  RSSM_ASSIGN_OR_RETURN(Spec sp, parse_spec(spec_text));
  if (v.is_string() || (!v.is_number())) {
    if (!v.is_string() && !v.is_undefined())
      return invalid_argument(std::string("unsupported format string passed to ") + v.type_name() + ".__format__");
    if (sp.type && sp.type != 's') return invalid_argument(std::string("unknown format code '") + sp.type + "' for str");
    std::string s = to_str(v, meter);
    if (sp.precision >= 0) s = py_slice(s, 0, std::min<int64_t>(sp.precision, static_cast<int64_t>(py_len(s))), 1);
    return align_text(s, sp, '<');
  }
  std::string body;
  const bool integral_type = sp.type == 'd' || sp.type == 'x' || sp.type == 'X' || sp.type == 'o' ||
                             sp.type == 'b' || sp.type == 'c' || sp.type == 'n';
  if (!v.is_float() && (sp.type == 0 || integral_type)) {
    const int64_t i = v.type() == Value::Type::kBool ? v.as_bool() : v.as_int();
    const uint64_t mag = i < 0 ? 0 - static_cast<uint64_t>(i) : static_cast<uint64_t>(i);
    std::string digits;
    switch (sp.type) {
      case 'x': digits = c_format_int("%llx", static_cast<long long>(mag)); break;
      case 'X': digits = c_format_int("%llX", static_cast<long long>(mag)); break;
      case 'o': digits = c_format_int("%llo", static_cast<long long>(mag)); break;
      case 'b':
        do digits.insert(digits.begin(), static_cast<char>('0' + ((mag >> digits.size()) & 1)));
        while ((mag >> digits.size()) != 0);
        break;
      case 'c': {
        if (i < 0 || i > 0x10FFFF || (i >= 0xD800 && i <= 0xDFFF))
          return invalid_argument("%c arg not in range(0x110000)");
        std::string c;
        utf8_append(static_cast<char32_t>(i), &c);
        return align_text(c, sp, '<');
      }
      default: digits = std::to_string(mag);
    }
    if (sp.alt && sp.type && sp.type != 'd' && sp.type != 'n') digits = std::string("0") + sp.type + digits;
    if (sp.grouping) digits = insert_grouping(digits, sp.grouping);
    body = (i < 0 ? "-" : sp.sign == '+' ? "+" : sp.sign == ' ' ? " " : "") + digits;
    return align_text(body, sp, '>');
  }
  if (integral_type) return invalid_argument(std::string("unknown format code '") + sp.type + "' for float");
  // The type becomes a printf conversion below: anything but Python's
  // float presentations ('s', 'n', 'p', ...) would have snprintf read an
  // argument that was never passed.
  if (sp.type != 0 && std::string_view("eEfFgG%").find(sp.type) == std::string_view::npos)
    return invalid_argument(std::string("unknown format code '") + sp.type + "' for " +
                            (v.is_float() ? "float" : "int"));
  double x = v.to_double();
  std::string fmt = "%";
  if (sp.sign == '+' || sp.sign == ' ') fmt.push_back(sp.sign);
  if (sp.alt) fmt.push_back('#');
  if (sp.type == 0) {
    if (sp.precision < 0) {
      body = format_float(x);
      if (sp.sign != '-' && x >= 0) body.insert(body.begin(), sp.sign);
    } else {
      body = c_format(fmt + "." + std::to_string(std::max(sp.precision, 1)) + "g", x);
      if (body.find_first_of(".en") == std::string::npos) body += ".0";
    }
  } else if (sp.type == '%') {
    body = c_format(fmt + "." + std::to_string(sp.precision < 0 ? 6 : sp.precision) + "f", x * 100.0) + "%";
  } else {
    body = c_format(fmt + "." + std::to_string(sp.precision < 0 ? 6 : sp.precision) + sp.type, x);
  }
  if (sp.grouping) body = insert_grouping(body, sp.grouping);
  return align_text(body, sp, '>');
}

}  // namespace

Result<std::string> percent_format(std::string_view format, const Value& args, Meter& meter) {
  std::vector<Value> positional;
  if (args.is_list() && args.as_list().tuple) positional = args.as_list().items;
  else positional.push_back(args);
  const Dict* mapping = args.is_dict() ? &args.as_dict() : nullptr;
  size_t next = 0;
  bool used_mapping = false;
  std::string out;
  for (size_t k = 0; k < format.size(); ++k) {
    if (format[k] != '%') {
      out.push_back(format[k]);
      continue;
    }
    if (++k >= format.size()) return invalid_argument("incomplete format");
    const Value* arg = nullptr;
    if (format[k] == '(') {
      const size_t close = format.find(')', k);
      if (close == std::string_view::npos) return invalid_argument("incomplete format key");
      if (!mapping) return invalid_argument("format requires a mapping");
      const std::string key(format.substr(k + 1, close - k - 1));
      arg = mapping->find(std::string_view(key));
      if (!arg) return invalid_argument("KeyError: '" + key + "'");
      used_mapping = true;
      k = close + 1;
    }
    std::string flags;
    while (k < format.size() && std::string_view("-+ #0").find(format[k]) != std::string_view::npos)
      flags.push_back(format[k++]);
    int64_t width = 0;
    while (k < format.size() && std::isdigit(static_cast<unsigned char>(format[k])))
      width = std::min<int64_t>(width * 10 + (format[k++] - '0'), 1 << 20);
    int precision = -1;
    if (k < format.size() && format[k] == '.') {
      ++k;
      precision = 0;
      while (k < format.size() && std::isdigit(static_cast<unsigned char>(format[k])))
        precision = std::min(precision * 10 + (format[k++] - '0'), 400);
    }
    while (k < format.size() && (format[k] == 'h' || format[k] == 'l' || format[k] == 'L')) ++k;
    if (k >= format.size()) return invalid_argument("incomplete format");
    const char conv = format[k];
    if (conv == '%') {
      out.push_back('%');
      continue;
    }
    if (!arg) {
      if (next >= positional.size()) return invalid_argument("not enough arguments for format string");
      arg = &positional[next++];
    }
    const bool left = flags.find('-') != std::string::npos;
    std::string piece;
    switch (conv) {
      case 's':
      case 'r':
      case 'a': {
        if (conv == 's') piece = to_str(*arg, meter);
        else append_repr(*arg, meter, &piece);
        if (precision >= 0) piece = py_slice(piece, 0, std::min<int64_t>(precision, static_cast<int64_t>(py_len(piece))), 1);
        piece = pad(piece, width, left);
        break;
      }
      case 'c': {
        if (arg->is_string() && py_len(arg->as_string()) == 1) piece = arg->as_string();
        else if (arg->type() == Value::Type::kInt && arg->as_int() >= 0 && arg->as_int() < 0x80)
          piece = std::string(1, static_cast<char>(arg->as_int()));
        else return invalid_argument("%c requires an int or a one-character str");
        piece = pad(piece, width, left);
        break;
      }
      case 'd':
      case 'i':
      case 'u':
      case 'x':
      case 'X':
      case 'o': {
        RSSM_ASSIGN_OR_RETURN(int64_t i, as_int(*arg, conv));
        const char c = conv == 'i' || conv == 'u' ? 'd' : conv;
        std::string f = "%" + flags + (width ? std::to_string(width) : "") +
                         (precision >= 0 ? "." + std::to_string(precision) : "") + "ll" + c;
        piece = c_format_int(f, static_cast<long long>(i));
        break;
      }
      case 'e':
      case 'E':
      case 'f':
      case 'F':
      case 'g':
      case 'G': {
        if (!arg->is_number()) {
          if (arg->is_undefined()) return undefined_error(*arg);
          return invalid_argument(std::string("must be real number, not ") + arg->type_name());
        }
        std::string f = "%" + flags + (width ? std::to_string(width) : "") + "." +
                         std::to_string(precision < 0 ? 6 : precision) + conv;
        piece = c_format(f, arg->to_double());
        break;
      }
      default:
        return invalid_argument(std::string("unsupported format character '") + conv + "'");
    }
    out += piece;
    if (!meter.build_string(out.size())) return out_of_budget(meter.why());
  }
  if (!used_mapping && !mapping && next < positional.size())
    return invalid_argument("not all arguments converted during string formatting");
  return out;
}

Result<std::string> str_format(std::string_view format, const CallArgs& args, Meter& meter) {
  std::string out;
  size_t auto_index = 0;
  bool manual = false, automatic = false;
  for (size_t k = 0; k < format.size(); ++k) {
    const char c = format[k];
    if (c == '}') {
      if (k + 1 < format.size() && format[k + 1] == '}') {
        out.push_back('}');
        ++k;
        continue;
      }
      return invalid_argument("Single '}' encountered in format string");
    }
    if (c != '{') {
      out.push_back(c);
      continue;
    }
    if (k + 1 < format.size() && format[k + 1] == '{') {
      out.push_back('{');
      ++k;
      continue;
    }
    const size_t close = format.find('}', k);
    if (close == std::string_view::npos) return invalid_argument("Single '{' encountered in format string");
    std::string_view field = format.substr(k + 1, close - k - 1);
    k = close;
    std::string_view spec, conversion;
    if (const size_t colon = field.find(':'); colon != std::string_view::npos) {
      spec = field.substr(colon + 1);
      field = field.substr(0, colon);
    }
    if (const size_t bang = field.find('!'); bang != std::string_view::npos) {
      conversion = field.substr(bang + 1);
      field = field.substr(0, bang);
    }
    // The argument name, then .attr / [key] lookups.
    size_t name_end = 0;
    while (name_end < field.size() && field[name_end] != '.' && field[name_end] != '[') ++name_end;
    const std::string_view arg_name = field.substr(0, name_end);
    Value v;
    if (arg_name.empty() || std::isdigit(static_cast<unsigned char>(arg_name[0]))) {
      size_t index = 0;
      if (arg_name.empty()) {
        if (manual) return invalid_argument("cannot switch from manual field specification to automatic field numbering");
        automatic = true;
        index = auto_index++;
      } else {
        if (automatic) return invalid_argument("cannot switch from automatic field numbering to manual field specification");
        manual = true;
        index = static_cast<size_t>(std::stoul(std::string(arg_name)));
      }
      if (index >= args.positional.size())
        return invalid_argument("Replacement index " + std::to_string(index) + " out of range for positional args tuple");
      v = args.positional[index];
    } else {
      bool found = false;
      for (const auto& [key, val] : args.keyword) {
        if (key == arg_name) {
          v = val;
          found = true;
        }
      }
      if (!found) return invalid_argument("KeyError: '" + std::string(arg_name) + "'");
    }
    for (size_t p = name_end; p < field.size();) {
      if (field[p] == '.') {
        size_t e = p + 1;
        while (e < field.size() && field[e] != '.' && field[e] != '[') ++e;
        v = get_attr(v, std::string(field.substr(p + 1, e - p - 1)));
        p = e;
      } else {
        const size_t e = field.find(']', p);
        if (e == std::string_view::npos) return invalid_argument("Missing ']' in format string");
        const std::string key(field.substr(p + 1, e - p - 1));
        const bool numeric = !key.empty() && key.find_first_not_of("0123456789") == std::string::npos;
        v = get_item(v, numeric ? Value::integer(std::stoll(key)) : Value::string(key));
        p = e + 1;
      }
    }
    if (conversion == "r" || conversion == "a") {
      std::string r;
      append_repr(v, meter, &r);
      v = Value::string(std::move(r));
    } else if (conversion == "s") {
      v = Value::string(to_str(v, meter));
    } else if (!conversion.empty()) {
      return invalid_argument("Unknown conversion specifier " + std::string(conversion));
    }
    RSSM_ASSIGN_OR_RETURN(std::string piece, format_value(v, spec, meter));
    out += piece;
    if (!meter.build_string(out.size())) return out_of_budget(meter.why());
  }
  return out;
}

}  // namespace replayssm::chat
