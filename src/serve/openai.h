// The OpenAI protocol: request bodies of /v1/completions and
// /v1/chat/completions checked and turned into engine requests, and the
// error body every 4xx carries.
//
// Checking is strict: a field of the wrong type, a number out of range, a
// parameter the server cannot honour (a non-zero presence_penalty, a
// logit_bias, a tool_choice that needs the output parsed) or an unknown
// field is a 400 naming it — never ignored in silence, so a client learns
// at once that it did not get what it asked for.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "io/tokenizer.h"
#include "replayssm/engine.h"

namespace replayssm::serve {

// Request bodies keep their keys' order: a tool's JSON schema reaches the chat
// template as the client wrote it, as it does in Python.
using Json = nlohmann::ordered_json;

// OpenAI's error: HTTP status, and the body's message, type, param, code.
struct ApiError {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;  // "" → null
  std::string code;   // "" → null
};
// The JSON error body; never throws (ill-formed UTF-8 in the message, which
// may quote the request's bytes, becomes U+FFFD).
std::string error_body(const ApiError& e);

// What the server allows a request (replayssm serve's limits).
struct Limits {
  int64_t max_tokens = 4096;          // new tokens a completion may ask for
  int64_t max_n = 16;                 // completions a request may ask for (n, best_of)
  int64_t max_beam = 16;              // beam width
  int64_t max_prompt_tokens = 32768;  // a prompt's tokens
  int64_t max_prompts = 64;           // prompts in one completions request
  int64_t max_stop = 16;              // stop strings
};

// The served model and what a request is checked against.
struct ApiContext {
  std::string model;  // the served name
  const Tokenizer* tokenizer = nullptr;
  int64_t vocab_size = 0;
  Limits limits;
};

// A request, checked: one engine request per prompt, and how to answer.
struct ApiRequest {
  bool chat = false;
  std::string model;
  std::vector<RequestParams> prompts;      // completions: one per prompt; chat: one
  std::vector<std::string> prompt_texts;   // each prompt's text (echo)
  std::vector<std::string> stop;           // stop strings, matched in the text
  int64_t n = 1;                           // choices per prompt
  bool stream = false, include_usage = false;
  bool echo = false;
  // Tokens a choice reports: max_tokens, which may be 0 with echo (the
  // engine still runs one, its unit of work; none of it is reported).
  int64_t max_tokens = 0;
  // completions: top log-probabilities per token (−1: no logprobs); chat:
  // logprobs true → top_logprobs (0..20) alternatives, −1 when false.
  int64_t logprobs = -1;
  bool search = false;                     // best_of or beam search: results at the end
};

// A request body's JSON. Every way the text can fail to be a JSON value
// (bad syntax, a number too large for a double) is a 400 naming the reason.
std::optional<ApiError> parse_body(const std::string& text, Json* out);

// POST /v1/completions. The prompt: a string, a list of strings, a list of
// token ids or a list of such lists.
std::optional<ApiError> parse_completion(const Json& body, const ApiContext& ctx, ApiRequest* out);

// POST /v1/chat/completions, with `prompt` the messages as the model's
// chat template rendered them (parse_chat_input first), `text` that
// rendering. Checks every other field.
std::optional<ApiError> parse_chat(const Json& body, const ApiContext& ctx, std::vector<int32_t> prompt,
                                   std::string text, ApiRequest* out);

// The fields of a chat body the template needs, checked: messages, tools,
// add_generation_prompt, chat_template_kwargs.
struct ChatInput {
  Json messages, tools;
  bool add_generation_prompt = true;
  Json template_kwargs = Json::object();
};
std::optional<ApiError> parse_chat_input(const Json& body, ChatInput* out);

}  // namespace replayssm::serve
