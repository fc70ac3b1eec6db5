// Jinja's lexer as transformers configures it (see jinja_lexer.h).
#include "chat/jinja_lexer.h"

#include <cstring>

#include "chat/jinja_string.h"
#include "io/utf8.h"

namespace replayssm::chat {

namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_name_char(char c) { return is_name_start(c) || is_digit(c); }
int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// jinja2 normalises every newline to "\n" and drops one trailing newline
// before lexing.
std::string normalise_newlines(std::string_view source) {
  std::string s;
  s.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      s.push_back('\n');
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      s.push_back(source[i]);
    }
  }
  if (!s.empty() && s.back() == '\n') s.pop_back();
  return s;
}

class Lexer {
 public:
  Lexer(std::string src, const std::string& name) : src_(std::move(src)), name_(name) {}

  Result<std::vector<Token>> run() {
    while (pos_ < src_.size()) {
      const size_t open = find_tag(pos_);
      text_.append(src_, pos_, open - pos_);
      if (open == src_.size()) {
        pos_ = open;
        break;
      }
      RSSM_RETURN_IF_ERROR(lex_tag(open));
    }
    flush_text();
    push(TokenKind::kEnd, "", src_.size());
    return std::move(tokens_);
  }

 private:
  // The next "{{", "{%" or "{#" at or after `from`, or src_.size().
  size_t find_tag(size_t from) const {
    for (size_t k = src_.find('{', from); k != std::string::npos; k = src_.find('{', k + 1)) {
      if (k + 1 < src_.size() && (src_[k + 1] == '{' || src_[k + 1] == '%' || src_[k + 1] == '#')) return k;
    }
    return src_.size();
  }

  Status error_at(size_t pos, const std::string& what) {
    int line = 0, col = 0;
    locate(pos, &line, &col);
    return invalid_argument(name_ + ":" + std::to_string(line) + ":" + std::to_string(col) + ": " + what);
  }

  // Line and column (code points) of byte `pos`. Positions are asked for in
  // increasing order, so a cursor makes this linear overall.
  void locate(size_t pos, int* line, int* col) {
    if (pos < cursor_pos_) cursor_pos_ = 0, cursor_line_ = 1, cursor_col_ = 1;
    while (cursor_pos_ < pos && cursor_pos_ < src_.size()) {
      if (src_[cursor_pos_] == '\n') {
        ++cursor_line_;
        cursor_col_ = 1;
      } else if ((static_cast<unsigned char>(src_[cursor_pos_]) & 0xC0) != 0x80) {
        ++cursor_col_;
      }
      ++cursor_pos_;
    }
    *line = cursor_line_;
    *col = cursor_col_;
  }

  void push(TokenKind kind, std::string text, size_t at) {
    Token t;
    t.kind = kind;
    t.text = std::move(text);
    locate(at, &t.line, &t.col);
    tokens_.push_back(std::move(t));
  }

  void flush_text() {
    if (!text_.empty()) {
      push(TokenKind::kText, std::move(text_), text_start_);
      text_.clear();
    }
  }

  // Whitespace control before a tag opening at `open` whose marker (the
  // character after "{%", "{{" or "{#") is `marker`.
  void strip_before(char opener, char marker) {
    if (marker == '-') {
      size_t e = text_.size();
      while (e > 0 && is_space(text_[e - 1])) --e;
      text_.resize(e);
    } else if (marker != '+' && opener != '{') {
      // lstrip_blocks: only spaces and tabs since the line began.
      const size_t nl = text_.rfind('\n');
      const size_t l_pos = nl == std::string::npos ? 0 : nl + 1;
      if ((l_pos > 0 || line_starting_) && text_.find_first_not_of(" \t", l_pos) == std::string::npos)
        text_.resize(l_pos);
    }
  }

