// The server's pieces without a socket: a completion's text stream (stop
// strings across token boundaries, characters split over tokens, offsets),
// the OpenAI request checks (each bad field named, each limit enforced),
// and the Prometheus text.
#include <gtest/gtest.h>

#include <fstream>

#include "serve/chat_template.h"
#include "serve/metrics.h"
#include "serve/openai.h"
#include "io/utf8.h"
#include "serve/text_stream.h"
#include "test_util.h"

namespace replayssm::serve {
namespace {

using json = nlohmann::ordered_json;

const Tokenizer& tokenizer() {
  static Tokenizer t = *Tokenizer::load(test::models_dir("nemotron_h_small") + "/tokenizer.json");
  return t;
}

std::vector<int32_t> ids(const std::string& text) { return *tokenizer().encode(text); }

// Streams `text`'s tokens through a TextStream; returns what was released.
std::string stream(const std::string& text, std::vector<std::string> stops, bool* stopped = nullptr) {
  TextStream ts(&tokenizer(), std::move(stops));
  std::string out;
  for (int32_t t : ids(text)) {
    auto d = ts.push(t);
    EXPECT_TRUE(d.ok());
    out += d->text;
    if (d->stopped) break;
  }
  out += ts.finish();
  EXPECT_EQ(out, ts.text());
  if (stopped) *stopped = ts.stopped();
  return out;
}

TEST(TextStream, ReleasesTheTextAndCutsAtTheFirstStopString) {
  const std::string text = "The Python standard library has many modules. It is large.";
  bool stopped = false;
  EXPECT_EQ(stream(text, {}, &stopped), text);
  EXPECT_FALSE(stopped);
  // A stop string across token boundaries: the text before it, nothing after.
  EXPECT_EQ(stream(text, {"d library"}, &stopped), "The Python standar");
  EXPECT_TRUE(stopped);
  // The earliest of several wins; an absent one changes nothing.
  EXPECT_EQ(stream(text, {"It is", "many", "zzz"}, &stopped), "The Python standard library has ");
  EXPECT_EQ(stream(text, {"zzz", ""}, &stopped), text);
  EXPECT_FALSE(stopped);
}

TEST(TextStream, HoldsBackAPossibleStopStringAndHalfCharacters) {
  TextStream ts(&tokenizer(), {"module!"});
  std::string out;
  for (int32_t t : ids("many module")) out += ts.push(t)->text;
  // "module" may yet become "module!": held back until it cannot.
  EXPECT_EQ(out.find("module"), std::string::npos) << out;
  out += ts.finish();
  EXPECT_EQ(out, "many module");
  // "modules" cannot: released as it comes.
  TextStream tm(&tokenizer(), {"module!"});
  out.clear();
  for (int32_t t : ids("many modules")) out += tm.push(t)->text;
  EXPECT_EQ(out, "many modules");
  // Characters split over byte-level tokens come out whole.
  const std::string uni = "naïve café — 日本語 ✓";
  EXPECT_EQ(stream(uni, {}), uni);
  TextStream tu(&tokenizer(), {});
  for (int32_t t : ids(uni)) {
    const std::string piece = tu.push(t)->text;
    EXPECT_EQ(utf8_first_invalid(piece), std::string::npos) << "a released piece split a character";
  }
}

TEST(TextStream, OffsetsAreWhereEachTokensTextBegins) {
  const std::string text = "one two three";
  TextStream ts(&tokenizer(), {});
  const std::vector<int32_t> t = ids(text);
  for (int32_t x : t) (void)ts.push(x);
  (void)ts.finish();
  ASSERT_EQ(ts.offsets().size(), t.size());
  EXPECT_EQ(ts.offsets()[0], 0);
  for (size_t i = 1; i < t.size(); ++i) {
    const std::string head = *tokenizer().decode(std::span<const int32_t>(t).subspan(0, i));
    EXPECT_EQ(ts.offsets()[i], static_cast<int64_t>(head.size())) << "token " << i;
  }
}

ApiContext context() {
  ApiContext c;
  c.model = "tiny";
  c.tokenizer = &tokenizer();
  c.vocab_size = tokenizer().vocab_size();
  c.limits.max_tokens = 100;
  c.limits.max_n = 4;
  c.limits.max_beam = 3;
  c.limits.max_prompt_tokens = 50;
  return c;
}

// The error a completions body gets ("" when accepted).
std::string refusal(const json& body, int* status = nullptr, std::string* param = nullptr) {
  ApiRequest r;
  const auto e = parse_completion(body, context(), &r);
  if (status) *status = e ? e->status : 200;
  if (param) *param = e ? e->param : "";
  return e ? e->message : "";
}

TEST(OpenAiRequests, CompletionsAcceptWhatTheApiAllows) {
  ApiRequest r;
  ASSERT_FALSE(parse_completion({{"model", "tiny"}, {"prompt", "hello"}}, context(), &r));
  ASSERT_EQ(r.prompts.size(), 1u);
  EXPECT_EQ(r.prompts[0].max_new_tokens, 16);         // OpenAI's default
  EXPECT_FLOAT_EQ(r.prompts[0].sampling.temperature, 1.0f);
  EXPECT_EQ(r.prompt_texts[0], "hello");
  // Every prompt form: strings, token ids, lists of either.
  ASSERT_FALSE(parse_completion({{"prompt", {"a", "b c"}}, {"max_tokens", 3}}, context(), &r));
  EXPECT_EQ(r.prompts.size(), 2u);
  ASSERT_FALSE(parse_completion({{"prompt", {5, 9, 11}}, {"temperature", 0}}, context(), &r));
  EXPECT_EQ(r.prompts[0].prompt, (std::vector<int32_t>{5, 9, 11}));
  ASSERT_FALSE(parse_completion({{"prompt", {{5, 9}, {7}}}, {"n", 2}, {"seed", -3}}, context(), &r));
  EXPECT_EQ(r.prompts.size(), 2u);
  EXPECT_EQ(r.prompts[1].n, 2);
  EXPECT_EQ(r.prompts[0].sampling.seed, static_cast<uint64_t>(int64_t{-3}));
  // best_of, beams, stop strings, logprobs with echo, streaming with usage.
  ASSERT_FALSE(parse_completion({{"prompt", "x"}, {"n", 2}, {"best_of", 4}}, context(), &r));
  EXPECT_TRUE(r.search);
  EXPECT_EQ(r.prompts[0].best_of, 4);
  ASSERT_FALSE(parse_completion({{"prompt", "x"}, {"n", 2}, {"use_beam_search", true}, {"length_penalty", 0.5}},
                                context(), &r));
  EXPECT_EQ(r.prompts[0].beam_width, 2);
  ASSERT_FALSE(parse_completion({{"prompt", "x"}, {"stop", {"\n", "END"}}, {"logprobs", 3}, {"echo", true},
                                 {"max_tokens", 0}},
                                context(), &r));
  EXPECT_EQ(r.stop, (std::vector<std::string>{"\n", "END"}));
  EXPECT_EQ(r.prompts[0].prompt_logprobs, 3);
  EXPECT_EQ(r.prompts[0].top_logprobs, 3);
  ASSERT_FALSE(parse_completion({{"prompt", "x"}, {"stream", true}, {"stream_options", {{"include_usage", true}}},
                                 {"presence_penalty", 0}, {"logit_bias", json::object()}, {"user", "u"}},
                                context(), &r));
  EXPECT_TRUE(r.stream && r.include_usage);
}

TEST(OpenAiRequests, EachBadFieldIsNamed) {
  int status = 0;
  std::string param;
  EXPECT_NE(refusal({{"prompt", "x"}, {"model", "other"}}, &status, &param), "");
  EXPECT_EQ(status, 404);
  EXPECT_EQ(param, "model");
  const std::vector<std::pair<json, std::string>> bad = {
      {{{"max_tokens", 5}}, "prompt"},
      {{{"prompt", 7}}, "prompt"},
      {{{"prompt", json::array()}}, "prompt"},
      {{{"prompt", {1, 1 << 30}}}, "prompt"},
      {{{"prompt", std::string(2000, 'a')}}, "prompt"},
      {{{"prompt", "x"}, {"max_tokens", 101}}, "max_tokens"},
      {{{"prompt", "x"}, {"max_tokens", -1}}, "max_tokens"},
      {{{"prompt", "x"}, {"max_tokens", 0}}, "max_tokens"},
      {{{"prompt", "x"}, {"max_tokens", "5"}}, "max_tokens"},
      {{{"prompt", "x"}, {"max_tokens", 2.5}}, "max_tokens"},
      {{{"prompt", "x"}, {"temperature", -0.1}}, "temperature"},
      {{{"prompt", "x"}, {"temperature", 3}}, "temperature"},
      {{{"prompt", "x"}, {"top_p", 0}}, "top_p"},
      {{{"prompt", "x"}, {"n", 5}}, "n"},
      {{{"prompt", "x"}, {"n", 3}, {"best_of", 2}}, "best_of"},
      {{{"prompt", "x"}, {"n", 4}, {"use_beam_search", true}}, "n"},
      {{{"prompt", "x"}, {"stream", true}, {"use_beam_search", true}}, "use_beam_search"},
      {{{"prompt", "x"}, {"stream", true}, {"n", 1}, {"best_of", 2}}, "best_of"},
      {{{"prompt", "x"}, {"stream_options", {{"include_usage", true}}}}, "stream_options"},
      {{{"prompt", "x"}, {"stop", 5}}, "stop"},
      {{{"prompt", "x"}, {"logprobs", 21}}, "logprobs"},
      {{{"prompt", "x"}, {"presence_penalty", 0.5}}, "presence_penalty"},
      {{{"prompt", "x"}, {"frequency_penalty", 1}}, "frequency_penalty"},
      {{{"prompt", "x"}, {"logit_bias", {{"5", 1}}}}, "logit_bias"},
      {{{"prompt", "x"}, {"suffix", "tail"}}, "suffix"},
      {{{"prompt", "x"}, {"echo", "yes"}}, "echo"},
      {{{"prompt", "x"}, {"wibble", 1}}, "wibble"},
  };
  for (const auto& [body, field] : bad) {
    const std::string msg = refusal(body, &status, &param);
    EXPECT_NE(msg, "") << body.dump();
    EXPECT_EQ(status, 400) << body.dump();
    EXPECT_EQ(param, field) << body.dump() << ": " << msg;
  }
  EXPECT_NE(refusal(json::array({1, 2})), "");
}

// A body that is not JSON is a 400 whatever the parser's complaint: a
// number past a double's range once escaped as an exception, and a stray
// 0xFF byte quoted in the message made the error body itself throw.
TEST(OpenAiRequests, BodiesThatAreNotJson) {
  Json body;
  for (const char* text : {"{\"prompt\": ", "{\"prompt\": \"x\", \"max_tokens\": 1e400}", "\xff"}) {
    const auto e = parse_body(text, &body);
    ASSERT_TRUE(e) << text;
    EXPECT_EQ(e->status, 400);
    EXPECT_NE(e->message.find("the body is not JSON"), std::string::npos) << e->message;
    // The parser quotes the bad byte; the error body is still JSON.
    EXPECT_TRUE(Json::accept(error_body(*e))) << error_body(*e);
  }
  EXPECT_NE(parse_body("[1e400]", &body)->message.find("number overflow"), std::string::npos);
  ASSERT_FALSE(parse_body(R"({"prompt": "x"})", &body));
  EXPECT_EQ(body["prompt"], "x");
}

// Bodies as clients send them: the JSON parser keeps a non-negative integer
// unsigned and a big or fractional-looking one as a float, and each form
// must meet the field's bounds (an unsigned 0 once passed every lower bound).
TEST(OpenAiRequests, ParsedNumbersMeetTheirBounds) {
  int status = 0;
  std::string param;
  const std::vector<std::pair<std::string, std::string>> bad = {
      {R"({"prompt": "x", "n": 0})", "n"},
      {R"({"prompt": "x", "best_of": 0})", "best_of"},
      {R"({"prompt": "x", "max_tokens": 1e300})", "max_tokens"},
      {R"({"prompt": "x", "seed": 9223372036854775808.0})", "seed"},
      {R"({"prompt": "x", "seed": 18446744073709551615})", "seed"},
  };
  for (const auto& [body, field] : bad) {
    const std::string msg = refusal(json::parse(body), &status, &param);
    EXPECT_NE(msg, "") << body;
    EXPECT_EQ(status, 400) << body;
    EXPECT_EQ(param, field) << body << ": " << msg;
  }
  ApiRequest r;
  ASSERT_FALSE(parse_completion(json::parse(R"({"prompt": "x", "n": 2.0, "seed": -9223372036854775808.0})"),
                                context(), &r));
  EXPECT_EQ(r.n, 2);
  EXPECT_EQ(r.prompts[0].sampling.seed, uint64_t{1} << 63);
  for (const char* field : {"max_tokens", "max_completion_tokens"}) {
    const json body = json::parse(std::string(R"({"messages": [{"role": "user", "content": "hi"}], ")") + field +
                                  R"(": 0})");
    const auto e = parse_chat(body, context(), {5, 6}, "hi", &r);
    ASSERT_TRUE(e) << field;
    EXPECT_EQ(e->param, field);
  }
}

TEST(OpenAiRequests, ChatFieldsAndMessages) {
  ChatInput in;
  EXPECT_TRUE(parse_chat_input({{"messages", json::array()}}, &in));
  EXPECT_TRUE(parse_chat_input({{"messages", {{{"role", "wizard"}, {"content", "x"}}}}}, &in));
  EXPECT_TRUE(parse_chat_input({{"messages", {{{"role", "user"}, {"content", {{{"type", "image_url"}}}}}}}}, &in));
  ASSERT_FALSE(parse_chat_input(
      {{"messages", {{{"role", "user"}, {"content", {{{"type", "text"}, {"text", "a"}}, {{"type", "text"}, {"text", "b"}}}}}}}},
      &in));
  EXPECT_EQ(in.messages[0]["content"], "ab");
  ApiRequest r;
  const json ok = {{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"max_completion_tokens", 8},
                   {"logprobs", true}, {"top_logprobs", 2}, {"tool_choice", "none"}};
  ASSERT_FALSE(parse_chat(ok, context(), {5, 6}, "hi", &r));
  EXPECT_EQ(r.prompts[0].max_new_tokens, 8);
  EXPECT_EQ(r.logprobs, 2);
  json bad = ok;
  bad["tool_choice"] = "required";
  auto e = parse_chat(bad, context(), {5, 6}, "hi", &r);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->param, "tool_choice");
  bad = ok;
  bad["logprobs"] = false;
  e = parse_chat(bad, context(), {5, 6}, "hi", &r);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->param, "top_logprobs");
  bad = ok;
  bad["response_format"] = {{"type", "json_object"}};
  e = parse_chat(bad, context(), {5, 6}, "hi", &r);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->param, "response_format");
}

