// Tokenizer: a Hugging Face tokenizer.json for byte-level BPE, in C++.
//
// encode() reproduces `tokenizers`' Tokenizer.encode(text).ids for the files
// that library writes for GPT-2, Llama 3 and Qwen2-style byte-level BPE:
//
//   text ─► split out added tokens (normalized=false, in the raw text)
//        ─► normalize the rest (normalizer.h)
//        ─► split out added tokens (normalized=true, in the normalized text)
//        ─► pre-tokenize the rest (pre_tokenizer.h; ByteLevel maps bytes)
//        ─► BPE on each pre-token (bpe.h)
//
// decode() maps ids to token strings (added tokens to their content) and
// back through the byte-level alphabet; bytes that do not form UTF-8 become
// U+FFFD, as tokenizers' decoder does. Each stage refuses, at load and by
// name, any type it does not implement, so an unsupported file is an error
// rather than different ids.
//
// The post_processor's special tokens are added on request (post_processor.h;
// encode equals tokenizers' encode with that add_special_tokens, for one
// sequence). Not reproduced: truncation and padding. decode() keeps special
// tokens (skip_special_tokens=False).
//
// Thread safety: a Tokenizer is immutable; copies share the loaded tables and
// every method may be called concurrently.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "replayssm/status.h"

namespace replayssm {

class Tokenizer {
 public:
  // Reads and validates a tokenizer.json file. Errors name the file and the
  // field: missing or malformed fields, unsupported component types, merges
  // whose parts or result are not in the vocab (by merge index), ids shared
  // by two tokens, added tokens whose id disagrees with the vocab.
  static Result<Tokenizer> load(const std::string& path);
  // The same from the file's text; `name` stands for the file in errors.
  static Result<Tokenizer> from_text(const std::string& text, const std::string& name);

  // Token ids of UTF-8 `text`. Ill-formed UTF-8 is an error naming the byte
  // offset; so is a regex engine limit hit on a pathological input. With
  // add_special_tokens, the post-processor's tokens go around them (a BOS,
  // say: tokenizers' default, and transformers' `tokenizer(text)`).
  Result<std::vector<int32_t>> encode(std::string_view text, bool add_special_tokens = false) const;

  // Text of `ids`. An id that is neither in the vocab nor an added token is
  // an error naming it.
  Result<std::string> decode(std::span<const int32_t> ids) const;
  // The bytes of `ids`, as decode() forms them before the UTF-8 check: a
  // token may hold part of a character (a streaming client's text waits
  // for the rest).
  Result<std::string> decode_bytes(std::span<const int32_t> ids) const;

  // Largest id over vocab and added tokens, plus one.
  int64_t vocab_size() const;
  // Id of a token string: an added token's content or a vocab entry (in the
  // vocabulary's alphabet, e.g. "Ġthe"). nullopt when it is neither.
  std::optional<int32_t> token_id(std::string_view token) const;
  // The added token "<|endoftext|>" when the file has one, else nullopt.
  std::optional<int32_t> eos_id() const;

 private:
  struct Impl;
  explicit Tokenizer(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const Impl> impl_;
};

}  // namespace replayssm
