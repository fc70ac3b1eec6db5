// Python's str methods on UTF-8 text (see jinja_string.h).
#include "chat/jinja_string.h"

#include <utf8proc.h>

#include <algorithm>

#include "io/utf8.h"

namespace replayssm::chat {

namespace {

utf8proc_category_t category(char32_t c) {
  return static_cast<utf8proc_category_t>(utf8proc_category(static_cast<utf8proc_int32_t>(c)));
}

bool is_cased(char32_t c) {
  const auto k = category(c);
  return k == UTF8PROC_CATEGORY_LU || k == UTF8PROC_CATEGORY_LL || k == UTF8PROC_CATEGORY_LT;
}

bool is_alpha(char32_t c) {
  const auto k = category(c);
  return k == UTF8PROC_CATEGORY_LU || k == UTF8PROC_CATEGORY_LL || k == UTF8PROC_CATEGORY_LT ||
         k == UTF8PROC_CATEGORY_LM || k == UTF8PROC_CATEGORY_LO;
}

bool is_numeric(char32_t c) {
  const auto k = category(c);
  return k == UTF8PROC_CATEGORY_ND || k == UTF8PROC_CATEGORY_NL || k == UTF8PROC_CATEGORY_NO;
}

// Python's str.isprintable for one code point.
bool is_printable(char32_t c) {
  if (c == ' ') return true;
  switch (category(c)) {
    case UTF8PROC_CATEGORY_CC:
    case UTF8PROC_CATEGORY_CF:
    case UTF8PROC_CATEGORY_CS:
    case UTF8PROC_CATEGORY_CO:
    case UTF8PROC_CATEGORY_CN:
    case UTF8PROC_CATEGORY_ZL:
    case UTF8PROC_CATEGORY_ZP:
    case UTF8PROC_CATEGORY_ZS:
      return false;
    default:
      return true;
  }
}

char32_t to_upper(char32_t c) { return static_cast<char32_t>(utf8proc_toupper(static_cast<utf8proc_int32_t>(c))); }
char32_t to_lower(char32_t c) { return static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(c))); }
char32_t to_title(char32_t c) { return static_cast<char32_t>(utf8proc_totitle(static_cast<utf8proc_int32_t>(c))); }

std::vector<char32_t> decode_all(std::string_view s) {
  std::vector<char32_t> cps;
  cps.reserve(s.size());
  for (size_t i = 0; i < s.size(); i += utf8_char_len(s, i)) cps.push_back(utf8_decode(s, i));
  return cps;
}

std::string encode_all(const std::vector<char32_t>& cps) {
  std::string out;
  out.reserve(cps.size());
  for (char32_t c : cps) utf8_append(c, &out);
  return out;
}

template <typename Fn>
std::string map_code_points(std::string_view s, Fn fn) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); i += utf8_char_len(s, i)) utf8_append(fn(utf8_decode(s, i)), &out);
  return out;
}

template <typename Pred>
bool all_code_points(std::string_view s, Pred pred) {
  if (s.empty()) return false;
  for (size_t i = 0; i < s.size(); i += utf8_char_len(s, i))
    if (!pred(utf8_decode(s, i))) return false;
  return true;
}

bool in_chars(char32_t c, std::string_view chars) {
  for (size_t i = 0; i < chars.size(); i += utf8_char_len(chars, i))
    if (utf8_decode(chars, i) == c) return true;
  return false;
}

// Whitespace splitting, shared by split() and rsplit(): the [begin, end)
// byte ranges of the words.
std::vector<std::pair<size_t, size_t>> whitespace_words(std::string_view s) {
  std::vector<std::pair<size_t, size_t>> words;
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && py_isspace(utf8_decode(s, i))) i += utf8_char_len(s, i);
    if (i >= s.size()) break;
    const size_t b = i;
    while (i < s.size() && !py_isspace(utf8_decode(s, i))) i += utf8_char_len(s, i);
    words.emplace_back(b, i);
  }
  return words;
}

}  // namespace

size_t py_len(std::string_view s) {
  size_t n = 0;
  for (char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

bool is_ascii(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; });
}

void code_point_offsets(std::string_view s, std::vector<size_t>* offsets) {
  offsets->clear();
  for (size_t i = 0; i < s.size(); i += utf8_char_len(s, i)) offsets->push_back(i);
  offsets->push_back(s.size());
}

