// UTF-8 scanning for the tokenizer: strict validation, code point decoding
// and Rust's lossy conversion.
//
// tokenizers works on Rust `str`, which is always well-formed UTF-8, so the
// rules here are Rust's: no overlong forms, no surrogates, nothing above
// U+10FFFF. Text is checked once, at Tokenizer::encode; everything past that
// point may assume well-formed input. Decoding can produce arbitrary bytes
// (a token can be half a character), and tokenizers turns those back into a
// string with String::from_utf8_lossy, which utf8_lossy reproduces.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace replayssm {

// Byte offset of the first byte that does not begin a well-formed sequence,
// or std::string_view::npos when `s` is well-formed.
size_t utf8_first_invalid(std::string_view s);

// Length in bytes of the character starting at s[i]; `s` must be well-formed.
size_t utf8_char_len(std::string_view s, size_t i);

// The code point starting at s[i]; `s` must be well-formed.
char32_t utf8_decode(std::string_view s, size_t i);

// Appends the UTF-8 form of `cp` (a valid scalar value).
void utf8_append(char32_t cp, std::string* out);

// `bytes` with every ill-formed sequence replaced by U+FFFD, one per maximal
// ill-formed subpart (Unicode's recommended practice, which Rust follows).
std::string utf8_lossy(std::string_view bytes);

}  // namespace replayssm
