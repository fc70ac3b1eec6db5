// GPT-2's byte-level alphabet (see byte_level.h).
#include "io/byte_level.h"

#include <array>

#include "io/utf8.h"

namespace replayssm {

namespace {

// The alphabet's highest character is U+0100 + 67 (68 unprintable bytes).
constexpr char32_t kAlphabetEnd = 0x100 + 68;

struct Alphabet {
  std::array<std::string, 256> byte_char;     // byte -> its character, as UTF-8
  std::array<int, kAlphabetEnd> char_byte{};  // code point -> byte, -1 if none

  Alphabet() {
    char_byte.fill(-1);
    char32_t next = 0x100;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      const char32_t cp = printable ? static_cast<char32_t>(b) : next++;
      utf8_append(cp, &byte_char[b]);
      char_byte[cp] = b;
    }
  }
};

const Alphabet& alphabet() {
  static const Alphabet a;
  return a;
}

}  // namespace

void byte_level_encode(std::string_view bytes, std::string* out) {
  const Alphabet& a = alphabet();
  for (char c : bytes) *out += a.byte_char[static_cast<uint8_t>(c)];
}

void byte_level_decode_token(std::string_view token, std::string* out) {
  const Alphabet& a = alphabet();
  const size_t start = out->size();
  for (size_t i = 0; i < token.size(); i += utf8_char_len(token, i)) {
    const char32_t cp = utf8_decode(token, i);
    if (cp >= kAlphabetEnd || a.char_byte[cp] < 0) {
      out->resize(start);
      out->append(token);
      return;
    }
    out->push_back(static_cast<char>(a.char_byte[cp]));
  }
}

}  // namespace replayssm
