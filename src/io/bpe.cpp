// BPE model (see bpe.h).
#include "io/bpe.h"

#include <cstdio>
#include <queue>

#include "io/utf8.h"

namespace replayssm {

namespace {

Status bad(const std::string& file, const std::string& field, const std::string& what) {
  return corrupt(file + ": field '" + field + "': " + what);
}

std::string json_quoted(std::string_view s) { return nlohmann::json(std::string(s)).dump(); }

// Reads an optional string option; null and absent mean "".
Status string_option(const nlohmann::json& j, const char* key, const std::string& file,
                     const std::string& field, std::string* out) {
  out->clear();
  if (!j.contains(key) || j[key].is_null()) return {};
  if (!j[key].is_string()) return bad(file, field + "." + key, "expected a string or null, got " + j[key].dump());
  *out = j[key].get<std::string>();
  return {};
}

Status bool_option(const nlohmann::json& j, const char* key, const std::string& file,
                   const std::string& field, bool* out) {
  *out = false;
  if (!j.contains(key) || j[key].is_null()) return {};
  if (!j[key].is_boolean()) return bad(file, field + "." + key, "expected true/false, got " + j[key].dump());
  *out = j[key].get<bool>();
  return {};
}

// One symbol of the word being merged, in a doubly linked list over an array
// (tokenizers' Symbol): a merge grows the left symbol and empties the right.
struct Symbol {
  int32_t id;
  int64_t prev, next;  // indices, -1 at either end
  size_t len;          // bytes covered; 0 once merged into its left neighbour
};

// A candidate merge of symbols[pos] with its right neighbour.
struct Candidate {
  size_t pos;
  uint32_t rank;
  int32_t new_id;
};

// std::priority_queue pops the largest: make "largest" the lowest rank, then
// the leftmost position, as tokenizers' Merge ordering does.
struct LaterFirst {
  bool operator()(const Candidate& a, const Candidate& b) const {
    if (a.rank != b.rank) return a.rank > b.rank;
    return a.pos > b.pos;
  }
};

}  // namespace

Result<BpeModel> BpeModel::from_json(const nlohmann::json& j, const std::string& file,
                                     const std::string& field) {
  if (!j.is_object()) return bad(file, field, "expected an object, got " + j.dump());
  if (j.contains("type") && !j["type"].is_null()) {
    if (!j["type"].is_string() || j["type"].get<std::string>() != "BPE")
      return unsupported(file + ": field '" + field + ".type': model type " + j["type"].dump() +
                         " is not supported (supported: BPE)");
  }
  BpeModel m;

  // Vocabulary: token -> id, ids unique and dense enough for a table.
  if (!j.contains("vocab") || !j["vocab"].is_object())
    return bad(file, field + ".vocab", "missing or not an object");
  const nlohmann::json& vocab = j["vocab"];
  m.vocab_.reserve(vocab.size());
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    const nlohmann::json& v = it.value();
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > kMaxId)
      return bad(file, field + ".vocab", "token " + json_quoted(it.key()) + " has id " + v.dump() +
                                             ", expected an integer in [0, " + std::to_string(kMaxId) + "]");
    const auto id = static_cast<int32_t>(v.get<int64_t>());
    if (static_cast<size_t>(id) >= m.id_to_token_.size()) {
      m.id_to_token_.resize(static_cast<size_t>(id) + 1);
      m.has_id_.resize(static_cast<size_t>(id) + 1, 0);
    }
    if (m.has_id_[id])
      return bad(file, field + ".vocab", "tokens " + json_quoted(m.id_to_token_[id]) + " and " + json_quoted(it.key()) +
                                             " share id " + std::to_string(id));
    m.has_id_[id] = 1;
    m.id_to_token_[id] = it.key();
    m.vocab_.emplace(it.key(), id);
  }

  // Options.
  if (j.contains("dropout") && !j["dropout"].is_null()) {
    if (!j["dropout"].is_number() || j["dropout"].get<double>() < 0 || j["dropout"].get<double>() > 1)
      return bad(file, field + ".dropout", "expected null or a number in [0, 1], got " + j["dropout"].dump());
    if (j["dropout"].get<double>() > 0)
      return unsupported(file + ": field '" + field + ".dropout': " + j["dropout"].dump() +
                         " makes tokenization random; only null or 0 is supported");
  }
  std::string unk;
  RSSM_RETURN_IF_ERROR(string_option(j, "unk_token", file, field, &unk));
  if (j.contains("unk_token") && j["unk_token"].is_string()) {
    auto id = m.token_id(unk);
    if (!id) return bad(file, field + ".unk_token", json_quoted(unk) + " is not in the vocab");
    m.unk_id_ = *id;
  }
  RSSM_RETURN_IF_ERROR(bool_option(j, "fuse_unk", file, field, &m.fuse_unk_));
  RSSM_RETURN_IF_ERROR(bool_option(j, "byte_fallback", file, field, &m.byte_fallback_));
  RSSM_RETURN_IF_ERROR(bool_option(j, "ignore_merges", file, field, &m.ignore_merges_));
  RSSM_RETURN_IF_ERROR(string_option(j, "continuing_subword_prefix", file, field, &m.continuing_subword_prefix_));
  RSSM_RETURN_IF_ERROR(string_option(j, "end_of_word_suffix", file, field, &m.end_of_word_suffix_));

  // Merges: "a b" strings or ["a", "b"] pairs; rank = position, not counting
  // "#version" header lines (tokenizers' convert_merges_to_hashmap).
  if (!j.contains("merges") || !j["merges"].is_array())
    return bad(file, field + ".merges", "missing or not an array");
  const nlohmann::json& merges = j["merges"];
  m.merges_.reserve(merges.size());
  uint32_t rank = 0;
  for (size_t i = 0; i < merges.size(); ++i) {
    const nlohmann::json& e = merges[i];
    const std::string where = field + ".merges[" + std::to_string(i) + "]";
    std::string a, b;
    if (e.is_string()) {
      const std::string s = e.get<std::string>();
      if (s.rfind("#version", 0) == 0) continue;
      const size_t sp = s.find(' ');
      if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos)
        return bad(file, where, json_quoted(s) + " is not two tokens separated by one space");
      a = s.substr(0, sp);
      b = s.substr(sp + 1);
    } else if (e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string()) {
      a = e[0].get<std::string>();
      b = e[1].get<std::string>();
    } else {
      return bad(file, where, "expected \"a b\" or [\"a\", \"b\"], got " + e.dump());
    }
    const auto a_id = m.token_id(a), b_id = m.token_id(b);
    if (!a_id) return bad(file, where, "left part " + json_quoted(a) + " is not in the vocab");
    if (!b_id) return bad(file, where, "right part " + json_quoted(b) + " is not in the vocab");
    // The right part's continuing_subword_prefix is cut by length, unchecked,
    // as tokenizers does.
    const size_t cut = m.continuing_subword_prefix_.size();
    if (b.size() < cut)
      return bad(file, where, "right part " + json_quoted(b) + " is shorter than the continuing_subword_prefix");
    const std::string merged = a + b.substr(cut);
    const auto new_id = m.token_id(merged);
    if (!new_id) return bad(file, where, "result " + json_quoted(merged) + " is not in the vocab");
    // A repeated pair takes its last rank: tokenizers collects into a map.
    m.merges_[pair_key(*a_id, *b_id)] = MergeInfo{rank, *new_id};
    ++rank;
  }
  return m;
}

