// `replayssm tokenize` / `detokenize`: the model's tokenizer.json from the
// command line. A tokenizer is named directly (--tokenizer FILE) or by its
// model directory (--model DIR, which must hold tokenizer.json).
#include <cstdio>
#include <filesystem>
#include <string>

#include "cli/commands.h"
#include "cli/common.h"
#include "io/tokenizer.h"

namespace replayssm::cli {

Result<Tokenizer> load_tokenizer(const std::string& file, const std::string& model_dir) {
  if (!file.empty() && !model_dir.empty()) return invalid_argument("give --tokenizer or --model, not both");
  if (file.empty() && model_dir.empty()) return invalid_argument("give --tokenizer FILE or --model DIR");
  if (!file.empty()) return Tokenizer::load(file);
  const std::string path = (std::filesystem::path(model_dir) / "tokenizer.json").string();
  if (!std::filesystem::exists(path)) return not_found(path + ": the model has no tokenizer.json");
  return Tokenizer::load(path);
}

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

namespace {

struct TextArgs {
  std::string tokenizer, model, text, ids;
  bool json = false, special = false;
};

Status run_tokenize(const TextArgs& a) {
  RSSM_ASSIGN_OR_RETURN(Tokenizer tok, load_tokenizer(a.tokenizer, a.model));
  RSSM_ASSIGN_OR_RETURN(std::vector<int32_t> ids, tok.encode(a.text, a.special));
  std::string out = a.json ? "{\"ids\": [" : "";
  for (size_t i = 0; i < ids.size(); ++i) out += (i ? (a.json ? ", " : " ") : "") + std::to_string(ids[i]);
  out += a.json ? "]}\n" : "\n";
  std::fwrite(out.data(), 1, out.size(), stdout);
  return {};
}

Status run_detokenize(const TextArgs& a) {
  RSSM_ASSIGN_OR_RETURN(Tokenizer tok, load_tokenizer(a.tokenizer, a.model));
  std::vector<int32_t> ids;
  if (!a.ids.empty()) {
    RSSM_ASSIGN_OR_RETURN(ids, parse_ids(a.ids, "--ids"));
  }
  RSSM_ASSIGN_OR_RETURN(std::string text, tok.decode(ids));
  const std::string out = a.json ? "{\"text\": " + json_string(text) + "}\n" : text + "\n";
  std::fwrite(out.data(), 1, out.size(), stdout);
  return {};
}

void add_source(CLI::App& app, TextArgs* a) {
  app.add_option("--tokenizer", a->tokenizer, "A tokenizer.json file");
  app.add_option("--model", a->model, "A model directory holding tokenizer.json");
  app.add_flag("--json", a->json, "Print one JSON object");
}

}  // namespace

Runner add_tokenize(CLI::App& app) {
  auto a = std::make_shared<TextArgs>();
  add_source(app, a.get());
  app.add_option("--text", a->text, "UTF-8 text to encode")->required();
  app.add_flag("--add-special-tokens", a->special,
               "Put the tokenizer's post-processor tokens around the ids (e.g. a BOS), as generate --prompt does");
  return [a] { return run_tokenize(*a); };
}

Runner add_detokenize(CLI::App& app) {
  auto a = std::make_shared<TextArgs>();
  add_source(app, a.get());
  app.add_option("--ids", a->ids, "Comma-separated token ids")->required();
  return [a] { return run_detokenize(*a); };
}

}  // namespace replayssm::cli
