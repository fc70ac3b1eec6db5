// GPT-2's byte-level alphabet: every byte is one printable character.
//
// Byte-level BPE runs on bytes, but vocabularies are stored as JSON strings,
// so GPT-2 (and every tokenizer.json that says "ByteLevel") maps each byte to
// a visible character first: the printable bytes '!'..'~', 0xA1..0xAC and
// 0xAE..0xFF stand for themselves, and the other 68 bytes, in increasing
// order, become U+0100, U+0101, ... (so a space is 'Ġ' U+0120 and a newline
// 'Ċ' U+010A). Encoding maps a pre-token's UTF-8 bytes into this alphabet;
// decoding maps token text back to bytes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace replayssm {

// Appends the alphabet form of `bytes`: one character per byte.
void byte_level_encode(std::string_view bytes, std::string* out);

// Appends the bytes that `token` stands for. A token with a character outside
// the alphabet (an added token such as "<｜end▁of▁sentence｜>") is appended
// as its own UTF-8 instead, as tokenizers' ByteLevel decoder does.
void byte_level_decode_token(std::string_view token, std::string* out);

}  // namespace replayssm
