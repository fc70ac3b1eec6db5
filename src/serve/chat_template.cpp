// ChatTemplate (see chat_template.h).
#include "serve/chat_template.h"

#include <filesystem>

#include "io/read_file.h"

namespace replayssm::serve {

using json = nlohmann::ordered_json;

namespace {

// A special token in tokenizer_config.json: a string or {"content": ...}.
std::string token_text(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
  return "";
}

}  // namespace

Result<ChatTemplate> ChatTemplate::from_text(const std::string& text, const std::string& name, const std::string& bos,
                                             const std::string& eos) {
  RSSM_ASSIGN_OR_RETURN(chat::Template t, chat::Template::parse(text, name));
  return ChatTemplate(std::move(t), text, bos, eos);
}

Result<std::optional<ChatTemplate>> ChatTemplate::load(const std::string& file, const std::string& model_dir) {
  namespace fs = std::filesystem;
  std::string bos, eos, text, name;
  const std::string config = model_dir.empty() ? "" : model_dir + "/tokenizer_config.json";
  if (!config.empty() && fs::exists(config)) {
    RSSM_ASSIGN_OR_RETURN(const std::string raw, read_whole_file(config));
    json tc;
    try {
      tc = json::parse(raw);
    } catch (const json::exception& e) {  // parse_error, and out_of_range for a number like 1e400
      return corrupt(config + ": not JSON: " + e.what());
    }
    if (!tc.is_object()) return corrupt(config + ": not a JSON object");
    if (tc.contains("bos_token")) bos = token_text(tc["bos_token"]);
    if (tc.contains("eos_token")) eos = token_text(tc["eos_token"]);
    if (file.empty() && tc.contains("chat_template") && !tc["chat_template"].is_null()) {
      const json& ct = tc["chat_template"];
      name = config + ": chat_template";
      if (ct.is_string()) {
        text = ct.get<std::string>();
      } else if (ct.is_array()) {
        for (const json& t : ct)
          if (t.is_object() && t.value("name", "") == "default" && t.contains("template") && t["template"].is_string())
            text = t["template"].get<std::string>();
        if (text.empty()) return corrupt(config + ": field 'chat_template': a list without a \"default\" template");
      } else {
        return corrupt(config + ": field 'chat_template' must be a string or a list of named templates");
      }
    }
  }
  if (!file.empty()) {
    RSSM_ASSIGN_OR_RETURN(text, read_whole_file(file));
    name = file;
  } else if (text.empty() && !model_dir.empty() && fs::exists(model_dir + "/chat_template.jinja")) {
    name = model_dir + "/chat_template.jinja";
    RSSM_ASSIGN_OR_RETURN(text, read_whole_file(name));
  }
  if (text.empty()) return std::optional<ChatTemplate>();
  RSSM_ASSIGN_OR_RETURN(ChatTemplate t, from_text(text, name, bos, eos));
  return std::optional<ChatTemplate>(std::move(t));
}

Result<std::string> ChatTemplate::render(const ChatInput& in) const {
  json ctx = in.template_kwargs.is_object() ? in.template_kwargs : json::object();
  ctx["messages"] = in.messages;
  if (!in.tools.is_null()) ctx["tools"] = in.tools;
  if (!ctx.contains("add_generation_prompt")) ctx["add_generation_prompt"] = in.add_generation_prompt;
  ctx["bos_token"] = bos_;
  ctx["eos_token"] = eos_;
  return t_->render(ctx);
}

std::optional<ApiError> parse_chat_request(const Json& body, const ApiContext& ctx, const ChatTemplate* chat,
                                           ApiRequest* out) {
  ChatInput in;
  if (auto e = parse_chat_input(body, &in)) return e;
  if (ctx.tokenizer == nullptr)
    return ApiError{400, "this server has no tokenizer (a --preset model): use /v1/completions with token ids",
                    "invalid_request_error", "messages", ""};
  if (chat == nullptr)
    return ApiError{400, "this model has no chat template (give one with --chat-template, or use /v1/completions)",
                    "invalid_request_error", "messages", ""};
  auto text = chat->render(in);
  if (!text.ok())
    return ApiError{400, "the chat template: " + text.status().message(), "invalid_request_error", "messages", ""};
  auto ids = ctx.tokenizer->encode(*text, /*add_special_tokens=*/false);
  if (!ids.ok()) return ApiError{400, ids.status().message(), "invalid_request_error", "messages", ""};
  return parse_chat(body, ctx, std::move(*ids), std::move(*text), out);
}

}  // namespace replayssm::serve
