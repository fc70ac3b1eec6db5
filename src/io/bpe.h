// tokenizer.json's "model" of type BPE: vocabulary, ranked merges, and the
// merge loop.
//
// Tokenizing a pre-token starts from one symbol per character and repeatedly
// applies the merge of lowest rank (leftmost first on ties) until none
// applies. The loop is a transcription of tokenizers' Word::merge_all,
// including its priority-queue order and its test for stale entries, so ids
// agree even for vocabularies where two merges produce the same token. The
// options around it (ignore_merges, unk_token and fuse_unk, byte_fallback,
// continuing_subword_prefix, end_of_word_suffix) follow BPE::merge_word; a
// non-zero dropout is refused, since it makes tokenization random.
//
// Thread safety: immutable after load; tokenize() may run concurrently.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "replayssm/status.h"

namespace replayssm {

class BpeModel {
 public:
  // Ids are limited to [0, kMaxId]: id -> token is a dense table.
  static constexpr int64_t kMaxId = (int64_t{1} << 24) - 1;

  // Parses the value of field `field` (normally "model") of tokenizer.json
  // `file`: every vocab id in range and unique, every merge's two parts and
  // their concatenation in the vocab. Errors name the file, the field (for a
  // merge, its index) and the offending token.
  static Result<BpeModel> from_json(const nlohmann::json& j, const std::string& file,
                                    const std::string& field);

  // Appends the ids of one pre-token (text in the vocabulary's alphabet,
  // well-formed UTF-8). Characters not in the vocabulary become unk_token if
  // one is set and are dropped otherwise, as in tokenizers.
  void tokenize(std::string_view word, std::vector<int32_t>* ids) const;

  std::optional<int32_t> token_id(std::string_view token) const;
  // nullptr when no vocabulary token has this id.
  const std::string* token(int32_t id) const;
  // Largest id in the vocabulary, -1 when it is empty.
  int32_t max_id() const { return static_cast<int32_t>(id_to_token_.size()) - 1; }

 private:
  struct StringHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  struct MergeInfo {
    uint32_t rank;   // index in the merges list (the later one wins on duplicates)
    int32_t new_id;  // the merged token
  };
  static uint64_t pair_key(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }
  const MergeInfo* find_merge(int32_t a, int32_t b) const;

  std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>> vocab_;
  std::vector<std::string> id_to_token_;  // "" with has_id_[id] == 0 for unused ids
  std::vector<uint8_t> has_id_;
  std::unordered_map<uint64_t, MergeInfo> merges_;  // (left id, right id) -> merge
  std::optional<int32_t> unk_id_;
  bool fuse_unk_ = false;
  bool byte_fallback_ = false;
  bool ignore_merges_ = false;
  std::string continuing_subword_prefix_;
  std::string end_of_word_suffix_;
};

}  // namespace replayssm