// A chat body the server cannot render: no template, or no tokenizer (a
// --preset model, whose ApiContext carries none). Each is a 400 that says
// which, never a null dereference.
TEST(OpenAiRequests, ChatWithoutTemplateOrTokenizer) {
  const json body = {{"messages", {{{"role", "user"}, {"content", "hi"}}}}};
  ApiRequest r;
  auto e = parse_chat_request(body, context(), nullptr, &r);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->status, 400);
  EXPECT_NE(e->message.find("no chat template"), std::string::npos) << e->message;
  ApiContext preset = context();
  preset.tokenizer = nullptr;
  e = parse_chat_request(body, preset, nullptr, &r);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->status, 400);
  EXPECT_NE(e->message.find("no tokenizer"), std::string::npos) << e->message;
}

// A tool's schema reaches the template in the order the client wrote it.
TEST(OpenAiRequests, ChatToolsKeepTheirKeyOrder) {
  const json body = json::parse(R"({"messages": [{"role": "user", "content": "hi"}],
      "tools": [{"type": "function", "function": {"name": "f", "parameters":
        {"type": "object", "properties": {"zeta": {"type": "string"}, "alpha": {"type": "integer"}}}}}]})");
  ChatInput in;
  ASSERT_FALSE(parse_chat_input(body, &in));
  auto t = ChatTemplate::from_text("{{ tools[0].function.parameters | tojson }}", "t");
  ASSERT_TRUE(t.ok()) << t.status().message();
  auto text = t->render(in);
  ASSERT_TRUE(text.ok()) << text.status().message();
  EXPECT_EQ(*text, R"({"type": "object", "properties": {"zeta": {"type": "string"}, "alpha": {"type": "integer"}}})");
}