std::optional<int32_t> BpeModel::token_id(std::string_view token) const {
  auto it = vocab_.find(token);
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

const std::string* BpeModel::token(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= id_to_token_.size() || !has_id_[id]) return nullptr;
  return &id_to_token_[id];
}

const BpeModel::MergeInfo* BpeModel::find_merge(int32_t a, int32_t b) const {
  auto it = merges_.find(pair_key(a, b));
  return it == merges_.end() ? nullptr : &it->second;
}

void BpeModel::tokenize(std::string_view word, std::vector<int32_t>* ids) const {
  if (word.empty()) return;
  if (ignore_merges_) {
    if (auto id = token_id(word)) {
      ids->push_back(*id);
      return;
    }
  }

  // Initial symbols: one per character (BPE::merge_word).
  std::vector<Symbol> symbols;
  symbols.reserve(word.size());
  auto add = [&symbols](int32_t id, size_t len) {
    const auto n = static_cast<int64_t>(symbols.size());
    if (n > 0) symbols.back().next = n;
    symbols.push_back(Symbol{id, n - 1, -1, len});
  };
  // An unknown-character run not yet added (fuse_unk grows it).
  bool unk_pending = false;
  size_t unk_len = 0;
  auto flush_unk = [&] {
    if (unk_pending) add(*unk_id_, unk_len);
    unk_pending = false;
  };
  std::string s;
  for (size_t i = 0; i < word.size();) {
    const size_t n = utf8_char_len(word, i);
    s.assign(word.substr(i, n));
    if (i > 0) s.insert(0, continuing_subword_prefix_);
    if (i + n == word.size()) s += end_of_word_suffix_;
    i += n;
    if (auto id = token_id(s)) {
      flush_unk();
      add(*id, n);
      continue;
    }
    if (byte_fallback_) {
      std::vector<int32_t> bytes;
      for (unsigned char c : s) {
        char name[8];
        std::snprintf(name, sizeof(name), "<0x%02X>", c);
        auto id = token_id(name);
        if (!id) break;
        bytes.push_back(*id);
      }
      if (bytes.size() == s.size()) {
        for (int32_t id : bytes) add(id, 1);
        continue;
      }
    }
    if (!unk_id_) continue;  // no unk token: the character is dropped
    if (unk_pending && fuse_unk_) {
      unk_len += n;
    } else {
      flush_unk();
      unk_pending = true;
      unk_len = n;
    }
  }
  flush_unk();

  // Word::merge_all.
  std::priority_queue<Candidate, std::vector<Candidate>, LaterFirst> queue;
  for (size_t k = 0; k + 1 < symbols.size(); ++k)
    if (const MergeInfo* mi = find_merge(symbols[k].id, symbols[k + 1].id))
      queue.push(Candidate{k, mi->rank, mi->new_id});
  while (!queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    Symbol& left = symbols[top.pos];
    if (left.len == 0 || left.next == -1) continue;
    const auto next_pos = static_cast<size_t>(left.next);
    const Symbol right = symbols[next_pos];
    // Stale entry: the pair at this position changed since it was queued.
    const MergeInfo* now = find_merge(left.id, right.id);
    if (!now || now->new_id != top.new_id) continue;

    left.id = top.new_id;
    left.len += right.len;
    left.next = right.next;
    symbols[next_pos].len = 0;
    if (right.next > -1 && static_cast<size_t>(right.next) < symbols.size())
      symbols[static_cast<size_t>(right.next)].prev = static_cast<int64_t>(top.pos);

    const Symbol& cur = symbols[top.pos];
    if (cur.prev >= 0) {
      const auto prev = static_cast<size_t>(cur.prev);
      if (const MergeInfo* mi = find_merge(symbols[prev].id, cur.id))
        queue.push(Candidate{prev, mi->rank, mi->new_id});
    }
    if (cur.next >= 0 && static_cast<size_t>(cur.next) < symbols.size()) {
      if (const MergeInfo* mi = find_merge(cur.id, symbols[static_cast<size_t>(cur.next)].id))
        queue.push(Candidate{top.pos, mi->rank, mi->new_id});
    }
  }
  for (const Symbol& sym : symbols)
    if (sym.len != 0) ids->push_back(sym.id);
}

}  // namespace replayssm
