// tokenizer.json's "normalizer": Unicode normalization before pre-tokenizing.
//
// Only the Unicode normal forms are supported (NFC, NFD, NFKC, NFKD, through
// utf8proc) and Sequences of them; byte-level BPE tokenizers use NFC or
// nothing. Any other type is refused at load, by name, rather than skipped:
// a skipped normalizer would silently change token ids.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>
#include <vector>

#include "replayssm/status.h"

namespace replayssm {

class Normalizer {
 public:
  // Parses the value of field `field` (normally "normalizer") of tokenizer.json
  // `file`; null means no normalization. Errors name the file and field.
  static Result<Normalizer> from_json(const nlohmann::json& j, const std::string& file,
                                      const std::string& field);

  // `text` must be well-formed UTF-8.
  std::string normalize(std::string_view text) const;
  bool identity() const { return forms_.empty(); }

 private:
  enum class Form { kNfc, kNfd, kNfkc, kNfkd };
  static Status parse_into(const nlohmann::json& j, const std::string& file, const std::string& field,
                           std::vector<Form>* forms);

  std::vector<Form> forms_;  // applied in order
};

}  // namespace replayssm
