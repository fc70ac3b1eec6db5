// Fuzzes tokenizer.json loading (Tokenizer::from_text): the input is the
// file's text. A tokenizer that loads then encodes a few fixed strings and
// the first bytes of the input itself (special tokens, merges, the
// pre-tokenizer's regexes and the normalizer all run), and decodes the ids
// back: every id must be inside the vocabulary and decode.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "io/tokenizer.h"

namespace {

void round_trip(const replayssm::Tokenizer& t, std::string_view text, bool special) {
  auto ids = t.encode(text, special);
  if (!ids.ok()) return;
  for (int32_t id : *ids)
    if (id < 0 || id >= t.vocab_size()) std::abort();
  if (!t.decode(*ids).ok()) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace replayssm;
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto t = Tokenizer::from_text(text, "tokenizer.json");
  if (!t.ok()) return 0;
  for (std::string_view s : {"", "Hello world", "hello  world\n\n<|endoftext|> 123 na\u00efve caf\u00e9 \u6f22\u5b57 \U0001F600",
                             " 's 't 're   \t\r\nab"})
    for (bool special : {false, true}) round_trip(*t, s, special);
  round_trip(*t, std::string_view(text).substr(0, 256), false);
  (void)t->eos_id();
  (void)t->token_id("Hello");
  return 0;
}
