// The OpenAI request bodies (see openai.h).
#include "serve/openai.h"

#include <cmath>
#include <random>
#include <set>

namespace replayssm::serve {

using json = nlohmann::ordered_json;

std::string error_body(const ApiError& e) {
  json err = {{"message", e.message},
              {"type", e.type},
              {"param", e.param.empty() ? json(nullptr) : json(e.param)},
              {"code", e.code.empty() ? json(nullptr) : json(e.code)}};
  // A message may quote the body's bytes (a parse error does): ill-formed
  // UTF-8 becomes U+FFFD rather than an exception while answering.
  return json({{"error", err}}).dump(-1, ' ', false, json::error_handler_t::replace);
}

namespace {

ApiError bad(const std::string& param, const std::string& message) { return {400, message, "invalid_request_error", param, ""}; }

// Typed reads of optional fields: absent or null leaves *out unchanged.
std::optional<ApiError> read_bool(const json& b, const char* f, bool* out) {
  if (!b.contains(f) || b[f].is_null()) return std::nullopt;
  if (!b[f].is_boolean()) return bad(f, std::string("'") + f + "' must be a boolean");
  *out = b[f].get<bool>();
  return std::nullopt;
}

std::optional<ApiError> read_int(const json& b, const char* f, int64_t lo, int64_t hi, int64_t* out) {
  if (!b.contains(f) || b[f].is_null()) return std::nullopt;
  const json& v = b[f];
  // JSON numbers like 4.0 are integers to Python's clients too.
  if (!v.is_number() || (v.is_number_float() && (!std::isfinite(v.get<double>()) ||
                                                  v.get<double>() != std::floor(v.get<double>()))))
    return bad(f, std::string("'") + f + "' must be an integer");
  // The parser keeps non-negative integers unsigned, so each form is brought
  // to int64_t only where it fits, then compared: a float at or past 2^63
  // does not convert, an unsigned past INT64_MAX does not either.
  std::optional<int64_t> x;
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (d >= -0x1p63 && d < 0x1p63) x = static_cast<int64_t>(d);
  } else if (v.is_number_unsigned()) {
    if (v.get<uint64_t>() <= static_cast<uint64_t>(INT64_MAX)) x = static_cast<int64_t>(v.get<uint64_t>());
  } else {
    x = v.get<int64_t>();
  }
  if (!x || *x < lo || *x > hi)
    return bad(f, std::string("'") + f + "' must be in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                      "], got " + v.dump());
  *out = *x;
  return std::nullopt;
}

std::optional<ApiError> read_number(const json& b, const char* f, double lo, double hi, bool lo_open, double* out) {
  if (!b.contains(f) || b[f].is_null()) return std::nullopt;
  if (!b[f].is_number()) return bad(f, std::string("'") + f + "' must be a number");
  const double v = b[f].get<double>();
  if (!std::isfinite(v) || (lo_open ? v <= lo : v < lo) || v > hi) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "'%s' must be in %s%g, %g], got %s", f, lo_open ? "(" : "[", lo, hi,
                  b[f].dump().c_str());
    return bad(f, buf);
  }
  *out = v;
  return std::nullopt;
}

// A parameter the server cannot honour unless it has its neutral value.
std::optional<ApiError> only_neutral(const json& b, const char* f, const json& neutral, const std::string& why) {
  if (!b.contains(f) || b[f].is_null() || b[f] == neutral) return std::nullopt;
  return bad(f, std::string("'") + f + "' = " + b[f].dump() + " is not supported: " + why);
}

std::optional<ApiError> unknown_fields(const json& b, const std::set<std::string>& known) {
  for (const auto& [k, v] : b.items())
    if (!known.count(k)) return bad(k, "unknown field '" + k + "'");
  return std::nullopt;
}

std::optional<ApiError> read_stop(const json& b, const Limits& lim, std::vector<std::string>* out) {
  if (!b.contains("stop") || b["stop"].is_null()) return std::nullopt;
  const json& s = b["stop"];
  if (s.is_string()) {
    out->push_back(s.get<std::string>());
    return std::nullopt;
  }
  if (!s.is_array()) return bad("stop", "'stop' must be a string or a list of strings");
  if (static_cast<int64_t>(s.size()) > lim.max_stop)
    return bad("stop", "'stop' has " + std::to_string(s.size()) + " strings; at most " + std::to_string(lim.max_stop));
  for (const json& x : s) {
    if (!x.is_string()) return bad("stop", "'stop' must be a string or a list of strings");
    out->push_back(x.get<std::string>());
  }
  return std::nullopt;
}

