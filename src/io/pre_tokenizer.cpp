// Pre-tokenizers: ByteLevel, Split, Sequence (see pre_tokenizer.h).
#include "io/pre_tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>
#include <memory>

#include "io/byte_level.h"
#include "io/utf8.h"

namespace replayssm {

// A compiled pattern. pcre2_match only reads the code, so one Regex serves
// any number of threads; each match call brings its own match data.
class Regex {
 public:
  Regex(pcre2_code* code, std::string pattern) : code_(code), pattern_(std::move(pattern)) {}
  ~Regex() { pcre2_code_free(code_); }
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  pcre2_code* code() const { return code_; }
  const std::string& pattern() const { return pattern_; }

 private:
  pcre2_code* code_;
  std::string pattern_;  // as written in tokenizer.json, for errors
};

namespace {

// GPT-2's split pattern, which ByteLevel applies when use_regex is true.
constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// Unicode White_Space as a class body: what Oniguruma's \s means.
constexpr const char* kWhiteSpace = R"(\x{9}-\x{D}\x{85}\p{Z})";

std::string pcre2_message(int code) {
  PCRE2_UCHAR buf[256];
  pcre2_get_error_message(code, buf, sizeof(buf));
  return reinterpret_cast<const char*>(buf);
}

// Rewrites \s and \S to spell out White_Space (see pre_tokenizer.h). Returns
// the pattern unchanged where the rewrite cannot be sure of the syntax
// (\Q..\E, extended mode, nested sets, \S inside a class).
std::string whitespace_as_onig(const std::string& p) {
  if (p.find("\\Q") != std::string::npos || p.find("(?x") != std::string::npos) return p;
  std::string out;
  bool in_class = false;
  for (size_t i = 0; i < p.size(); ++i) {
    const char c = p[i];
    if (c == '\\' && i + 1 < p.size()) {
      const char n = p[++i];
      if (n == 's') out += in_class ? std::string(kWhiteSpace) : "[" + std::string(kWhiteSpace) + "]";
      else if (n == 'S' && !in_class) out += "[^" + std::string(kWhiteSpace) + "]";
      else if (n == 'S') return p;
      else out += {c, n};
      continue;
    }
    if (c == '[' && !in_class) {
      in_class = true;
      out += c;
      // A ']' first in a class (after an optional '^') is a member, not the end.
      if (i + 1 < p.size() && p[i + 1] == '^') out += p[++i];
      if (i + 1 < p.size() && p[i + 1] == ']') out += p[++i];
      continue;
    }
    if (c == '[' && in_class) {
      if (p.compare(i, 2, "[:") != 0) return p;  // an Oniguruma nested set
      const size_t end = p.find(":]", i + 2);
      if (end == std::string::npos) return p;
      out.append(p, i, end + 2 - i);  // a POSIX class such as [:alpha:]
      i = end + 1;
      continue;
    }
    if (c == ']' && in_class) in_class = false;
    out += c;
  }
  return out;
}

Result<std::shared_ptr<const Regex>> compile(const std::string& pattern, bool literal,
                                             const std::string& where) {
  const std::string source = literal ? pattern : whitespace_as_onig(pattern);
  uint32_t options = PCRE2_UTF | PCRE2_UCP | PCRE2_MULTILINE;
  if (literal) options = PCRE2_UTF | PCRE2_LITERAL;
  int err = 0;
  PCRE2_SIZE err_offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(source.data()), source.size(),
                                   options, &err, &err_offset, nullptr);
  if (!code)
    return unsupported(where + "pattern " + nlohmann::json(pattern).dump() +
                       " does not compile at offset " + std::to_string(err_offset) + ": " +
                       pcre2_message(err));
  // JIT is only a speed-up: where it is unavailable pcre2_match interprets.
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
  return std::shared_ptr<const Regex>(std::make_shared<Regex>(code, pattern));
}

Status bad(const std::string& file, const std::string& field, const std::string& what) {
  return corrupt(file + ": field '" + field + "': " + what);
}

Status bool_field(const nlohmann::json& j, const char* key, bool def, const std::string& file,
                  const std::string& field, bool* out) {
  *out = def;
  if (!j.contains(key) || j[key].is_null()) return {};
  if (!j[key].is_boolean()) return bad(file, field + "." + key, "expected true/false, got " + j[key].dump());
  *out = j[key].get<bool>();
  return {};
}

}  // namespace

Result<std::shared_ptr<const Regex>> PreTokenizer::compile_regex(const std::string& pattern,
                                                                 const std::string& where) {
  return compile(pattern, /*literal=*/false, where);
}

