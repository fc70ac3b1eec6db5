// tokenizer.json's "post_processor": the special tokens `tokenizers` puts
// around one sequence when asked to (add_special_tokens=True, the default
// of transformers' `tokenizer(text)`): a BOS before a Llama-style or
// Nemotron prompt, [CLS] … [SEP] for BERT.
//
// For a single sequence every supported processor is a list of ids before
// the text's ids and a list after: TemplateProcessing's "single" template
// (its SpecialToken items resolved through "special_tokens"),
// BertProcessing and RobertaProcessing (cls, sep), ByteLevel (nothing: it
// only trims offsets) and Sequences of these. Any other type is refused at
// load, by name: skipping it would silently change the ids of a prompt.
// Pairs of sequences are not encoded here, so their templates are not read.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "replayssm/status.h"

namespace replayssm {

class PostProcessor {
 public:
  // Parses the value of field `field` of tokenizer.json `file`; null means
  // none. Errors name the file and field.
  static Result<PostProcessor> from_json(const nlohmann::json& j, const std::string& file, const std::string& field);

  // `ids` with the special tokens around them (apply({}): every id it adds).
  std::vector<int32_t> apply(const std::vector<int32_t>& ids) const;

 private:
  static Status parse_into(const nlohmann::json& j, const std::string& file, const std::string& field,
                           std::vector<int32_t>* before, std::vector<int32_t>* after);

  std::vector<int32_t> before_, after_;
};

}  // namespace replayssm
