// tokenizer.json's "pre_tokenizer": normalized text -> pre-tokens for BPE.
//
// Supported: ByteLevel (optional prefix space, optional GPT-2 split regex,
// then the byte-level alphabet), Split (a regex or literal pattern with any
// of tokenizers' five delimiter behaviours, optionally inverted), Sequence
// of those, and null (the text is one pre-token). That covers what
// tokenizers writes for GPT-2, Llama 3 and Qwen2-style byte-level BPE.
//
// tokenizers compiles patterns with Oniguruma; we use PCRE2 with UTF and UCP
// so \s, \p{L}, \p{N} and (?i) are Unicode-aware the same way, and iterate
// matches with Oniguruma's rule for empty matches. Two differences from
// Oniguruma are bridged: PCRE2's \s also matches U+180E, which Oniguruma's
// (Unicode White_Space) does not, so \s and \S are rewritten to spell out
// White_Space; and `^`/`$` are line anchors in Oniguruma's default (Ruby)
// syntax, hence PCRE2_MULTILINE. Remaining gaps: Unicode versions differ
// (Debian 12's PCRE2 10.42 has Unicode 14, the Oniguruma inside tokenizers
// 0.23 has 15), so a character new in Unicode 15, such as CJK Extension H
// (U+31350..U+323AF), is a letter to tokenizers and unassigned here and
// splits differently; Oniguruma-only syntax (nested sets like [a-z&&[^b]])
// is not translated and fails to compile, by name.
//
// Thread safety: a loaded PreTokenizer is immutable; split() may run
// concurrently from any number of threads.
#pragma once

#include <nlohmann/json.hpp>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "replayssm/status.h"

namespace replayssm {

class Regex;  // a compiled PCRE2 pattern (pre_tokenizer.cpp)

class PreTokenizer {
 public:
  // Parses the value of field `field` (normally "pre_tokenizer") of
  // tokenizer.json `file`. Errors name the file and field.
  static Result<PreTokenizer> from_json(const nlohmann::json& j, const std::string& file,
                                        const std::string& field);

  // Appends the pre-tokens of `text` (well-formed UTF-8) to *out, in order;
  // when a ByteLevel step runs they are in the byte-level alphabet. Empty
  // pieces are dropped, as tokenizers does. Fails only when the regex engine
  // gives up (a match or memory limit), naming the pattern.
  Status split(std::string_view text, std::vector<std::string>* out) const;

  // Builds a regex the way a Split step does; exposed for tests.
  static Result<std::shared_ptr<const Regex>> compile_regex(const std::string& pattern,
                                                            const std::string& where);
  // Byte ranges of the matches of `re` in `text`, with Oniguruma's iteration
  // rule (an empty match right after the previous match is skipped).
  static Status find_matches(const Regex& re, std::string_view text,
                             std::vector<std::pair<size_t, size_t>>* out);

 private:
  enum class StepKind { kByteLevel, kSplit };
  enum class Behavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };
  struct Step {
    StepKind kind = StepKind::kByteLevel;
    bool add_prefix_space = false;        // ByteLevel
    Behavior behavior = Behavior::kIsolated;  // Split (ByteLevel's regex: Isolated)
    bool invert = false;                  // Split
    std::shared_ptr<const Regex> regex;   // Split; ByteLevel when use_regex, else null
  };

  static Status parse_into(const nlohmann::json& j, const std::string& file, const std::string& field,
                           std::vector<Step>* steps);
  static Status apply(const Step& step, const std::string& piece, std::vector<std::string>* out);

  std::vector<Step> steps_;
};

}  // namespace replayssm