  // Whitespace control after a tag whose end starts at `end` with marker
  // `marker` ('-', '+' or 0) and is `len` characters long.
  void strip_after(size_t end, char marker, size_t len, bool is_block) {
    pos_ = end + len;
    close_end_ = pos_;
    if (marker == '-') {
      while (pos_ < src_.size() && is_space(src_[pos_])) ++pos_;
    } else if (marker != '+' && is_block && pos_ < src_.size() && src_[pos_] == '\n') {
      ++pos_;  // trim_blocks
    }
    line_starting_ = pos_ > 0 && src_[pos_ - 1] == '\n';
    text_start_ = pos_;
  }

  Status lex_tag(size_t open) {
    const char opener = src_[open + 1];  // '{', '%' or '#'
    size_t p = open + 2;
    const char marker = p < src_.size() && (src_[p] == '-' || src_[p] == '+') ? src_[p] : 0;
    if (marker) ++p;
    strip_before(opener, marker);
    flush_text();
    if (opener == '#') {
      const size_t close = src_.find("#}", p);
      if (close == std::string::npos) return error_at(open, "unclosed comment: '{#' has no '#}'");
      const char end_marker = close > p && (src_[close - 1] == '-' || src_[close - 1] == '+') ? src_[close - 1] : 0;
      strip_after(end_marker ? close - 1 : close, end_marker, end_marker ? 3 : 2, true);
      return Status();
    }
    const bool is_block = opener == '%';
    const size_t first_token = tokens_.size();
    push(is_block ? TokenKind::kBlockBegin : TokenKind::kVarBegin, is_block ? "{%" : "{{", open);
    pos_ = p;
    std::string balance;  // open brackets inside the tag
    while (true) {
      while (pos_ < src_.size() && is_space(src_[pos_])) ++pos_;
      if (pos_ >= src_.size())
        return error_at(open, std::string("unclosed tag: '") + (is_block ? "{%" : "{{") + "' has no '" +
                                  (is_block ? "%}" : "}}") + "'");
      if (balance.empty()) {
        const char close_char = is_block ? '%' : '}';
        const char c = src_[pos_];
        const bool marked = (c == '-' || (c == '+' && is_block)) && pos_ + 2 < src_.size() &&
                            src_[pos_ + 1] == close_char && src_[pos_ + 2] == '}';
        if (marked || (c == close_char && pos_ + 1 < src_.size() && src_[pos_ + 1] == '}')) {
          push(is_block ? TokenKind::kBlockEnd : TokenKind::kVarEnd, is_block ? "%}" : "}}", pos_);
          tokens_marker_ = marked ? c : 0;
          strip_after(pos_, tokens_marker_, marked ? 3 : 2, is_block);
          break;
        }
      }
      RSSM_RETURN_IF_ERROR(lex_expression_token(&balance));
    }
    // {% raw %}: everything up to {% endraw %} is text.
    if (is_block && tokens_.size() == first_token + 3 && tokens_[first_token + 1].kind == TokenKind::kName &&
        tokens_[first_token + 1].text == "raw") {
      tokens_.resize(first_token);
      // jinja2's raw_begin rule has no trim_blocks suffix: only "-%}" strips.
      if (tokens_marker_ != '-') pos_ = close_end_;
      return lex_raw(open);
    }
    return Status();
  }

  Status lex_raw(size_t open) {
    for (size_t k = find_tag(pos_); k < src_.size(); k = find_tag(k + 1)) {
      if (src_[k + 1] != '%') continue;
      size_t q = k + 2;
      const char marker = q < src_.size() && (src_[q] == '-' || src_[q] == '+') ? src_[q] : 0;
      if (marker) ++q;
      while (q < src_.size() && is_space(src_[q])) ++q;
      if (src_.compare(q, 6, "endraw") != 0) continue;
      q += 6;
      while (q < src_.size() && is_space(src_[q])) ++q;
      const char end_marker = q < src_.size() && (src_[q] == '-' || src_[q] == '+') ? src_[q] : 0;
      const size_t close = end_marker ? q + 1 : q;
      if (src_.compare(close, 2, "%}") != 0) continue;
      text_.append(src_, pos_, k - pos_);
      strip_before('%', marker);
      flush_text();
      strip_after(end_marker ? close - 1 : close, end_marker, end_marker ? 3 : 2, true);
      return Status();
    }
    return error_at(open, "unclosed '{% raw %}': no '{% endraw %}'");
  }

