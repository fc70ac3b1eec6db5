// tokenizer.json's "added_tokens": strings cut out of the text whole and
// emitted as their own ids, before BPE ever sees them.
//
// As in tokenizers' AddedVocabulary, tokens with normalized=false (special
// tokens, normally) are matched in the raw text; the text between them is
// normalized, and tokens with normalized=true are then matched, in their
// normalized form, in that normalized text. Matching is leftmost-longest
// and non-overlapping (tokenizers uses an Aho-Corasick automaton; a byte
// trie tried at each position gives the same matches). single_word, lstrip
// and rstrip are honoured. Their "word" and "whitespace" character classes
// (Rust regex \w and \s) are approximated by general categories from
// utf8proc: letters, marks, Nd, Nl, Pc and the joiners are word characters;
// a few symbols Unicode also calls Alphabetic (circled letters) are not.
//
// Thread safety: immutable after load; split() may run concurrently.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "io/normalizer.h"
#include "replayssm/status.h"

namespace replayssm {

struct AddedToken {
  int32_t id = 0;
  std::string content;
  bool single_word = false;  // match only when not inside a word
  bool lstrip = false;       // the match swallows whitespace on its left
  bool rstrip = false;       // ... and on its right
  bool normalized = true;    // match in normalized text (default: !special)
  bool special = false;
};

class AddedVocabulary {
 public:
  // Parses field `field` (normally "added_tokens", null or absent: none) of
  // tokenizer.json `file`. Ids and contents must be unique; how ids relate to
  // the model's vocabulary is the caller's check. `normalizer` gives the form
  // in which normalized tokens are matched.
  static Result<AddedVocabulary> from_json(const nlohmann::json* j, const std::string& file,
                                           const std::string& field, const Normalizer& normalizer);

  // A slice [begin, end) of the text given to split(): an added token's match
  // (id >= 0) or text between matches (id == -1).
  struct Piece {
    size_t begin, end;
    int32_t id;
  };
  // Appends the pieces of `text` (well-formed UTF-8), matching the tokens
  // with normalized == `normalized`. Pieces cover the text in order; with
  // lstrip/rstrip a match covers the whitespace it swallowed.
  void split(std::string_view text, bool normalized, std::vector<Piece>* out) const;

  const std::vector<AddedToken>& tokens() const { return tokens_; }
  const AddedToken* find_id(int32_t id) const;
  const AddedToken* find_content(std::string_view content) const;

 private:
  // Byte trie over match patterns; node 0 is the root.
  struct Trie {
    std::vector<int32_t> token;                  // node -> index in tokens_, -1 if none ends here
    std::unordered_map<uint64_t, int32_t> next;  // (node << 8 | byte) -> child node
    void insert(std::string_view pattern, int32_t token_index);
    // End of the longest pattern starting at text[pos] and its token index, or
    // {0, -1} when none starts there.
    std::pair<size_t, int32_t> longest(std::string_view text, size_t pos) const;
  };

  std::vector<AddedToken> tokens_;
  std::unordered_map<int32_t, size_t> by_id_;
  std::unordered_map<std::string, size_t> by_content_;
  Trie raw_;         // normalized == false: patterns are the contents
  Trie normalized_;  // normalized == true: patterns are the normalized contents
};

}  // namespace replayssm
