// Added tokens (see added_tokens.h).
#include "io/added_tokens.h"

#include <utf8proc.h>

#include <algorithm>

#include "io/bpe.h"
#include "io/utf8.h"

namespace replayssm {

namespace {

Status bad(const std::string& file, const std::string& field, const std::string& what) {
  return corrupt(file + ": field '" + field + "': " + what);
}

// Unicode White_Space (Rust's char::is_whitespace, regex \s).
bool is_whitespace(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
         c == 0x3000;
}

// Rust regex \w, approximately (see added_tokens.h).
bool is_word(char32_t c) {
  if (c == 0x200C || c == 0x200D) return true;
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(c))) {
    case UTF8PROC_CATEGORY_LU: case UTF8PROC_CATEGORY_LL: case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM: case UTF8PROC_CATEGORY_LO: case UTF8PROC_CATEGORY_MN:
    case UTF8PROC_CATEGORY_MC: case UTF8PROC_CATEGORY_ME: case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL: case UTF8PROC_CATEGORY_PC:
      return true;
    default:
      return false;
  }
}

// The code point that ends at text[end) (end > 0).
char32_t char_before(std::string_view text, size_t end) {
  size_t b = end - 1;
  while (b > 0 && (static_cast<uint8_t>(text[b]) & 0xC0) == 0x80) --b;
  return utf8_decode(text, b);
}

// Start of the run of whitespace that ends text[..end).
size_t whitespace_run_start(std::string_view text, size_t end) {
  while (end > 0) {
    size_t b = end - 1;
    while (b > 0 && (static_cast<uint8_t>(text[b]) & 0xC0) == 0x80) --b;
    if (!is_whitespace(utf8_decode(text, b))) break;
    end = b;
  }
  return end;
}

// End of the run of whitespace that starts at text[begin].
size_t whitespace_run_end(std::string_view text, size_t begin) {
  while (begin < text.size() && is_whitespace(utf8_decode(text, begin))) begin += utf8_char_len(text, begin);
  return begin;
}

Status bool_field(const nlohmann::json& e, const char* key, bool def, const std::string& file,
                  const std::string& field, bool* out) {
  *out = def;
  if (!e.contains(key) || e[key].is_null()) return {};
  if (!e[key].is_boolean()) return bad(file, field + "." + key, "expected true/false, got " + e[key].dump());
  *out = e[key].get<bool>();
  return {};
}

}  // namespace

void AddedVocabulary::Trie::insert(std::string_view pattern, int32_t token_index) {
  if (token.empty()) token.push_back(-1);
  int32_t node = 0;
  for (char c : pattern) {
    const uint64_t key = (static_cast<uint64_t>(node) << 8) | static_cast<uint8_t>(c);
    auto it = next.find(key);
    if (it == next.end()) {
      it = next.emplace(key, static_cast<int32_t>(token.size())).first;
      token.push_back(-1);
    }
    node = it->second;
  }
  token[node] = token_index;
}

std::pair<size_t, int32_t> AddedVocabulary::Trie::longest(std::string_view text, size_t pos) const {
  std::pair<size_t, int32_t> best{0, -1};
  if (token.empty()) return best;
  int32_t node = 0;
  for (size_t i = pos; i < text.size(); ++i) {
    auto it = next.find((static_cast<uint64_t>(node) << 8) | static_cast<uint8_t>(text[i]));
    if (it == next.end()) break;
    node = it->second;
    if (token[node] >= 0) best = {i + 1, token[node]};
  }
  return best;
}