  Status lex_expression_token(std::string* balance) {
    const size_t start = pos_;
    const char c = src_[pos_];
    if (is_name_start(c)) {
      while (pos_ < src_.size() && is_name_char(src_[pos_])) ++pos_;
      push(TokenKind::kName, src_.substr(start, pos_ - start), start);
      return Status();
    }
    if (is_digit(c)) return lex_number();
    if (c == '\'' || c == '"') return lex_string();
    static const char* const kTwo[] = {"//", "**", "==", "!=", "<=", ">="};
    for (const char* op : kTwo) {
      if (src_.compare(pos_, 2, op) == 0) {
        pos_ += 2;
        push(TokenKind::kOperator, op, start);
        return Status();
      }
    }
    if (std::strchr("+-*/%~()[]{}<>=.:|,;", c) == nullptr || c == '\0') {
      const size_t len = utf8_char_len(src_, pos_);
      return error_at(start, "unexpected character '" + src_.substr(pos_, len) + "' in tag");
    }
    if (c == '(' || c == '[' || c == '{') balance->push_back(c);
    if (c == ')' || c == ']' || c == '}') {
      const char want = c == ')' ? '(' : c == ']' ? '[' : '{';
      if (balance->empty() || balance->back() != want)
        return error_at(start, std::string("unexpected '") + c + "'");
      balance->pop_back();
    }
    ++pos_;
    push(TokenKind::kOperator, std::string(1, c), start);
    return Status();
  }

  Status lex_number() {
    const size_t start = pos_;
    auto digits = [&](auto pred) {
      const size_t b = pos_;
      while (pos_ < src_.size() && (pred(src_[pos_]) || (src_[pos_] == '_' && pos_ > b))) ++pos_;
      std::string d;
      for (size_t k = b; k < pos_; ++k)
        if (src_[k] != '_') d.push_back(src_[k]);
      return d;
    };
    // 0b / 0o / 0x integers.
    if (src_[pos_] == '0' && pos_ + 1 < src_.size() && std::strchr("bBoOxX", src_[pos_ + 1]) && src_[pos_ + 1]) {
      const char kind = static_cast<char>(src_[pos_ + 1] | 0x20);
      pos_ += 2;
      const int base = kind == 'b' ? 2 : kind == 'o' ? 8 : 16;
      const std::string d = digits([&](char ch) { const int v = hex_digit(ch); return v >= 0 && v < base; });
      if (d.empty()) return error_at(start, "malformed number literal");
      return push_int(d, base, start);
    }
    std::string text = digits(is_digit);
    bool is_float = false;
    // A number right after '.' is an item index ("foo.0.1"), never a float.
    const bool after_dot = start > 0 && src_[start - 1] == '.';
    if (!after_dot && pos_ + 1 < src_.size() && src_[pos_] == '.' && is_digit(src_[pos_ + 1])) {
      ++pos_;
      text.push_back('.');
      text += digits(is_digit);
      is_float = true;
    }
    if (!after_dot && pos_ < src_.size() && (src_[pos_] == 'e' || src_[pos_] == 'E')) {
      size_t q = pos_ + 1;
      if (q < src_.size() && (src_[q] == '+' || src_[q] == '-')) ++q;
      if (q < src_.size() && is_digit(src_[q])) {
        text.push_back('e');
        text.append(src_, pos_ + 1, q - pos_ - 1);
        pos_ = q;
        text += digits(is_digit);
        is_float = true;
      }
    }
    if (is_float) {
      push(TokenKind::kFloat, text, start);
      tokens_.back().float_value = std::strtod(text.c_str(), nullptr);
      return Status();
    }
    return push_int(text, 10, start);
  }