bool py_isspace(char32_t c) {
  if (c < 0x80) return c == ' ' || (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x1F);
  return c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 ||
         c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

std::string py_strip(std::string_view s, const std::optional<std::string_view>& chars, bool left,
                     bool right) {
  auto strip_it = [&](char32_t c) { return chars ? in_chars(c, *chars) : py_isspace(c); };
  size_t b = 0, e = s.size();
  if (left) {
    while (b < e && strip_it(utf8_decode(s, b))) b += utf8_char_len(s, b);
  }
  if (right) {
    while (e > b) {
      size_t p = e - 1;
      while (p > b && (static_cast<unsigned char>(s[p]) & 0xC0) == 0x80) --p;
      if (!strip_it(utf8_decode(s, p))) break;
      e = p;
    }
  }
  return std::string(s.substr(b, e - b));
}

std::vector<std::string> py_split(std::string_view s, const std::optional<std::string_view>& sep,
                                  int64_t maxsplit) {
  std::vector<std::string> out;
  if (!sep) {
    const auto words = whitespace_words(s);
    for (size_t k = 0; k < words.size(); ++k) {
      if (maxsplit >= 0 && static_cast<int64_t>(k) == maxsplit) {
        // The rest, from this word on, is one piece with its trailing space stripped.
        out.push_back(py_strip(s.substr(words[k].first), std::nullopt, false, true));
        return out;
      }
      out.emplace_back(s.substr(words[k].first, words[k].second - words[k].first));
    }
    return out;
  }
  size_t pos = 0;
  int64_t n = 0;
  while (maxsplit < 0 || n < maxsplit) {
    const size_t hit = s.find(*sep, pos);
    if (hit == std::string_view::npos) break;
    out.emplace_back(s.substr(pos, hit - pos));
    pos = hit + sep->size();
    ++n;
  }
  out.emplace_back(s.substr(pos));
  return out;
}

std::vector<std::string> py_rsplit(std::string_view s, const std::optional<std::string_view>& sep,
                                   int64_t maxsplit) {
  if (maxsplit < 0) return py_split(s, sep, maxsplit);
  std::vector<std::string> out;
  if (!sep) {
    const auto words = whitespace_words(s);
    int64_t n = 0;
    size_t k = words.size();
    while (k > 0 && n < maxsplit) {
      --k;
      out.emplace_back(s.substr(words[k].first, words[k].second - words[k].first));
      ++n;
    }
    if (k > 0) out.push_back(py_strip(s.substr(0, words[k - 1].second), std::nullopt, true, false));
    std::reverse(out.begin(), out.end());
    return out;
  }
  size_t end = s.size();
  int64_t n = 0;
  while (n < maxsplit) {
    if (end < sep->size()) break;
    const size_t hit = s.rfind(*sep, end - sep->size());
    if (hit == std::string_view::npos) break;
    out.emplace_back(s.substr(hit + sep->size(), end - hit - sep->size()));
    end = hit;
    ++n;
  }
  out.emplace_back(s.substr(0, end));
  std::reverse(out.begin(), out.end());
  return out;
}

std::vector<std::string> py_splitlines(std::string_view s, bool keepends) {
  std::vector<std::string> out;
  size_t line_start = 0, i = 0;
  while (i < s.size()) {
    const char32_t c = utf8_decode(s, i);
    size_t n = utf8_char_len(s, i);
    const bool is_break = c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || c == 0x1C ||
                          c == 0x1D || c == 0x1E || c == 0x85 || c == 0x2028 || c == 0x2029;
    if (!is_break) {
      i += n;
      continue;
    }
    if (c == '\r' && i + 1 < s.size() && s[i + 1] == '\n') n = 2;
    out.emplace_back(s.substr(line_start, (keepends ? i + n : i) - line_start));
    i += n;
    line_start = i;
  }
  if (line_start < s.size()) out.emplace_back(s.substr(line_start));
  return out;
}

std::string py_replace(std::string_view s, std::string_view old, std::string_view repl,
                       int64_t count) {
  std::string out;
  if (old.empty()) {
    int64_t n = 0;
    for (size_t i = 0; i < s.size();) {
      if (count < 0 || n < count) {
        out += repl;
        ++n;
      }
      const size_t len = utf8_char_len(s, i);
      out += s.substr(i, len);
      i += len;
    }
    if (count < 0 || n < count) out += repl;
    return out;
  }
  size_t pos = 0;
  int64_t n = 0;
  while (count < 0 || n < count) {
    const size_t hit = s.find(old, pos);
    if (hit == std::string_view::npos) break;
    out += s.substr(pos, hit - pos);
    out += repl;
    pos = hit + old.size();
    ++n;
  }
  out += s.substr(pos);
  return out;
}

int64_t py_count(std::string_view s, std::string_view sub) {
  if (sub.empty()) return static_cast<int64_t>(py_len(s)) + 1;
  int64_t n = 0;
  for (size_t pos = s.find(sub); pos != std::string_view::npos; pos = s.find(sub, pos + sub.size())) ++n;
  return n;
}

int64_t py_find(std::string_view s, std::string_view sub) {
  const size_t hit = s.find(sub);
  if (hit == std::string_view::npos) return -1;
  return static_cast<int64_t>(py_len(s.substr(0, hit)));
}

std::string py_upper(std::string_view s) { return map_code_points(s, to_upper); }
std::string py_lower(std::string_view s) { return map_code_points(s, to_lower); }

std::string py_capitalize(std::string_view s) {
  std::vector<char32_t> cps = decode_all(s);
  for (size_t k = 0; k < cps.size(); ++k) cps[k] = k == 0 ? to_title(cps[k]) : to_lower(cps[k]);
  return encode_all(cps);
}

std::string py_title(std::string_view s) {
  std::vector<char32_t> cps = decode_all(s);
  bool previous_cased = false;
  for (char32_t& c : cps) {
    c = previous_cased ? to_lower(c) : to_title(c);
    previous_cased = is_cased(c);
  }
  return encode_all(cps);
}

std::string jinja_title(std::string_view s) {
  // re.split(r"([-\s({\[<]+)", s): separator runs and words alternate; each
  // piece gets item[0].upper() + item[1:].lower().
  auto is_sep = [](char32_t c) { return c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || py_isspace(c); };
  std::vector<char32_t> cps = decode_all(s);
  for (size_t k = 0; k < cps.size();) {
    const bool sep = is_sep(cps[k]);
    size_t e = k;
    while (e < cps.size() && is_sep(cps[e]) == sep) ++e;
    cps[k] = to_upper(cps[k]);
    for (size_t j = k + 1; j < e; ++j) cps[j] = to_lower(cps[j]);
    k = e;
  }
  return encode_all(cps);
}

bool py_isdigit(std::string_view s) {
  return all_code_points(s, [](char32_t c) { return category(c) == UTF8PROC_CATEGORY_ND; });
}
bool py_isalpha(std::string_view s) { return all_code_points(s, is_alpha); }
bool py_isalnum(std::string_view s) {
  return all_code_points(s, [](char32_t c) { return is_alpha(c) || is_numeric(c); });
}
bool py_isspace_str(std::string_view s) { return all_code_points(s, py_isspace); }

bool py_islower(std::string_view s) {
  bool any_cased = false;
  for (size_t i = 0; i < s.size(); i += utf8_char_len(s, i)) {
    const char32_t c = utf8_decode(s, i);
    const auto k = category(c);
    if (k == UTF8PROC_CATEGORY_LU || k == UTF8PROC_CATEGORY_LT) return false;
    any_cased = any_cased || k == UTF8PROC_CATEGORY_LL;
  }
  return any_cased;
}

bool py_isupper(std::string_view s) {
  bool any_cased = false;
  for (size_t i = 0; i < s.size(); i += utf8_char_len(s, i)) {
    const char32_t c = utf8_decode(s, i);
    const auto k = category(c);
    if (k == UTF8PROC_CATEGORY_LL || k == UTF8PROC_CATEGORY_LT) return false;
    any_cased = any_cased || k == UTF8PROC_CATEGORY_LU;
  }
  return any_cased;
}

void append_py_repr(std::string_view s, std::string* out) {
  const bool has_single = s.find('\'') != std::string_view::npos;
  const bool has_double = s.find('"') != std::string_view::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  static const char kHex[] = "0123456789abcdef";
  out->push_back(quote);
  for (size_t i = 0; i < s.size();) {
    const size_t len = utf8_char_len(s, i);
    const char32_t c = utf8_decode(s, i);
    if (c == static_cast<char32_t>(quote) || c == '\\') {
      out->push_back('\\');
      out->push_back(static_cast<char>(c));
    } else if (c == '\n') {
      *out += "\\n";
    } else if (c == '\r') {
      *out += "\\r";
    } else if (c == '\t') {
      *out += "\\t";
    } else if (is_printable(c)) {
      out->append(s.substr(i, len));
    } else {
      // \xhh below 0x100, \uhhhh below 0x10000, \Uhhhhhhhh above.
      const int digits = c < 0x100 ? 2 : c < 0x10000 ? 4 : 8;
      *out += digits == 2 ? "\\x" : digits == 4 ? "\\u" : "\\U";
      for (int d = digits - 1; d >= 0; --d) out->push_back(kHex[(c >> (4 * d)) & 0xF]);
    }
    i += len;
  }
  out->push_back(quote);
}

std::string py_slice(std::string_view s, int64_t start, int64_t stop, int64_t step) {
  std::string out;
  if (is_ascii(s)) {
    if (step > 0) {
      for (int64_t k = start; k < stop; k += step) out.push_back(s[static_cast<size_t>(k)]);
    } else {
      for (int64_t k = start; k > stop; k += step) out.push_back(s[static_cast<size_t>(k)]);
    }
    return out;
  }
  std::vector<size_t> off;
  code_point_offsets(s, &off);
  auto put = [&](int64_t k) {
    const size_t b = off[static_cast<size_t>(k)];
    out.append(s.substr(b, off[static_cast<size_t>(k) + 1] - b));
  };
  if (step > 0) {
    for (int64_t k = start; k < stop; k += step) put(k);
  } else {
    for (int64_t k = start; k > stop; k += step) put(k);
  }
  return out;
}

}  // namespace replayssm::chat
