// UTF-8 scanning (see utf8.h).
#include "io/utf8.h"

#include <cstdint>

namespace replayssm {

namespace {

// Scans the sequence starting at s[i]. Returns its length when it is
// well-formed (*ok = true); otherwise the length of its maximal ill-formed
// subpart (at least 1), the unit that one U+FFFD replaces. The second byte's
// range excludes overlongs (E0, F0), surrogates (ED) and values above
// U+10FFFF (F4), as in the Unicode standard's table 3-7.
size_t scan(std::string_view s, size_t i, bool* ok) {
  const auto b0 = static_cast<uint8_t>(s[i]);
  *ok = false;
  if (b0 < 0x80) {
    *ok = true;
    return 1;
  }
  size_t need = 0;
  uint8_t lo = 0x80, hi = 0xBF;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    need = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    need = 3;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    need = 4;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    return 1;  // a continuation byte or a byte that never starts a sequence
  }
  size_t n = 1;
  for (; n < need; ++n) {
    if (i + n >= s.size()) return n;
    const auto b = static_cast<uint8_t>(s[i + n]);
    const uint8_t l = n == 1 ? lo : 0x80, h = n == 1 ? hi : 0xBF;
    if (b < l || b > h) return n;
  }
  *ok = true;
  return need;
}

}  // namespace

size_t utf8_first_invalid(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    bool ok = false;
    const size_t n = scan(s, i, &ok);
    if (!ok) return i;
    i += n;
  }
  return std::string_view::npos;
}

size_t utf8_char_len(std::string_view s, size_t i) {
  const auto b = static_cast<uint8_t>(s[i]);
  return b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
}

char32_t utf8_decode(std::string_view s, size_t i) {
  const size_t n = utf8_char_len(s, i);
  const auto b0 = static_cast<uint8_t>(s[i]);
  if (n == 1) return b0;
  char32_t cp = b0 & (0x7F >> n);
  for (size_t k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<uint8_t>(s[i + k]) & 0x3F);
  return cp;
}

void utf8_append(char32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

std::string utf8_lossy(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  size_t i = 0;
  while (i < bytes.size()) {
    bool ok = false;
    const size_t n = scan(bytes, i, &ok);
    if (ok) out.append(bytes.substr(i, n));
    else out += "\xEF\xBF\xBD";  // U+FFFD
    i += n;
  }
  return out;
}

}  // namespace replayssm
