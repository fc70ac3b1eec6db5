// ChatTemplate: a model's chat template, found as transformers finds it,
// rendering a chat request's messages into the prompt text.
//
// The template is the file given (--chat-template), else tokenizer_config.json's
// `chat_template` (a string, or a list of named templates: "default"), else
// chat_template.jinja beside it. Rendering passes what transformers'
// apply_chat_template passes: messages, tools (when given),
// add_generation_prompt, the tokenizer's bos_token and eos_token, and the
// request's chat_template_kwargs at the top level.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "chat/template.h"
#include "replayssm/status.h"
#include "serve/openai.h"

namespace replayssm::serve {

class ChatTemplate {
 public:
  // `file` (may be empty) first, then the model directory's files.
  // nullopt: the model has none (chat requests are refused by name).
  static Result<std::optional<ChatTemplate>> load(const std::string& file, const std::string& model_dir);
  // From template text, for tests and presets.
  static Result<ChatTemplate> from_text(const std::string& text, const std::string& name,
                                        const std::string& bos = "", const std::string& eos = "");

  Result<std::string> render(const ChatInput& in) const;
  const std::string& source() const { return source_; }

 private:
  ChatTemplate(chat::Template t, std::string source, std::string bos, std::string eos)
      : t_(std::make_shared<chat::Template>(std::move(t))), source_(std::move(source)), bos_(std::move(bos)),
        eos_(std::move(eos)) {}
  std::shared_ptr<const chat::Template> t_;
  std::string source_, bos_, eos_;
};

// POST /v1/chat/completions as the server takes it: the template's fields
// checked (parse_chat_input), the messages rendered by `chat` and tokenized
// without added special tokens (the template writes its own), then every
// other field checked (parse_chat). A model without a template (`chat`
// null) or without a tokenizer (ctx.tokenizer null: a --preset model) is
// refused by name.
std::optional<ApiError> parse_chat_request(const Json& body, const ApiContext& ctx, const ChatTemplate* chat,
                                           ApiRequest* out);

}  // namespace replayssm::serve
