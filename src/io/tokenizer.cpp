// Tokenizer: loading tokenizer.json and the encode/decode pipelines (see
// tokenizer.h). The stages live in their own files; this one wires them up
// and checks how they fit together (added-token ids against the vocab).
#include "io/tokenizer.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <memory>

#include "io/added_tokens.h"
#include "io/bpe.h"
#include "io/byte_level.h"
#include "io/normalizer.h"
#include "io/post_processor.h"
#include "io/pre_tokenizer.h"
#include "io/read_file.h"
#include "io/utf8.h"

namespace replayssm {

using json = nlohmann::json;

struct Tokenizer::Impl {
  Normalizer normalizer;
  PreTokenizer pre_tokenizer;
  BpeModel model;
  AddedVocabulary added;
  PostProcessor post;
  int64_t vocab_size = 0;
};

namespace {

std::string json_quoted(std::string_view s) { return json(std::string(s)).dump(); }

// The value of `key`, or null when absent: tokenizers treats both alike.
const json& field_or_null(const json& obj, const char* key) {
  static const json kNull;
  return obj.contains(key) ? obj[key] : kNull;
}

// Only the ByteLevel decoder is implemented; anything else would decode to
// different text.
Status check_decoder(const json& d, const std::string& path) {
  const std::string where = path + ": field 'decoder': ";
  if (d.is_object() && d.contains("type") && d["type"] == "ByteLevel") return {};
  if (d.is_object() && d.contains("type") && d["type"].is_string())
    return unsupported(where + "decoder type '" + d["type"].get<std::string>() +
                       "' is not supported (supported: ByteLevel)");
  return unsupported(where + d.dump().substr(0, 80) + " is not supported (supported: ByteLevel)");
}

}  // namespace

Result<Tokenizer> Tokenizer::load(const std::string& path) {
  RSSM_ASSIGN_OR_RETURN(const std::string text, read_whole_file(path));
  return from_text(text, path);
}

Result<Tokenizer> Tokenizer::from_text(const std::string& text, const std::string& path) {
  json root;
  try {
    root = json::parse(text);
  } catch (const json::exception& e) {  // parse_error, and out_of_range for a number like 1e400
    return corrupt(path + ": not valid JSON: " + e.what());
  }
  if (!root.is_object()) return corrupt(path + ": expected a JSON object at the top level");
  if (!root.contains("model")) return corrupt(path + ": field 'model': missing");

  auto impl = std::make_shared<Impl>();
  RSSM_ASSIGN_OR_RETURN(impl->normalizer, Normalizer::from_json(field_or_null(root, "normalizer"), path, "normalizer"));
  RSSM_ASSIGN_OR_RETURN(impl->pre_tokenizer,
                        PreTokenizer::from_json(field_or_null(root, "pre_tokenizer"), path, "pre_tokenizer"));
  RSSM_ASSIGN_OR_RETURN(impl->model, BpeModel::from_json(root["model"], path, "model"));
  RSSM_RETURN_IF_ERROR(check_decoder(field_or_null(root, "decoder"), path));
  const json* added = root.contains("added_tokens") ? &root["added_tokens"] : nullptr;
  RSSM_ASSIGN_OR_RETURN(impl->added, AddedVocabulary::from_json(added, path, "added_tokens", impl->normalizer));

  // An added token that is also a vocab entry keeps the vocab's id
  // (tokenizers reuses it); one that is not must not take a vocab token's id.
  int64_t max_id = impl->model.max_id();
  for (size_t i = 0; i < impl->added.tokens().size(); ++i) {
    const AddedToken& t = impl->added.tokens()[i];
    const std::string where = path + ": field 'added_tokens[" + std::to_string(i) + "]': ";
    if (auto vocab_id = impl->model.token_id(t.content)) {
      if (*vocab_id != t.id)
        return corrupt(where + json_quoted(t.content) + " has id " + std::to_string(t.id) + " but the vocab gives it " +
                       std::to_string(*vocab_id));
    } else if (const std::string* other = impl->model.token(t.id)) {
      return corrupt(where + json_quoted(t.content) + " has id " + std::to_string(t.id) +
                     ", which is the vocab's id of " + json_quoted(*other));
    }
    max_id = std::max<int64_t>(max_id, t.id);
  }
  impl->vocab_size = max_id + 1;
  RSSM_ASSIGN_OR_RETURN(impl->post,
                        PostProcessor::from_json(field_or_null(root, "post_processor"), path, "post_processor"));
  // Every id the post-processor adds must decode: an id in a hole of the
  // vocab would be encoded and then refused by decode.
  for (int32_t id : impl->post.apply({}))
    if (!impl->added.find_id(id) && !impl->model.token(id))
      return corrupt(path + ": field 'post_processor': special token id " + std::to_string(id) +
                     " is neither a vocab entry nor an added token (vocab_size " + std::to_string(impl->vocab_size) +
                     ")");
  return Tokenizer(std::move(impl));
}

Result<std::vector<int32_t>> Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  const size_t bad = utf8_first_invalid(text);
  if (bad != std::string_view::npos) {
    char hex[8];
    std::snprintf(hex, sizeof(hex), "0x%02X", static_cast<unsigned>(static_cast<uint8_t>(text[bad])));
    return invalid_argument("text to encode is not valid UTF-8: ill-formed sequence at byte offset " +
                            std::to_string(bad) + " (byte " + hex + ")");
  }
  const Impl& m = *impl_;
  std::vector<int32_t> ids;
  std::vector<AddedVocabulary::Piece> raw_pieces, norm_pieces;
  std::vector<std::string> pre_tokens;
  m.added.split(text, /*normalized=*/false, &raw_pieces);
  for (const auto& raw : raw_pieces) {
    if (raw.id >= 0) {
      ids.push_back(raw.id);
      continue;
    }
    const std::string normalized = m.normalizer.normalize(text.substr(raw.begin, raw.end - raw.begin));
    norm_pieces.clear();
    m.added.split(normalized, /*normalized=*/true, &norm_pieces);
    for (const auto& piece : norm_pieces) {
      if (piece.id >= 0) {
        ids.push_back(piece.id);
        continue;
      }
      pre_tokens.clear();
      RSSM_RETURN_IF_ERROR(m.pre_tokenizer.split(
          std::string_view(normalized).substr(piece.begin, piece.end - piece.begin), &pre_tokens));
      for (const std::string& word : pre_tokens) m.model.tokenize(word, &ids);
    }
  }
  return add_special_tokens ? impl_->post.apply(ids) : ids;
}