  Status push_int(const std::string& d, int base, size_t start) {
    uint64_t v = 0;
    for (char ch : d) {
      const uint64_t next = v * static_cast<uint64_t>(base) + static_cast<uint64_t>(hex_digit(ch));
      if (next > static_cast<uint64_t>(INT64_MAX) || next / static_cast<uint64_t>(base) < v)
        return error_at(start, "integer literal out of the 64-bit range");
      v = next;
    }
    push(TokenKind::kInt, d, start);
    tokens_.back().int_value = static_cast<int64_t>(v);
    return Status();
  }

  // A quoted string, decoded as Python's unicode-escape codec does (jinja2
  // decodes string literals that way): unknown escapes keep their backslash.
  Status lex_string() {
    const size_t start = pos_;
    const char quote = src_[pos_++];
    std::string out;
    while (true) {
      if (pos_ >= src_.size()) return error_at(start, "unterminated string literal");
      const char c = src_[pos_];
      if (c == quote) {
        ++pos_;
        break;
      }
      if (c != '\\') {
        out.push_back(c);
        ++pos_;
        continue;
      }
      if (pos_ + 1 >= src_.size()) return error_at(start, "unterminated string literal");
      const char e = src_[pos_ + 1];
      pos_ += 2;
      switch (e) {
        case '\n': break;  // line continuation
        case '\\': out.push_back('\\'); break;
        case '\'': out.push_back('\''); break;
        case '"': out.push_back('"'); break;
        case 'a': out.push_back('\a'); break;
        case 'b': out.push_back('\b'); break;
        case 'f': out.push_back('\f'); break;
        case 'n': out.push_back('\n'); break;
        case 'r': out.push_back('\r'); break;
        case 't': out.push_back('\t'); break;
        case 'v': out.push_back('\v'); break;
        case 'x':
        case 'u':
        case 'U': {
          const int n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          uint32_t cp = 0;
          for (int k = 0; k < n; ++k) {
            const int v = pos_ < src_.size() ? hex_digit(src_[pos_]) : -1;
            if (v < 0) return error_at(pos_, std::string("truncated \\") + e + " escape in string literal");
            cp = cp * 16 + static_cast<uint32_t>(v);
            ++pos_;
          }
          if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
            return error_at(start, "string literal escape names no Unicode scalar value");
          utf8_append(static_cast<char32_t>(cp), &out);
          break;
        }
        case 'N':
          return error_at(start, "\\N{...} escapes are not supported");
        default:
          if (e >= '0' && e <= '7') {
            uint32_t cp = static_cast<uint32_t>(e - '0');
            for (int k = 0; k < 2 && pos_ < src_.size() && src_[pos_] >= '0' && src_[pos_] <= '7'; ++k)
              cp = cp * 8 + static_cast<uint32_t>(src_[pos_++] - '0');
            utf8_append(static_cast<char32_t>(cp), &out);
          } else {
            out.push_back('\\');
            --pos_;  // the character after the backslash is read again as itself
          }
      }
    }
    push(TokenKind::kString, std::move(out), start);
    return Status();
  }

  std::string src_;
  const std::string& name_;
  size_t pos_ = 0;
  std::vector<Token> tokens_;
  std::string text_;        // data since the last tag, not yet emitted
  size_t text_start_ = 0;   // where text_ began
  bool line_starting_ = true;  // the last tag ended with a newline (or none yet)
  size_t close_end_ = 0;       // just past the last tag's closing delimiter
  char tokens_marker_ = 0;     // the last tag's closing marker ('-', '+' or 0)
  size_t cursor_pos_ = 0;
  int cursor_line_ = 1, cursor_col_ = 1;
};

}  // namespace

Result<std::vector<Token>> tokenize(std::string_view source, const std::string& name) {
  const size_t bad = utf8_first_invalid(source);
  if (bad != std::string_view::npos)
    return invalid_argument(name + ": invalid UTF-8 at byte " + std::to_string(bad));
  return Lexer(normalise_newlines(source), name).run();
}

}  // namespace replayssm::chat