// What completions and chat share: model, sampling, n, best_of, beams,
// stop, stream, limits; *max_tokens is read by the caller (its names differ).
std::optional<ApiError> read_common(const json& b, const ApiContext& ctx, ApiRequest* out, RequestParams* p) {
  if (!b.is_object()) return bad("", "the request body must be a JSON object");
  if (b.contains("model") && !b["model"].is_null()) {
    if (!b["model"].is_string()) return bad("model", "'model' must be a string");
    out->model = b["model"].get<std::string>();
    if (out->model != ctx.model)
      return ApiError{404, "The model `" + out->model + "` does not exist.", "invalid_request_error", "model",
                      "model_not_found"};
  } else {
    out->model = ctx.model;
  }
  // The prefix cache's partition: vLLM's cache_salt (the server adds the
  // caller's key), so requests share cached prompts only by agreement.
  if (b.contains("cache_salt") && !b["cache_salt"].is_null()) {
    if (!b["cache_salt"].is_string() || b["cache_salt"].get<std::string>().empty())
      return bad("cache_salt", "'cache_salt' must be a non-empty string");
    if (b["cache_salt"].get<std::string>().size() > 256) return bad("cache_salt", "'cache_salt' is over 256 bytes");
    p->cache_key = b["cache_salt"].get<std::string>();
  }
  double temperature = 1.0, top_p = 1.0, length_penalty = 1.0;
  if (auto e = read_number(b, "temperature", 0.0, 2.0, false, &temperature)) return e;
  if (auto e = read_number(b, "top_p", 0.0, 1.0, true, &top_p)) return e;
  p->sampling.temperature = static_cast<float>(temperature);
  p->sampling.top_p = static_cast<float>(top_p);
  int64_t seed = 0;
  if (b.contains("seed") && !b["seed"].is_null()) {
    if (auto e = read_int(b, "seed", INT64_MIN, INT64_MAX, &seed)) return e;
    p->sampling.seed = static_cast<uint64_t>(seed);
  } else {
    // No seed: a fresh draw every request, as OpenAI's.
    static thread_local std::mt19937_64 rng(std::random_device{}());
    p->sampling.seed = rng();
  }
  if (auto e = read_int(b, "n", 1, ctx.limits.max_n, &out->n)) return e;
  p->n = out->n;
  int64_t best_of = 0;
  if (auto e = read_int(b, "best_of", 1, ctx.limits.max_n, &best_of)) return e;
  if (best_of != 0 && best_of < out->n)
    return bad("best_of", "'best_of' (" + std::to_string(best_of) + ") must be at least 'n' (" +
                              std::to_string(out->n) + ")");
  bool beam = false, ignore_eos = false;
  if (auto e = read_bool(b, "use_beam_search", &beam)) return e;
  if (auto e = read_bool(b, "ignore_eos", &ignore_eos)) return e;
  if (auto e = read_number(b, "length_penalty", -100.0, 100.0, false, &length_penalty)) return e;
  p->stop_at_eos = !ignore_eos;
  if (beam) {
    p->beam_width = std::max(out->n, best_of);
    if (p->beam_width > ctx.limits.max_beam)
      return bad("n", "a beam search of width " + std::to_string(p->beam_width) + " is over the server's limit " +
                          std::to_string(ctx.limits.max_beam));
    if (p->beam_width > ctx.vocab_size) return bad("n", "more beams than the vocabulary has tokens");
    p->length_penalty = length_penalty;
  } else if (best_of > out->n) {
    p->best_of = best_of;
  }
  out->search = p->beam_width > 0 || p->best_of > p->n;
  if (auto e = read_bool(b, "stream", &out->stream)) return e;
  if (b.contains("stream_options") && !b["stream_options"].is_null()) {
    const json& so = b["stream_options"];
    if (!out->stream) return bad("stream_options", "'stream_options' is only allowed with 'stream': true");
    if (!so.is_object()) return bad("stream_options", "'stream_options' must be an object");
    for (const auto& [k, v] : so.items())
      if (k != "include_usage" && k != "continuous_usage_stats" && k != "include_obfuscation")
        return bad("stream_options", "unknown field 'stream_options." + k + "'");
    if (auto e = read_bool(so, "include_usage", &out->include_usage)) return e;
    // Obfuscation pads events against length side channels on shared
    // networks; events here go unpadded, which the client may ask for.
    bool obfuscate = false;
    if (auto e = read_bool(so, "include_obfuscation", &obfuscate)) return e;
    if (obfuscate)
      return bad("stream_options", "'stream_options.include_obfuscation': true is not supported (events are not padded)");
    bool continuous = false;
    if (auto e = read_bool(so, "continuous_usage_stats", &continuous)) return e;
    if (continuous)
      return bad("stream_options", "'stream_options.continuous_usage_stats' is not supported");
  }
  if (out->stream && out->search)
    return bad(beam ? "use_beam_search" : "best_of",
               std::string(beam ? "beam search" : "'best_of' > 'n'") +
                   " cannot stream: its completions are known only at the end");
  if (auto e = read_stop(b, ctx.limits, &out->stop)) return e;
  if (!out->stop.empty() && ctx.tokenizer == nullptr)
    return bad("stop", "stop strings are matched in the text, and this server has no tokenizer (a --preset model)");
  if (auto e = only_neutral(b, "presence_penalty", 0, "the sampler applies no penalties")) return e;
  if (auto e = only_neutral(b, "frequency_penalty", 0, "the sampler applies no penalties")) return e;
  if (auto e = only_neutral(b, "repetition_penalty", 1, "the sampler applies no penalties")) return e;
  if (auto e = only_neutral(b, "logit_bias", json::object(), "the sampler applies no logit bias")) return e;
  if (auto e = only_neutral(b, "top_k", -1, "the sampler has top_p only")) return e;
  if (auto e = only_neutral(b, "min_tokens", 0, "a completion may end at any token")) return e;
  // Identifiers for the caller's own bookkeeping: checked, not used.
  for (const char* f : {"user", "safety_identifier", "prompt_cache_key"})
    if (b.contains(f) && !b[f].is_null() && !b[f].is_string()) return bad(f, std::string("'") + f + "' must be a string");
  return std::nullopt;
}