// A tokenizer_config.json the parser refuses with out_of_range (a number
// past a double's range) is an error naming the file, like any bad JSON.
TEST(ChatTemplates, TokenizerConfigThatIsNotJson) {
  test::TempDir dir;
  std::ofstream(dir.file("tokenizer_config.json")) << R"({"bos_token": 1e400})";
  auto t = ChatTemplate::load("", dir.path());
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("tokenizer_config.json: not JSON"), std::string::npos) << t.status().message();
}

TEST(Metrics, PrometheusText) {
  Metrics m;
  m.request_started();
  m.time_to_first_token(0.03);
  m.inter_token_latency(0.004);
  m.request_finished("stop", 12, 7);
  m.http_error(400);
  LoopStats s;
  s.running = 3, s.waiting = 1;
  s.state.checkpoint_bytes = 100, s.state.log_bytes = 20, s.state.kv_bytes = 50;
  s.engine.spec_drafted = 10, s.engine.spec_accepted = 4;
  const std::string t = m.text(s, "tiny");
  for (const char* want : {"replayssm_requests_running{model_name=\"tiny\"} 3\n",
                           "replayssm_requests_waiting{model_name=\"tiny\"} 1\n",
                           "replayssm_requests_finished_total{model_name=\"tiny\",finish_reason=\"stop\"} 1\n",
                           "replayssm_prompt_tokens_total{model_name=\"tiny\"} 12\n",
                           "replayssm_generation_tokens_total{model_name=\"tiny\"} 7\n",
                           "replayssm_time_to_first_token_seconds_bucket{le=\"0.05\"} 1\n",
                           "replayssm_time_to_first_token_seconds_bucket{le=\"0.02\"} 0\n",
                           "replayssm_inter_token_latency_seconds_count 1\n",
                           "replayssm_state_bytes{kind=\"checkpoints\"} 100\n",
                           "replayssm_state_bytes{kind=\"logs\"} 20\n",
                           "replayssm_spec_acceptance_rate 0.4\n",
                           "replayssm_http_errors_total{status=\"400\"} 1\n",
                           "# TYPE replayssm_time_to_first_token_seconds histogram\n"})
    EXPECT_NE(t.find(want), std::string::npos) << want;
}

}  // namespace
}  // namespace replayssm::serve
