// replayssm serve over HTTP, as a client sees it: the embedded model on
// the CPU, the endpoints and their error bodies, greedy completions equal
// to `replayssm generate`, streaming (SSE) equal to the whole response,
// stop strings, logprobs and echo, n / best_of / beam search, chat through
// a template, authentication, a client that goes away mid-stream (its
// state freed at once), and SIGTERM draining what runs.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <thread>

#include "serve_process.h"
#include "test_util.h"

namespace replayssm {
namespace {

using json = nlohmann::ordered_json;
using test::ServeProcess;

double seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string model_dir() { return test::models_dir("nemotron_h_small"); }

std::string chat_template_file() { return test::data_dir("chat/role_prefixed.jinja"); }

ServeProcess& server() {
  // Without the prefix cache, so that every greedy text is generate's bit
  // for bit (a hit replays in the dual form: equal within rounding; the
  // cache has its own test, under --exact).
  static ServeProcess s({"--model", model_dir(), "--served-model-name", "small", "--chat-template",
                         chat_template_file(), "--max-tokens", "256", "--max-n", "8", "--no-request-log",
                         "--no-prefix-cache"});
  return s;
}

json post(const std::string& path, const json& body, int* status = nullptr) {
  auto c = server().client();
  auto r = c.Post(path, body.dump(), "application/json");
  EXPECT_TRUE(r) << "no response from " << path;
  if (!r) return {};
  if (status) *status = r->status;
  return json::parse(r->body);
}

// `replayssm generate`'s greedy text for a prompt, alone.
std::string generate_text(const std::string& prompt, int n) {
  const test::CliResult r = test::run_cli("generate --model " + model_dir() + " --prompt '" + prompt +
                                          "' --max-new-tokens " + std::to_string(n) + " --ignore-eos --json");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return json::parse(r.out)["text"].get<std::string>();
}

// The data lines of an SSE body, parsed ([DONE] as the string "[DONE]").
std::vector<json> sse_events(const std::string& body) {
  std::vector<json> out;
  size_t at = 0;
  while ((at = body.find("data: ", at)) != std::string::npos) {
    const size_t end = body.find("\n\n", at);
    const std::string data = body.substr(at + 6, end - at - 6);
    out.push_back(data == "[DONE]" ? json("[DONE]") : json::parse(data));
    at = end;
  }
  return out;
}

// A metric's value in /metrics ("name" or "name{labels}"; the first series
// when labels are left out), −1 when absent.
double metric_value(httplib::Client& c, const std::string& name) {
  const std::string t = "\n" + c.Get("/metrics")->body;
  size_t at = t.find("\n" + name + " ");
  if (at == std::string::npos && name.find('{') == std::string::npos) at = t.find("\n" + name + "{");
  if (at == std::string::npos) return -1.0;
  const size_t eol = t.find('\n', at + 1);
  const size_t sp = t.rfind(' ', eol);
  return std::stod(t.substr(sp + 1, eol - sp - 1));
}

TEST(Serve, HealthModelsAndErrorBodies) {
  ASSERT_TRUE(server().ok()) << server().log();
  auto c = server().client();
  EXPECT_EQ(c.Get("/health")->status, 200);
  const json models = json::parse(c.Get("/v1/models")->body);
  EXPECT_EQ(models["object"], "list");
  EXPECT_EQ(models["data"][0]["id"], "small");
  auto missing = c.Get("/v1/models/other");
  EXPECT_EQ(missing->status, 404);
  EXPECT_EQ(json::parse(missing->body)["error"]["code"], "model_not_found");
  int status = 0;
  json e = post("/v1/completions", {{"model", "other"}, {"prompt", "x"}}, &status);
  EXPECT_EQ(status, 404);
  EXPECT_EQ(e["error"]["code"], "model_not_found");
  e = post("/v1/completions", {{"prompt", "x"}, {"max_tokens", 100000}}, &status);
  EXPECT_EQ(status, 400);
  EXPECT_EQ(e["error"]["param"], "max_tokens");
  e = post("/v1/completions", {{"prompt", "x"}, {"presence_penalty", 1}}, &status);
  EXPECT_EQ(status, 400);
  EXPECT_EQ(e["error"]["param"], "presence_penalty");
  auto bad_json = c.Post("/v1/completions", "{\"prompt\": ", "application/json");
  EXPECT_EQ(bad_json->status, 400);
  EXPECT_NE(json::parse(bad_json->body)["error"]["message"].get<std::string>().find("not JSON"), std::string::npos);
  auto huge = c.Post("/v1/completions", std::string(5 << 20, ' '), "application/json");
  EXPECT_EQ(huge->status, 413);
  EXPECT_TRUE(json::parse(huge->body).contains("error"));
  auto nowhere = c.Get("/v1/nowhere");
  EXPECT_EQ(nowhere->status, 404);
  // The server is unharmed: a good request after the bad ones.
  e = post("/v1/completions", {{"prompt", "Debian"}, {"max_tokens", 3}, {"temperature", 0}}, &status);
  EXPECT_EQ(status, 200) << e.dump();
}

TEST(Serve, GreedyCompletionsAreGeneratesTokensAndStreamTheSame) {
  ASSERT_TRUE(server().ok()) << server().log();
  const std::string prompt = "The Python standard library";
  const std::string want = generate_text(prompt, 24);
  const json body = {{"model", "small"}, {"prompt", prompt}, {"max_tokens", 24}, {"temperature", 0},
                     {"ignore_eos", true}};
  int status = 0;
  const json r = post("/v1/completions", body, &status);
  ASSERT_EQ(status, 200) << r.dump();
  EXPECT_EQ(r["object"], "text_completion");
  EXPECT_EQ(r["choices"][0]["text"], want);
  EXPECT_EQ(r["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(r["usage"]["completion_tokens"], 24);
  EXPECT_GT(r["usage"]["prompt_tokens"].get<int>(), 0);
  // Streamed: the same text in pieces, [DONE] last, usage on request.
  json sb = body;
  sb["stream"] = true;
  sb["stream_options"] = {{"include_usage", true}};
  auto c = server().client();
  auto sr = c.Post("/v1/completions", sb.dump(), "application/json");
  ASSERT_EQ(sr->status, 200);
  EXPECT_NE(sr->get_header_value("Content-Type").find("text/event-stream"), std::string::npos);
  const std::vector<json> ev = sse_events(sr->body);
  ASSERT_GE(ev.size(), 3u);
  EXPECT_EQ(ev.back(), "[DONE]");
  std::string text;
  std::string finish;
  for (size_t i = 0; i + 2 < ev.size(); ++i) {
    text += ev[i]["choices"][0]["text"].get<std::string>();
    if (!ev[i]["choices"][0]["finish_reason"].is_null()) finish = ev[i]["choices"][0]["finish_reason"];
  }
  EXPECT_EQ(text, want);
  EXPECT_EQ(finish, "length");
  EXPECT_EQ(ev[ev.size() - 2]["usage"]["completion_tokens"], 24);
  EXPECT_TRUE(ev[ev.size() - 2]["choices"].empty());
}

TEST(Serve, StopStringsLogprobsEchoAndSeveralChoices) {
  ASSERT_TRUE(server().ok()) << server().log();
  const std::string prompt = "The Python standard library";
  const std::string full = generate_text(prompt, 24);
  // A stop string inside the greedy text: cut before it, finish "stop".
  const std::string stop = full.substr(8, 5);
  int status = 0;
  json r = post("/v1/completions",
                {{"prompt", prompt}, {"max_tokens", 24}, {"temperature", 0}, {"ignore_eos", true}, {"stop", stop}},
                &status);
  ASSERT_EQ(status, 200) << r.dump();
  EXPECT_EQ(r["choices"][0]["text"], full.substr(0, full.find(stop)));
  EXPECT_EQ(r["choices"][0]["finish_reason"], "stop");
  // Logprobs with echo: the prompt's tokens first (the first without a
  // log-probability), then the completion's, top-k dictionaries, offsets.
  r = post("/v1/completions",
           {{"prompt", prompt}, {"max_tokens", 4}, {"temperature", 0}, {"logprobs", 2}, {"echo", true}}, &status);
  ASSERT_EQ(status, 200) << r.dump();
  const json& lp = r["choices"][0]["logprobs"];
  const size_t n = lp["tokens"].size();
  ASSERT_EQ(lp["token_logprobs"].size(), n);
  ASSERT_EQ(lp["text_offset"].size(), n);
  EXPECT_TRUE(lp["token_logprobs"][0].is_null());
  EXPECT_TRUE(lp["top_logprobs"][0].is_null());
  std::string joined;
  for (size_t i = 0; i < n; ++i) {
    EXPECT_EQ(lp["text_offset"][i].get<size_t>(), joined.size()) << i;
    joined += lp["tokens"][i].get<std::string>();
    if (i > 0) {
      EXPECT_LE(lp["token_logprobs"][i].get<double>(), 0.0);
      EXPECT_EQ(lp["top_logprobs"][i].size(), 2u);
    }
  }
  EXPECT_EQ(joined, r["choices"][0]["text"].get<std::string>());
  EXPECT_EQ(r["choices"][0]["text"].get<std::string>().rfind(prompt, 0), 0u);
  // max_tokens 0 with echo scores the prompt alone.
  r = post("/v1/completions", {{"prompt", prompt}, {"max_tokens", 0}, {"echo", true}, {"logprobs", 0}}, &status);
  ASSERT_EQ(status, 200) << r.dump();
  EXPECT_EQ(r["choices"][0]["text"], prompt);
  EXPECT_EQ(r["usage"]["completion_tokens"], 0);
  {  // streamed, the echo alone
    auto c = server().client();
    auto sr = c.Post("/v1/completions",
                     json({{"prompt", prompt}, {"max_tokens", 0}, {"echo", true}, {"stream", true}}).dump(),
                     "application/json");
    ASSERT_EQ(sr->status, 200);
    std::string text;
    for (const json& e : sse_events(sr->body))
      if (e != "[DONE]") text += e["choices"][0]["text"].get<std::string>();
    EXPECT_EQ(text, prompt);
  }
  // n choices per prompt, several prompts: indexes prompt·n + j; a seed
  // repeats them; best_of and beams answer n.
  r = post("/v1/completions", {{"prompt", {"Debian", "The kernel"}}, {"n", 3}, {"max_tokens", 6}, {"seed", 11}},
           &status);
  ASSERT_EQ(status, 200) << r.dump();
  ASSERT_EQ(r["choices"].size(), 6u);
  for (size_t i = 0; i < 6; ++i) EXPECT_EQ(r["choices"][i]["index"], i);
  const json again = post("/v1/completions",
                          {{"prompt", {"Debian", "The kernel"}}, {"n", 3}, {"max_tokens", 6}, {"seed", 11}}, &status);
  EXPECT_EQ(again["choices"], r["choices"]);
  r = post("/v1/completions", {{"prompt", "Debian"}, {"n", 2}, {"best_of", 4}, {"max_tokens", 6}}, &status);
  ASSERT_EQ(status, 200) << r.dump();
  EXPECT_EQ(r["choices"].size(), 2u);
  r = post("/v1/completions",
           {{"prompt", "Debian"}, {"n", 2}, {"use_beam_search", true}, {"max_tokens", 6}, {"ignore_eos", true}},
           &status);
  ASSERT_EQ(status, 200) << r.dump();
  ASSERT_EQ(r["choices"].size(), 2u);
  EXPECT_NE(r["choices"][0]["text"], r["choices"][1]["text"]);
}

// --preset: random weights at a published shape and no tokenizer. Token-id
// prompts only; completions count tokens, their text empty, logprob tokens
// named by id.
TEST(Serve, APresetServesTokenIds) {
  ServeProcess s({"--preset", "tiny", "--no-request-log"});
  ASSERT_TRUE(s.ok()) << s.log();
  auto c = s.client();
  auto post_to = [&](const json& body, int* status) {
    auto r = c.Post("/v1/completions", body.dump(), "application/json");
    EXPECT_TRUE(r);
    *status = r ? r->status : 0;
    return r ? json::parse(r->body) : json();
  };
  int status = 0;
  json r = post_to({{"model", "tiny"}, {"prompt", {5, 9, 200, 31}}, {"max_tokens", 7}, {"ignore_eos", true},
                    {"logprobs", 1}},
                   &status);
  ASSERT_EQ(status, 200) << r.dump();
  EXPECT_EQ(r["usage"]["completion_tokens"], 7);
  EXPECT_EQ(r["usage"]["prompt_tokens"], 4);
  EXPECT_EQ(r["choices"][0]["text"], "");
  ASSERT_EQ(r["choices"][0]["logprobs"]["tokens"].size(), 7u);
  EXPECT_EQ(r["choices"][0]["logprobs"]["tokens"][0].get<std::string>().rfind("token_id:", 0), 0u);
  r = post_to({{"prompt", "text"}, {"max_tokens", 2}}, &status);
  EXPECT_EQ(status, 400);
  EXPECT_EQ(r["error"]["param"], "prompt");
  r = post_to({{"prompt", {5}}, {"max_tokens", 2}, {"stop", "x"}}, &status);
  EXPECT_EQ(status, 400);
  EXPECT_EQ(r["error"]["param"], "stop");
  auto chat = c.Post("/v1/chat/completions", json({{"messages", {{{"role", "user"}, {"content", "hi"}}}}}).dump(),
                     "application/json");
  EXPECT_EQ(chat->status, 400);
}

TEST(Serve, ChatThroughTheTemplate) {
  ASSERT_TRUE(server().ok()) << server().log();
  const json body = {{"model", "small"},
                     {"messages", {{{"role", "system"}, {"content", "Be brief."}}, {{"role", "user"}, {"content", "Debian"}}}},
                     {"max_completion_tokens", 12},
                     {"temperature", 0},
                     {"logprobs", true},
                     {"top_logprobs", 2}};
  int status = 0;
  const json r = post("/v1/chat/completions", body, &status);
  ASSERT_EQ(status, 200) << r.dump();
  EXPECT_EQ(r["object"], "chat.completion");
  EXPECT_EQ(r["choices"][0]["message"]["role"], "assistant");
  const json& content = r["choices"][0]["logprobs"]["content"];
  std::string joined;
  for (const json& t : content) {
    joined += t["token"].get<std::string>();
    EXPECT_EQ(t["top_logprobs"].size(), 2u);
    EXPECT_FALSE(t["bytes"].empty());
  }
  EXPECT_EQ(joined, r["choices"][0]["message"]["content"]);
  // The same prompt through /v1/completions, rendered by hand: the same text.
  const std::string rendered = "system: Be brief.\nuser: Debian\nassistant:";
  const json c = post("/v1/completions", {{"prompt", rendered}, {"max_tokens", 12}, {"temperature", 0}}, &status);
  // The completions prompt gets the tokenizer's special tokens; the chat one
  // only what the template writes: the same here (the tokenizer adds none).
  EXPECT_EQ(c["choices"][0]["text"], r["choices"][0]["message"]["content"]);
  // Streamed: role first, then content deltas, then the finish.
  json sb = body;
  sb["stream"] = true;
  auto cl = server().client();
  const std::vector<json> ev = sse_events(cl.Post("/v1/chat/completions", sb.dump(), "application/json")->body);
  ASSERT_GE(ev.size(), 3u);
  EXPECT_EQ(ev[0]["choices"][0]["delta"]["role"], "assistant");
  std::string text;
  for (size_t i = 1; i + 1 < ev.size(); ++i)
    if (ev[i]["choices"][0]["delta"].contains("content")) text += ev[i]["choices"][0]["delta"]["content"];
  EXPECT_EQ(text, r["choices"][0]["message"]["content"]);
  EXPECT_EQ(ev.back(), "[DONE]");
  // Refusals by field.
  json bad = body;
  bad["tool_choice"] = "required";
  EXPECT_EQ(post("/v1/chat/completions", bad, &status)["error"]["param"], "tool_choice");
  bad = body;
  bad["messages"] = json::array();
  EXPECT_EQ(post("/v1/chat/completions", bad, &status)["error"]["param"], "messages");
}

// A client that goes away mid-stream: its request ends at once and the
// state it held returns to the server's idle value.
TEST(Serve, ADisconnectedClientFreesItsState) {
  ASSERT_TRUE(server().ok()) << server().log();
  auto c = server().client();
  auto metric = [&](const std::string& name) { return metric_value(c, name); };
  const json body = {{"prompt", "The Python standard library"}, {"max_tokens", 256}, {"ignore_eos", true},
                     {"stream", true}, {"temperature", 0}};
  std::atomic<int> chunks{0};
  httplib::Client sc("127.0.0.1", server().port());
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/completions";
  req.body = body.dump();
  req.set_header("Content-Type", "application/json");
  req.content_receiver = [&](const char*, size_t, uint64_t, uint64_t) { return ++chunks < 4; };  // then hang up
  (void)sc.send(req);
  EXPECT_GE(chunks.load(), 4);
  bool idle = false;
  for (int i = 0; i < 100 && !idle; ++i) {
    idle = metric("replayssm_requests_running") == 0 && metric("replayssm_state_bytes{kind=\"checkpoints\"}") == 0 &&
           metric("replayssm_state_bytes{kind=\"kv\"}") == 0;
    if (!idle) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(idle) << c.Get("/metrics")->body;
  const std::string t = c.Get("/metrics")->body;
  EXPECT_NE(t.find("finish_reason=\"cancelled\""), std::string::npos);
}

// A non-streamed request whose client gives up is cancelled too: the server
// probes the connection while the completion runs.
TEST(Serve, AClientThatGivesUpOnAWholeResponseFreesItsState) {
  ServeProcess s({"--model", model_dir(), "--max-tokens", "8192", "--no-request-log"});
  ASSERT_TRUE(s.ok()) << s.log();
  auto c = s.client();
  auto running = [&] { return metric_value(c, "replayssm_requests_running"); };
  httplib::Client impatient("127.0.0.1", s.port());
  impatient.set_read_timeout(1, 0);
  const double t0 = seconds();
  // As every SDK does: a compressed body would hold the probes back.
  const httplib::Headers compressed = {{"Accept-Encoding", "gzip, deflate, br"}};
  auto r = impatient.Post("/v1/completions", compressed,
                          json({{"prompt", "Debian"}, {"max_tokens", 8000}, {"ignore_eos", true}}).dump(),
                          "application/json");
  EXPECT_FALSE(r);  // timed out
  bool idle = false;
  while (!idle && seconds() - t0 < 10) {
    idle = running() == 0;
    if (!idle) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(idle) << "still running " << seconds() - t0 << " s after the request";
  EXPECT_NE(c.Get("/metrics")->body.find("finish_reason=\"cancelled\""), std::string::npos);
}

// bench-serve over HTTP and in process: every request completes with its
// output length, at each concurrency, and the figures are filled in.
TEST(Serve, BenchServeMeasuresTheServerAndTheEngine) {
  ASSERT_TRUE(server().ok()) << server().log();
  const std::string common = " --input-len 12 --output-len 6 --num-prompts 8 --concurrency 1,4 --json";
  const test::CliResult http =
      test::run_cli("bench-serve --url http://127.0.0.1:" + std::to_string(server().port()) + common);
  ASSERT_EQ(http.exit_code, 0) << http.err;
  const test::CliResult local = test::run_cli("bench-serve --in-process --preset tiny" + common);
  ASSERT_EQ(local.exit_code, 0) << local.err;
  for (const std::string& out : {http.out, local.out}) {
    const json runs = json::parse(out);
    ASSERT_EQ(runs.size(), 2u);
    for (const json& r : runs) {
      EXPECT_EQ(r["completed"], 8);
      EXPECT_EQ(r["failed"], 0);
      EXPECT_EQ(r["output_tokens"], 8 * 6);
      EXPECT_EQ(r["input_tokens"], 8 * 12);
      EXPECT_GT(r["ttft_ms"]["p50"].get<double>(), 0.0);
      EXPECT_GT(r["tpot_ms"]["mean"].get<double>(), 0.0);
      EXPECT_GE(r["ttft_ms"]["p99"].get<double>(), r["ttft_ms"]["p50"].get<double>());
      EXPECT_GT(r["output_throughput"].get<double>(), 0.0);
      EXPECT_LE(r["max_in_flight"].get<int>(), r["concurrency"].get<int>());
    }
  }
  // Bad options and an unreachable server are errors naming them.
  test::CliResult bad = test::run_cli("bench-serve --url http://127.0.0.1:1 --num-prompts 2");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("--url"), std::string::npos) << bad.err;
  bad = test::run_cli("bench-serve --in-process --preset tiny --concurrency 4,x");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("--concurrency"), std::string::npos) << bad.err;
  bad = test::run_cli("bench-serve --in-process --preset tiny --dataset /nonexistent/prompts.txt");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("/nonexistent/prompts.txt"), std::string::npos) << bad.err;
}

// The prefix cache: a request that repeats another's prompt and goes on
// reports the shared tokens as cached, and under --exact its text is
// generate's (also --exact) bit for bit; cache_salt partitions.
TEST(Serve, PrefixCacheHitsReportCachedTokens) {
  ServeProcess s({"--model", model_dir(), "--exact", "--no-request-log"});
  ASSERT_TRUE(s.ok()) << s.log();
  auto c = s.client();
  auto complete = [&](const json& body) {
    auto r = c.Post("/v1/completions", body.dump(), "application/json");
    EXPECT_TRUE(r && r->status == 200) << (r ? r->body : "no response");
    return r ? json::parse(r->body) : json();
  };
  const std::string first = "The Debian package manager installs";
  json r = complete({{"prompt", first}, {"max_tokens", 8}, {"temperature", 0}, {"ignore_eos", true}});
  EXPECT_EQ(r["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
  const std::string second = first + " software from the archive";
  r = complete({{"prompt", second}, {"max_tokens", 12}, {"temperature", 0}, {"ignore_eos", true}});
  const int64_t cached = r["usage"]["prompt_tokens_details"]["cached_tokens"].get<int64_t>();
  EXPECT_GT(cached, 0);
  EXPECT_LT(cached, r["usage"]["prompt_tokens"].get<int64_t>());
  const test::CliResult g = test::run_cli("generate --model " + model_dir() + " --prompt '" + second +
                                          "' --max-new-tokens 12 --ignore-eos --exact --json");
  ASSERT_EQ(g.exit_code, 0) << g.err;
  EXPECT_EQ(r["choices"][0]["text"], json::parse(g.out)["text"]);
  // Another salt shares nothing.
  r = complete({{"prompt", second}, {"max_tokens", 2}, {"cache_salt", "other-tenant"}});
  EXPECT_EQ(r["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
  EXPECT_GT(metric_value(c, "replayssm_prefix_cache_hits_total"), 0);
  EXPECT_GT(metric_value(c, "replayssm_prefix_cache_entries"), 0);
  auto bad = c.Post("/v1/completions", json({{"prompt", "x"}, {"cache_salt", 5}}).dump(), "application/json");
  EXPECT_EQ(bad->status, 400);
}

// Memory short: under a state budget that holds a few requests' state,
// 16 at once all complete — queued, or parked and resumed by restore —
// each with generate's text (both --exact: a restore replays the log).
TEST(Serve, UnderAStateBudgetEveryRequestCompletesUnchanged) {
  ServeProcess s({"--model", model_dir(), "--exact", "--state-budget", "3000000", "--no-prefix-cache",
                  "--no-request-log"});
  ASSERT_TRUE(s.ok()) << s.log();
  const std::vector<std::string> prompts = {"Debian", "The kernel", "A package", "The archive"};
  std::vector<std::string> want;
  for (const std::string& p : prompts) {
    const test::CliResult g = test::run_cli("generate --model " + model_dir() + " --prompt '" + p +
                                            "' --max-new-tokens 40 --ignore-eos --exact --json");
    ASSERT_EQ(g.exit_code, 0) << g.err;
    want.push_back(json::parse(g.out)["text"].get<std::string>());
  }
  std::vector<std::string> got(16);
  std::vector<std::thread> clients;
  for (size_t i = 0; i < got.size(); ++i)
    clients.emplace_back([&, i] {
      auto c = s.client();
      auto r = c.Post("/v1/completions",
                      json({{"prompt", prompts[i % prompts.size()]}, {"max_tokens", 40}, {"temperature", 0},
                            {"ignore_eos", true}})
                          .dump(),
                      "application/json");
      if (r && r->status == 200) got[i] = json::parse(r->body)["choices"][0]["text"].get<std::string>();
      else got[i] = "HTTP " + (r ? std::to_string(r->status) + ": " + r->body : "no response: " + httplib::to_string(r.error()));
    });
  for (std::thread& t : clients) t.join();
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], want[i % prompts.size()]) << "request " << i;
  auto c = s.client();
  EXPECT_LE(metric_value(c, "replayssm_state_bytes_peak{kind=\"checkpoints_and_logs\"}"), 3000000);
  // The budget did bind: requests waited or were parked.
  EXPECT_TRUE(metric_value(c, "replayssm_engine_max_running") < 16 || metric_value(c, "replayssm_preemptions_total") > 0)
      << c.Get("/metrics")->body;
}

TEST(Serve, ApiKeyAndDrainOnSigterm) {
  ServeProcess s({"--model", model_dir(), "--api-key", "sk-test-123", "--no-request-log"});
  ASSERT_TRUE(s.ok()) << s.log();
  auto c = s.client();
  EXPECT_EQ(c.Get("/health")->status, 200);  // no key needed there
  auto denied = c.Get("/v1/models");
  EXPECT_EQ(denied->status, 401);
  EXPECT_EQ(json::parse(denied->body)["error"]["code"], "invalid_api_key");
  httplib::Headers wrong = {{"Authorization", "Bearer sk-test-124"}};
  EXPECT_EQ(c.Get("/v1/models", wrong)->status, 401);
  httplib::Headers auth = {{"Authorization", "Bearer sk-test-123"}};
  EXPECT_EQ(c.Get("/v1/models", auth)->status, 200);
  // A long request runs; SIGTERM drains: it completes, then the server exits 0.
  std::string result;
  std::thread running([&] {
    auto cc = s.client();
    auto r = cc.Post("/v1/completions", auth,
                     json({{"prompt", "Debian"}, {"max_tokens", 200}, {"ignore_eos", true}}).dump(), "application/json");
    if (r) result = r->body;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(s.terminate(), 0) << s.log();
  running.join();
  ASSERT_FALSE(result.empty());
  EXPECT_EQ(json::parse(result)["usage"]["completion_tokens"], 200);
}

}  // namespace
}  // namespace replayssm