// Chat fields of the OpenAI platform that change nothing here when left at
// their neutral values: refused by name otherwise.
std::optional<ApiError> read_platform_fields(const json& b) {
  if (b.contains("store") && !b["store"].is_null() && b["store"] != false)
    return bad("store", "'store': true is not supported (completions are not stored)");
  if (b.contains("metadata") && !b["metadata"].is_null() && !b["metadata"].is_object())
    return bad("metadata", "'metadata' must be an object");
  if (b.contains("service_tier") && !b["service_tier"].is_null() && b["service_tier"] != "auto" &&
      b["service_tier"] != "default")
    return bad("service_tier", "'service_tier' = " + b["service_tier"].dump() +
                                   " is not offered (one tier: 'auto' or 'default')");
  if (b.contains("reasoning_effort") && !b["reasoning_effort"].is_null())
    return bad("reasoning_effort",
               "'reasoning_effort' is not supported; a template's own switch goes in 'chat_template_kwargs' "
               "(e.g. {\"enable_thinking\": false})");
  return std::nullopt;
}

std::optional<ApiError> read_prompt_ids(const json& ids, const ApiContext& ctx, std::vector<int32_t>* out) {
  for (const json& t : ids) {
    if (!t.is_number_integer()) return bad("prompt", "a token-id prompt must hold integers");
    const int64_t id = t.get<int64_t>();
    if (id < 0 || id >= ctx.vocab_size)
      return bad("prompt", "token id " + std::to_string(id) + " is out of range [0, " + std::to_string(ctx.vocab_size) +
                               ")");
    out->push_back(static_cast<int32_t>(id));
  }
  return std::nullopt;
}

std::optional<ApiError> check_prompt_length(const std::vector<int32_t>& p, const ApiContext& ctx) {
  if (p.empty()) return bad("prompt", "the prompt has no tokens");
  if (static_cast<int64_t>(p.size()) > ctx.limits.max_prompt_tokens)
    return bad("prompt", "the prompt has " + std::to_string(p.size()) + " tokens; the server's limit is " +
                             std::to_string(ctx.limits.max_prompt_tokens));
  return std::nullopt;
}

}  // namespace

std::optional<ApiError> parse_body(const std::string& text, json* out) {
  try {
    *out = json::parse(text);
  } catch (const json::exception& e) {  // parse_error, and out_of_range for 1e400
    return ApiError{400, std::string("the body is not JSON: ") + e.what(), "invalid_request_error", "", ""};
  }
  return std::nullopt;
}