Status PreTokenizer::find_matches(const Regex& re, std::string_view text,
                                  std::vector<std::pair<size_t, size_t>>* out) {
  std::unique_ptr<pcre2_match_data, void (*)(pcre2_match_data*)> md(
      pcre2_match_data_create_from_pattern(re.code(), nullptr), pcre2_match_data_free);
  if (!md) return out_of_budget("regex " + nlohmann::json(re.pattern()).dump() + ": out of memory");
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  // Oniguruma's find_iter: search from the end of the previous match; an
  // empty match exactly there is skipped by advancing one character.
  size_t last_end = 0;
  bool have_match = false;
  size_t last_match_end = 0;
  while (last_end <= text.size()) {
    // The text was validated once by the caller: skip PCRE2's per-call check,
    // which would rescan the whole subject for every match.
    int rc = pcre2_match(re.code(), subject, text.size(), last_end, PCRE2_NO_UTF_CHECK, md.get(), nullptr);
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT)  // the interpreter keeps its frames on the heap
      rc = pcre2_match(re.code(), subject, text.size(), last_end, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT,
                       md.get(), nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0)
      return out_of_budget("regex " + nlohmann::json(re.pattern()).dump() + " failed at byte " +
                           std::to_string(last_end) + " of a " + std::to_string(text.size()) +
                           "-byte piece: " + pcre2_message(rc));
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md.get());
    const size_t b = ov[0], e = ov[1] < ov[0] ? ov[0] : ov[1];
    if (b == e && have_match && last_match_end == last_end) {
      last_end += last_end < text.size() ? utf8_char_len(text, last_end) : 1;
      continue;
    }
    last_end = e;
    have_match = true;
    last_match_end = e;
    out->emplace_back(b, e);
  }
  return {};
}

Status PreTokenizer::parse_into(const nlohmann::json& j, const std::string& file,
                                const std::string& field, std::vector<Step>* steps) {
  if (j.is_null()) return {};
  if (!j.is_object() || !j.contains("type") || !j["type"].is_string())
    return bad(file, field, "expected an object with a string 'type', got " + j.dump());
  const std::string type = j["type"].get<std::string>();
  const std::string where = file + ": field '" + field + "': ";
  Step step;
  if (type == "Sequence") {
    if (!j.contains("pretokenizers") || !j["pretokenizers"].is_array())
      return bad(file, field + ".pretokenizers", "missing or not an array");
    const nlohmann::json& list = j["pretokenizers"];
    for (size_t i = 0; i < list.size(); ++i)
      RSSM_RETURN_IF_ERROR(parse_into(list[i], file, field + ".pretokenizers[" + std::to_string(i) + "]", steps));
    return {};
  }
  if (type == "ByteLevel") {
    // tokenizers' defaults (ByteLevel::default): prefix space and regex on.
    bool use_regex = true;
    step.kind = StepKind::kByteLevel;
    RSSM_RETURN_IF_ERROR(bool_field(j, "add_prefix_space", true, file, field, &step.add_prefix_space));
    RSSM_RETURN_IF_ERROR(bool_field(j, "use_regex", true, file, field, &use_regex));
    if (use_regex) {
      RSSM_ASSIGN_OR_RETURN(step.regex, compile(kGpt2Pattern, false, where));
    }
  } else if (type == "Split") {
    step.kind = StepKind::kSplit;
    const nlohmann::json* pat = j.contains("pattern") ? &j["pattern"] : nullptr;
    if (!pat || !pat->is_object() || pat->size() != 1 ||
        !(pat->contains("Regex") || pat->contains("String")) || !pat->begin()->is_string())
      return bad(file, field + ".pattern",
                 "expected {\"Regex\": \"...\"} or {\"String\": \"...\"}, got " +
                     (pat ? pat->dump() : std::string("nothing")));
    const bool literal = pat->contains("String");
    RSSM_ASSIGN_OR_RETURN(step.regex, compile(pat->begin()->get<std::string>(), literal,
                                              file + ": field '" + field + ".pattern': "));
    if (!j.contains("behavior") || !j["behavior"].is_string())
      return bad(file, field + ".behavior", "missing or not a string");
    const std::string behavior = j["behavior"].get<std::string>();
    if (behavior == "Removed") step.behavior = Behavior::kRemoved;
    else if (behavior == "Isolated") step.behavior = Behavior::kIsolated;
    else if (behavior == "MergedWithPrevious") step.behavior = Behavior::kMergedWithPrevious;
    else if (behavior == "MergedWithNext") step.behavior = Behavior::kMergedWithNext;
    else if (behavior == "Contiguous") step.behavior = Behavior::kContiguous;
    else
      return bad(file, field + ".behavior", "unknown behavior '" + behavior + "'");
    RSSM_RETURN_IF_ERROR(bool_field(j, "invert", false, file, field, &step.invert));
  } else {
    return unsupported(where + "pre-tokenizer type '" + type +
                       "' is not supported (supported: ByteLevel, Split, Sequence)");
  }
  steps->push_back(std::move(step));
  return {};
}