Result<std::string> Tokenizer::decode(std::span<const int32_t> ids) const {
  RSSM_ASSIGN_OR_RETURN(std::string bytes, decode_bytes(ids));
  return utf8_lossy(bytes);
}

Result<std::string> Tokenizer::decode_bytes(std::span<const int32_t> ids) const {
  const Impl& m = *impl_;
  std::string bytes;
  for (size_t i = 0; i < ids.size(); ++i) {
    const int32_t id = ids[i];
    const AddedToken* added = m.added.find_id(id);
    const std::string* token = added ? &added->content : m.model.token(id);
    if (!token)
      return invalid_argument("token id " + std::to_string(id) + " (position " + std::to_string(i) +
                              ") is neither a vocab entry nor an added token (vocab_size " +
                              std::to_string(m.vocab_size) + ")");
    byte_level_decode_token(*token, &bytes);
  }
  return bytes;
}

int64_t Tokenizer::vocab_size() const { return impl_->vocab_size; }

std::optional<int32_t> Tokenizer::token_id(std::string_view token) const {
  if (const AddedToken* t = impl_->added.find_content(token)) return t->id;
  return impl_->model.token_id(token);
}

std::optional<int32_t> Tokenizer::eos_id() const {
  if (const AddedToken* t = impl_->added.find_content("<|endoftext|>")) return t->id;
  return std::nullopt;
}

}  // namespace replayssm