std::optional<ApiError> parse_completion(const json& b, const ApiContext& ctx, ApiRequest* out) {
  *out = ApiRequest{};
  RequestParams p;
  if (auto e = read_common(b, ctx, out, &p)) return e;
  if (auto e = unknown_fields(b, {"model", "prompt", "max_tokens", "temperature", "top_p", "n", "stream",
                                  "stream_options", "logprobs", "echo", "stop", "presence_penalty",
                                  "frequency_penalty", "repetition_penalty", "best_of", "logit_bias", "user", "seed",
                                  "suffix", "use_beam_search", "length_penalty", "ignore_eos", "top_k",
                                  "min_tokens", "cache_salt", "prompt_cache_key", "safety_identifier"}))
    return e;
  if (auto e = only_neutral(b, "suffix", "", "insertion is not supported")) return e;
  int64_t max_tokens = 16;  // OpenAI's default for completions
  if (auto e = read_int(b, "max_tokens", 0, ctx.limits.max_tokens, &max_tokens)) return e;
  if (auto e = read_bool(b, "echo", &out->echo)) return e;
  if (max_tokens == 0 && !out->echo)
    return bad("max_tokens", "'max_tokens' must be at least 1 (0 only with 'echo', to score the prompt)");
  int64_t logprobs = -1;
  if (auto e = read_int(b, "logprobs", 0, kMaxTopLogprobs, &logprobs)) return e;
  out->logprobs = logprobs;
  // One new token at least runs (the engine's unit of work); with
  // max_tokens 0 the server reports none of it.
  p.max_new_tokens = std::max<int64_t>(max_tokens, 1);
  out->max_tokens = max_tokens;
  p.top_logprobs = std::max<int64_t>(logprobs, 0);
  if (out->echo && logprobs >= 0) p.prompt_logprobs = logprobs;
  if (!b.contains("prompt") || b["prompt"].is_null()) return bad("prompt", "'prompt' is required");
  const json& pr = b["prompt"];
  std::vector<std::vector<int32_t>> prompts;
  if (pr.is_string()) {
    prompts.push_back({});
    out->prompt_texts.push_back(pr.get<std::string>());
  } else if (pr.is_array() && !pr.empty() && pr[0].is_number()) {
    prompts.push_back({});
    if (auto e = read_prompt_ids(pr, ctx, &prompts.back())) return e;
    out->prompt_texts.push_back("");
  } else if (pr.is_array() && !pr.empty()) {
    if (static_cast<int64_t>(pr.size()) > ctx.limits.max_prompts)
      return bad("prompt", "'prompt' holds " + std::to_string(pr.size()) + " prompts; at most " +
                               std::to_string(ctx.limits.max_prompts));
    for (const json& x : pr) {
      prompts.push_back({});
      if (x.is_string()) {
        out->prompt_texts.push_back(x.get<std::string>());
      } else if (x.is_array()) {
        if (auto e = read_prompt_ids(x, ctx, &prompts.back())) return e;
        out->prompt_texts.push_back("");
      } else {
        return bad("prompt", "'prompt' must be a string, a list of strings, a list of token ids or a list of such lists");
      }
    }
  } else {
    return bad("prompt", "'prompt' must be a string, a list of strings, a list of token ids or a list of such lists");
  }
  for (size_t i = 0; i < prompts.size(); ++i) {
    if (ctx.tokenizer == nullptr) {
      if (prompts[i].empty())
        return bad("prompt", "this server has no tokenizer (a --preset model): send the prompt as token ids");
    } else if (prompts[i].empty()) {
      // Text: as transformers' tokenizer(prompt), its special tokens included.
      auto ids = ctx.tokenizer->encode(out->prompt_texts[i], /*add_special_tokens=*/true);
      if (!ids.ok()) return bad("prompt", ids.status().message());
      prompts[i] = std::move(*ids);
    } else {
      auto text = ctx.tokenizer->decode(prompts[i]);
      if (!text.ok()) return bad("prompt", text.status().message());
      out->prompt_texts[i] = std::move(*text);
    }
    if (auto e = check_prompt_length(prompts[i], ctx)) return e;
    RequestParams one = p;
    one.prompt = std::move(prompts[i]);
    out->prompts.push_back(std::move(one));
  }
  return std::nullopt;
}