Result<AddedVocabulary> AddedVocabulary::from_json(const nlohmann::json* j, const std::string& file,
                                                   const std::string& field, const Normalizer& normalizer) {
  AddedVocabulary v;
  if (!j || j->is_null()) return v;
  if (!j->is_array()) return bad(file, field, "expected an array, got " + j->dump().substr(0, 80));
  for (size_t i = 0; i < j->size(); ++i) {
    const nlohmann::json& e = (*j)[i];
    const std::string where = field + "[" + std::to_string(i) + "]";
    if (!e.is_object()) return bad(file, where, "expected an object, got " + e.dump());
    AddedToken t;
    if (!e.contains("id") || !e["id"].is_number_integer() || e["id"].get<int64_t>() < 0 ||
        e["id"].get<int64_t>() > BpeModel::kMaxId)
      return bad(file, where + ".id", "expected an integer in [0, " + std::to_string(BpeModel::kMaxId) +
                                          "], got " + (e.contains("id") ? e["id"].dump() : "nothing"));
    t.id = static_cast<int32_t>(e["id"].get<int64_t>());
    if (!e.contains("content") || !e["content"].is_string() || e["content"].get<std::string>().empty())
      return bad(file, where + ".content", "expected a non-empty string");
    t.content = e["content"].get<std::string>();
    RSSM_RETURN_IF_ERROR(bool_field(e, "special", false, file, where, &t.special));
    RSSM_RETURN_IF_ERROR(bool_field(e, "single_word", false, file, where, &t.single_word));
    RSSM_RETURN_IF_ERROR(bool_field(e, "lstrip", false, file, where, &t.lstrip));
    RSSM_RETURN_IF_ERROR(bool_field(e, "rstrip", false, file, where, &t.rstrip));
    RSSM_RETURN_IF_ERROR(bool_field(e, "normalized", !t.special, file, where, &t.normalized));
    if (v.by_id_.count(t.id))
      return bad(file, where + ".id", "id " + std::to_string(t.id) + " is also the id of " +
                                          nlohmann::json(v.tokens_[v.by_id_[t.id]].content).dump());
    if (v.by_content_.count(t.content))
      return bad(file, where + ".content", nlohmann::json(t.content).dump() + " is listed twice");
    v.by_id_[t.id] = v.tokens_.size();
    v.by_content_[t.content] = v.tokens_.size();
    const auto index = static_cast<int32_t>(v.tokens_.size());
    if (t.normalized) {
      const std::string pattern = normalizer.normalize(t.content);
      if (!pattern.empty()) v.normalized_.insert(pattern, index);
    } else {
      v.raw_.insert(t.content, index);
    }
    v.tokens_.push_back(std::move(t));
  }
  return v;
}

const AddedToken* AddedVocabulary::find_id(int32_t id) const {
  auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : &tokens_[it->second];
}

const AddedToken* AddedVocabulary::find_content(std::string_view content) const {
  auto it = by_content_.find(std::string(content));
  return it == by_content_.end() ? nullptr : &tokens_[it->second];
}

void AddedVocabulary::split(std::string_view text, bool normalized, std::vector<Piece>* out) const {
  const Trie& trie = normalized ? normalized_ : raw_;
  if (trie.token.empty()) {  // no patterns: skip the scan
    if (!text.empty()) out->push_back(Piece{0, text.size(), -1});
    return;
  }
  size_t start_offset = 0;  // end of the last emitted piece
  size_t pos = 0;           // where the search for the next match resumes
  while (pos < text.size()) {
    // Leftmost match, longest there. Patterns are well-formed UTF-8, so a
    // match never starts inside a character.
    size_t begin = pos;
    std::pair<size_t, int32_t> m{0, -1};
    for (; begin < text.size(); ++begin) {
      m = trie.longest(text, begin);
      if (m.second >= 0) break;
    }
    if (m.second < 0) break;
    size_t start = begin, stop = m.first;
    pos = stop;  // the search resumes after the match, whatever happens to it
    const AddedToken& t = tokens_[m.second];
    if (t.single_word) {
      const bool space_before = start == 0 || !is_word(char_before(text, start));
      const bool space_after = stop == text.size() || !is_word(utf8_decode(text, stop));
      if (!space_before || !space_after) continue;
    }
    // lstrip never reaches back into the previous piece; tokenizers' rstrip
    // can overlap a following match, and so does this.
    if (t.lstrip) start = std::max(whitespace_run_start(text, start), start_offset);
    if (t.rstrip) stop = whitespace_run_end(text, stop);
    if (start_offset < start) out->push_back(Piece{start_offset, start, -1});
    out->push_back(Piece{start, stop, t.id});
    start_offset = stop;
  }
  if (start_offset < text.size()) out->push_back(Piece{start_offset, text.size(), -1});
}

}  // namespace replayssm