Result<PreTokenizer> PreTokenizer::from_json(const nlohmann::json& j, const std::string& file,
                                             const std::string& field) {
  PreTokenizer p;
  RSSM_RETURN_IF_ERROR(parse_into(j, file, field, &p.steps_));
  return p;
}

Status PreTokenizer::apply(const Step& step, const std::string& piece, std::vector<std::string>* out) {
  if (step.kind == StepKind::kByteLevel) {
    // The prefix space goes on every piece reaching this step, not only the
    // first of the text: that is what tokenizers does.
    std::string text = piece;
    if (step.add_prefix_space && (text.empty() || text[0] != ' ')) text.insert(0, 1, ' ');
    std::vector<std::string_view> parts;
    std::vector<std::pair<size_t, size_t>> matches;
    if (step.regex) {
      RSSM_RETURN_IF_ERROR(find_matches(*step.regex, text, &matches));
      // Isolated: matches and the gaps between them are pieces alike.
      size_t prev = 0;
      for (auto [b, e] : matches) {
        if (b > prev) parts.emplace_back(std::string_view(text).substr(prev, b - prev));
        parts.emplace_back(std::string_view(text).substr(b, e - b));
        prev = e;
      }
      if (prev < text.size()) parts.emplace_back(std::string_view(text).substr(prev));
    } else {
      parts.emplace_back(text);
    }
    for (std::string_view p : parts) {
      if (p.empty()) continue;
      std::string mapped;
      byte_level_encode(p, &mapped);
      out->push_back(std::move(mapped));
    }
    return {};
  }

  // Split: the text as (range, is_match) spans covering it, as tokenizers'
  // Pattern::find_matches, then grouped according to the behavior.
  struct Span {
    size_t b, e;
    bool match;
  };
  std::vector<std::pair<size_t, size_t>> matches;
  RSSM_RETURN_IF_ERROR(find_matches(*step.regex, piece, &matches));
  std::vector<Span> spans;
  size_t prev = 0;
  for (auto [b, e] : matches) {
    if (b != prev) spans.push_back({prev, b, false});
    spans.push_back({b, e, true});
    prev = e;
  }
  if (prev != piece.size()) spans.push_back({prev, piece.size(), false});
  if (step.invert)
    for (Span& s : spans) s.match = !s.match;

  std::vector<Span> pieces;  // `match` now means "remove"
  bool previous_match = false;
  switch (step.behavior) {
    case Behavior::kRemoved:
      pieces = spans;
      break;
    case Behavior::kIsolated:
      for (const Span& s : spans) pieces.push_back({s.b, s.e, false});
      break;
    case Behavior::kContiguous:
      for (const Span& s : spans) {
        if (s.match == previous_match && !pieces.empty()) pieces.back().e = s.e;
        else pieces.push_back({s.b, s.e, false});
        previous_match = s.match;
      }
      break;
    case Behavior::kMergedWithPrevious:
      for (const Span& s : spans) {
        if (s.match && !previous_match && !pieces.empty()) pieces.back().e = s.e;
        else pieces.push_back({s.b, s.e, false});
        previous_match = s.match;
      }
      break;
    case Behavior::kMergedWithNext:
      for (size_t k = spans.size(); k-- > 0;) {
        const Span& s = spans[k];
        if (s.match && !previous_match && !pieces.empty()) pieces.back().b = s.b;
        else pieces.push_back({s.b, s.e, false});
        previous_match = s.match;
      }
      std::reverse(pieces.begin(), pieces.end());
      break;
  }
  for (const Span& s : pieces)
    if (!s.match && s.e > s.b) out->push_back(piece.substr(s.b, s.e - s.b));
  return {};
}

Status PreTokenizer::split(std::string_view text, std::vector<std::string>* out) const {
  std::vector<std::string> pieces{std::string(text)};
  if (text.empty()) pieces.clear();
  std::vector<std::string> next;
  for (const Step& step : steps_) {
    next.clear();
    for (const std::string& piece : pieces) RSSM_RETURN_IF_ERROR(apply(step, piece, &next));
    pieces.swap(next);
  }
  for (std::string& p : pieces) out->push_back(std::move(p));
  return {};
}

}  // namespace replayssm