std::optional<ApiError> parse_chat_input(const json& b, ChatInput* out) {
  *out = ChatInput{};
  if (!b.is_object()) return bad("", "the request body must be a JSON object");
  if (!b.contains("messages") || !b["messages"].is_array() || b["messages"].empty())
    return bad("messages", "'messages' must be a non-empty list");
  for (const json& m : b["messages"]) {
    if (!m.is_object()) return bad("messages", "each message must be an object");
    if (!m.contains("role") || !m["role"].is_string()) return bad("messages", "each message needs a string 'role'");
    const std::string role = m["role"].get<std::string>();
    if (role != "system" && role != "user" && role != "assistant" && role != "tool" && role != "developer")
      return bad("messages", "unknown message role '" + role + "'");
    if (m.contains("content") && !m["content"].is_null() && !m["content"].is_string()) {
      if (!m["content"].is_array()) return bad("messages", "a message's 'content' must be a string or a list of parts");
      for (const json& part : m["content"])
        if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") ||
            !part["text"].is_string())
          return bad("messages", "only text content parts ({\"type\": \"text\", \"text\": ...}) are supported");
    }
  }
  // Text parts joined, as the templates of text models expect a string.
  out->messages = b["messages"];
  for (json& m : out->messages)
    if (m.contains("content") && m["content"].is_array()) {
      std::string text;
      for (const json& part : m["content"]) text += part["text"].get<std::string>();
      m["content"] = text;
    }
  if (b.contains("tools") && !b["tools"].is_null()) {
    if (!b["tools"].is_array()) return bad("tools", "'tools' must be a list");
    out->tools = b["tools"];
  }
  if (auto e = read_bool(b, "add_generation_prompt", &out->add_generation_prompt)) return e;
  if (b.contains("chat_template_kwargs") && !b["chat_template_kwargs"].is_null()) {
    if (!b["chat_template_kwargs"].is_object())
      return bad("chat_template_kwargs", "'chat_template_kwargs' must be an object");
    out->template_kwargs = b["chat_template_kwargs"];
  }
  return std::nullopt;
}

std::optional<ApiError> parse_chat(const json& b, const ApiContext& ctx, std::vector<int32_t> prompt,
                                   std::string text, ApiRequest* out) {
  *out = ApiRequest{};
  out->chat = true;
  RequestParams p;
  if (auto e = read_common(b, ctx, out, &p)) return e;
  if (auto e = unknown_fields(b, {"model", "messages", "max_tokens", "max_completion_tokens", "temperature", "top_p",
                                  "n", "stream", "stream_options", "stop", "presence_penalty", "frequency_penalty",
                                  "repetition_penalty", "logit_bias", "logprobs", "top_logprobs", "user", "seed",
                                  "tools", "tool_choice", "parallel_tool_calls", "response_format",
                                  "add_generation_prompt", "chat_template_kwargs", "best_of", "use_beam_search",
                                  "length_penalty", "ignore_eos", "top_k", "min_tokens", "cache_salt", "store",
                                  "metadata", "service_tier", "reasoning_effort", "prompt_cache_key",
                                  "safety_identifier"}))
    return e;
  if (auto e = read_platform_fields(b)) return e;
  int64_t max_tokens = ctx.limits.max_tokens;  // chat: until the model ends, within the server's limit
  if (auto e = read_int(b, "max_tokens", 1, ctx.limits.max_tokens, &max_tokens)) return e;
  if (auto e = read_int(b, "max_completion_tokens", 1, ctx.limits.max_tokens, &max_tokens)) return e;
  p.max_new_tokens = max_tokens;
  out->max_tokens = max_tokens;
  bool logprobs = false;
  int64_t top = 0;
  if (auto e = read_bool(b, "logprobs", &logprobs)) return e;
  if (auto e = read_int(b, "top_logprobs", 0, kMaxTopLogprobs, &top)) return e;
  if (top > 0 && !logprobs) return bad("top_logprobs", "'top_logprobs' needs 'logprobs': true");
  out->logprobs = logprobs ? top : -1;
  p.top_logprobs = top;
  // Tool calls come back as the model's text: a tool_choice that needs the
  // output parsed into tool_calls cannot be honoured.
  if (b.contains("tool_choice") && !b["tool_choice"].is_null() && b["tool_choice"] != "none" &&
      b["tool_choice"] != "auto")
    return bad("tool_choice", "'tool_choice' = " + b["tool_choice"].dump() +
                                  " needs tool calls parsed from the output, which this server does not do "
                                  "('none' and 'auto' return the model's text)");
  if (b.contains("parallel_tool_calls") && !b["parallel_tool_calls"].is_null() && !b["parallel_tool_calls"].is_boolean())
    return bad("parallel_tool_calls", "'parallel_tool_calls' must be a boolean");
  if (b.contains("response_format") && !b["response_format"].is_null() &&
      b["response_format"] != json({{"type", "text"}}))
    return bad("response_format", "only {\"type\": \"text\"} is supported: the output is not constrained");
  if (auto e = check_prompt_length(prompt, ctx)) return e;
  p.prompt = std::move(prompt);
  out->prompts.push_back(std::move(p));
  out->prompt_texts.push_back(std::move(text));
  return std::nullopt;
}

}  // namespace replayssm::serve
