// The public CLI: output formats of info/logits/generate, and one-line
// errors with a non-zero exit and no partial output for every bad input.
#include <gtest/gtest.h>

#include <cmath>

#include "test_util.h"

namespace replayssm {
namespace {

using test::data_dir;
using test::models_dir;
using test::run_cli;

TEST(Cli, InfoReportsNemotronH8B) {
  auto r = run_cli("info --json --model " + data_dir("nemotron_h_8b_config"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["blocks"]["mamba2"], 24);
  EXPECT_EQ(j["blocks"]["attention"], 4);
  EXPECT_EQ(j["blocks"]["mlp"], 24);
  EXPECT_EQ(j["ssm_state_bytes_per_sequence"], 102137856);
  EXPECT_EQ(j["kv_bytes_per_token"], 16384);
  auto text = run_cli("info --model " + data_dir("nemotron_h_8b_config"));
  ASSERT_EQ(text.exit_code, 0);
  EXPECT_NE(text.out.find("102137856"), std::string::npos) << text.out;
}

TEST(Cli, LogitsPrefillAndDecodeAgree) {
  const std::string m = data_dir("qwen3_5_tiny");
  auto pre = run_cli("logits --model " + m + " --prompt-ids 3,17,5,0,88");
  auto dec = run_cli("logits --model " + m + " --prompt-ids 3,17,5,0,88 --path decode --device cpu");
  ASSERT_EQ(pre.exit_code, 0) << pre.err;
  ASSERT_EQ(dec.exit_code, 0) << dec.err;
  auto a = nlohmann::json::parse(pre.out)["logits"], b = nlohmann::json::parse(dec.out)["logits"];
  ASSERT_EQ(a.size(), 5u);
  ASSERT_EQ(b.size(), 5u);
  for (size_t i = 0; i < 5; ++i) {
    ASSERT_EQ(a[i].size(), 89u);
    for (size_t j = 0; j < 89; ++j)
      EXPECT_NEAR(a[i][j].get<double>(), b[i][j].get<double>(), 1e-4 * (1 + std::abs(b[i][j].get<double>())));
  }
}

TEST(Cli, GenerateJsonMatchesGreedyOracle) {
  const std::string m = data_dir("nemotron_h_legacy_f16");
  auto exp = test::read_json(m + "/expected.json");
  std::string ids;
  for (const auto& t : exp["prompts"][2]) ids += (ids.empty() ? "" : ",") + std::to_string(t.get<int>());
  auto r = run_cli("generate --json --ignore-eos --max-new-tokens 4 --model " + m + " --prompt-ids " + ids);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["tokens"].size(), 4u);
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(j["tokens"][i], exp["greedy"][2]["tokens"][i]);
  for (const char* k : {"tokens_per_s", "time_per_output_token_ms", "prefill_ms", "state_bytes_peak", "kv_bytes_peak"})
    EXPECT_TRUE(j["stats"].contains(k)) << k;
  EXPECT_GT(j["stats"]["tokens_per_s"].get<double>(), 0.0);
}

TEST(Cli, SamplingIsReproducibleWithASeed) {
  const std::string base = "generate --json --ignore-eos --max-new-tokens 8 --temperature 1.0 --top-p 0.9 --model " +
                           data_dir("qwen3_5_tiny") + " --prompt-ids 1,2,3 --seed ";
  auto a = run_cli(base + "7"), b = run_cli(base + "7"), c = run_cli(base + "8");
  ASSERT_EQ(a.exit_code, 0) << a.err;
  EXPECT_EQ(nlohmann::json::parse(a.out)["tokens"], nlohmann::json::parse(b.out)["tokens"]);
  EXPECT_NE(nlohmann::json::parse(a.out)["tokens"], nlohmann::json::parse(c.out)["tokens"]);
}

TEST(Cli, PlainGenerateStreamsIds) {
  auto r = run_cli("generate --ignore-eos --max-new-tokens 3 --model " + data_dir("nemotron_h_tiny") + " --prompt-ids 5");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::istringstream in(r.out);
  int t, n = 0;
  while (in >> t) ++n;
  EXPECT_EQ(n, 3);
}

TEST(Cli, StrategiesGiveTheSameTokensAndHonestStats) {
  const std::string base = "generate --json --ignore-eos --max-new-tokens 20 --window 3 --page-size 4 --model " +
                           data_dir("nemotron_h_tiny") + " --prompt-ids 4,8,15,16,23,42 ";
  nlohmann::json first;
  for (const char* extra : {"--strategy replay", "--strategy replay --exact", "--strategy snapshot",
                            "--strategy recompute --checkpoint-interval 5",
                            "--strategy replay --log-retention -1 --eviction lru"}) {
    auto r = run_cli(base + extra);
    ASSERT_EQ(r.exit_code, 0) << extra << ": " << r.err;
    auto j = nlohmann::json::parse(r.out);
    if (first.is_null()) first = j["tokens"];
    EXPECT_EQ(j["tokens"], first) << extra;
    for (const char* k : {"state_bytes_peak", "kv_bytes_peak", "state_writes_bytes", "replayed_tokens"})
      EXPECT_TRUE(j["stats"].contains(k)) << k;
    for (const char* k : {"checkpoint", "log_replay", "reprefill"}) EXPECT_TRUE(j["stats"]["restores"].contains(k));
    EXPECT_GT(j["stats"]["state_bytes_peak"].get<int64_t>(), 0);
    EXPECT_GT(j["stats"]["state_writes_bytes"].get<int64_t>(), 0);
    // 26 tokens, pages of 4: 7 pages of KV rows.
    EXPECT_EQ(j["stats"]["kv_bytes_peak"].get<int64_t>(), 7 * 4 * 256);
  }
}

TEST(Cli, ExactReplayLogitsEqualStandardStepping) {
  const std::string base = "logits --path decode --model " + data_dir("qwen3_5_tiny") +
                           " --prompt-ids 1,5,9,13,17,21,25,29,33,37,41 --window 4 --page-size 3 ";
  auto replay = run_cli(base + "--strategy replay --exact");
  auto snapshot = run_cli(base + "--strategy snapshot");
  ASSERT_EQ(replay.exit_code, 0) << replay.err;
  ASSERT_EQ(snapshot.exit_code, 0) << snapshot.err;
  EXPECT_EQ(replay.out, snapshot.out);  // the same bits, printed the same way
}

TEST(Cli, SpeculativeBeamAndBestOfN) {
  const std::string m = data_dir("nemotron_h_tiny");
  const std::string base = "generate --json --ignore-eos --max-new-tokens 12 --model " + m + " --prompt-ids 4,8,15,4,8 ";
  auto plain = run_cli(base);
  auto ngram = run_cli(base + "--spec ngram:3");
  auto draft = run_cli(base + "--spec draft:" + m + ":4");
  auto beam1 = run_cli(base + "--beam 1");
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  ASSERT_EQ(ngram.exit_code, 0) << ngram.err;
  ASSERT_EQ(draft.exit_code, 0) << draft.err;
  ASSERT_EQ(beam1.exit_code, 0) << beam1.err;
  const auto want = nlohmann::json::parse(plain.out)["tokens"];
  EXPECT_EQ(nlohmann::json::parse(ngram.out)["tokens"], want);
  const auto d = nlohmann::json::parse(draft.out);
  EXPECT_EQ(d["tokens"], want);
  EXPECT_EQ(d["stats"]["acceptance_rate"], 1.0);  // drafting with the target itself
  EXPECT_GT(d["stats"]["mean_accepted"].get<double>(), 1.0);
  EXPECT_TRUE(d["stats"].contains("rollback_us"));
  EXPECT_EQ(nlohmann::json::parse(beam1.out)["tokens"], want);
  auto beam = nlohmann::json::parse(run_cli(base + "--beam 3").out);
  ASSERT_EQ(beam["sequences"].size(), 3u);
  EXPECT_EQ(beam["tokens"], beam["sequences"][0]["tokens"]);
  EXPECT_GE(beam["sequences"][0]["score"].get<double>(), beam["sequences"][1]["score"].get<double>());
  auto n = nlohmann::json::parse(run_cli(base + "--n 3 --temperature 1 --seed 5").out);
  ASSERT_EQ(n["sequences"].size(), 3u);
  double best = -1e300;
  for (const auto& sq : n["sequences"]) best = std::max(best, sq["score"].get<double>());
  for (const auto& sq : n["sequences"])
    if (sq["score"].get<double>() == best) EXPECT_EQ(n["tokens"], sq["tokens"]);
}

struct BadRun {
  std::string args, needle;
};

TEST(Cli, BadInputIsOneLineAndNonZero) {
  const std::string m = data_dir("nemotron_h_tiny");
  const std::vector<BadRun> cases = {
      {"logits --model /no/such/dir --prompt-ids 1", "/no/such/dir"},
      {"logits --model " + m + " --prompt-ids 1,97", "token id 97"},
      {"logits --model " + m + " --prompt-ids 1,x", "'x' is not a token id"},
      {"logits --model " + m + " --prompt-ids 1,-3", "'-3'"},
      {"logits --model " + m + " --prompt-ids 1 --path sideways", "--path"},
      {"logits --model " + m + " --prompt-ids 1 --device tpu", "tpu"},
      {"generate --model " + m + " --prompt-ids 1 --top-p 1.5", "--top-p"},
      {"generate --model " + m + " --prompt-ids 500", "token id 500"},
      {"info --model " + data_dir("."), "config.json"},
      {"generate --model " + m + " --prompt-ids 1 --strategy magic", "unknown strategy 'magic'"},
      {"generate --model " + m + " --prompt-ids 1 --window 0", "--window"},
      {"generate --model " + m + " --prompt-ids 1 --window 8 --replay-limit 5", "--replay-limit"},
      {"logits --model " + m + " --prompt-ids 1 --state-budget -5", "--state-budget"},
      {"logits --model " + m + " --prompt-ids 1 --eviction fifo", "unknown policy 'fifo'"},
      {"generate --model " + m + " --prompt-ids 1,2,3 --state-budget 100", "state budget of 100 bytes"},
      {"generate --model " + m + " --prompt-ids 1 --spec ngram:0", "--spec"},
      {"generate --model " + m + " --prompt-ids 1 --spec lookahead:3", "--spec"},
      {"generate --model " + m + " --prompt-ids 1 --spec draft:/no/such/model:3", "/no/such/model"},
      {"generate --model " + m + " --prompt-ids 1 --spec draft:" + data_dir("qwen3_5_tiny") + ":3", "vocabulary"},
      {"generate --model " + m + " --prompt-ids 1 --beam 2 --n 2", "cannot be combined"},
      {"generate --model " + m + " --prompt-ids 1 --beam -1", "--beam"},
      {"generate --model " + m + " --prompt-ids 1 --beam 0", "--beam: must be in [1, 4096], got 0"},
      {"generate --model " + m + " --prompt-ids 1 --n 0", "--n: must be in [1, 4096], got 0"},
      {"generate --model " + m + " --prompt-ids 1 --n 100000000", "--n: must be in [1, 4096]"},
      {"generate --model " + m + " --prompt-ids 1 --beam 9223372036854775807", "--beam: must be in [1, 4096]"},
      {"generate --model " + m + " --prompt-ids 1 --beam 200", "200 beams are more than the vocabulary's"},
      {"logits --model " + m + " --prompt-ids 1 --page-size 100000000", "--page-size: must be in [1, 4096]"},
      {"generate --model " + m + " --prompt-ids 1 --seed 99999999999999999999", "--seed: 99999999999999999999 is out of range"},
      {"perplexity --model " + models_dir("nemotron_h_small") + " --file " + data_dir("."), "is a directory"},
      {"frob --model " + m, "unknown command 'frob'"},
      {"logits --model " + m + " --prompt-ids 1 --window abc", "--window"},
      {"generate --model " + m + " --prompt-ids 1 --seed -1", "--seed: must be >= 0, got -1"},
  };
  for (const BadRun& c : cases) {
    auto r = run_cli(c.args);
    EXPECT_NE(r.exit_code, 0) << c.args;
    EXPECT_TRUE(r.out.empty()) << c.args << " printed: " << r.out;
    EXPECT_NE(r.err.find(c.needle), std::string::npos) << c.args << " said: " << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << c.args << " said: " << r.err;
  }
}

TEST(Cli, UsageErrorsExitNonZero) {
  EXPECT_NE(run_cli("").exit_code, 0);
  EXPECT_NE(run_cli("logits --prompt-ids 1").exit_code, 0);  // --model is required
  EXPECT_EQ(run_cli("generate --help").exit_code, 0);
}

}  // namespace
}  // namespace replayssm

namespace replayssm {
namespace {

TEST(CliText, TokenizeAndDetokenizeMatchTransformersTokenizer) {
  const auto cases = test::read_json(test::data_dir("tokenizer/expected.json"))["cases"];
  int checked = 0;
  for (const auto& c : cases) {
    const std::string text = c["text"].get<std::string>();
    if (text.empty() || text.find('\'') != std::string::npos || text.find('\n') != std::string::npos) continue;
    auto r = run_cli("tokenize --json --model " + models_dir("nemotron_h_small") + " --text '" + text + "'");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(nlohmann::json::parse(r.out)["ids"], c["ids"]) << text;
    std::string ids;
    for (const auto& i : c["ids"]) ids += (ids.empty() ? "" : ",") + std::to_string(i.get<int>());
    auto d = run_cli("detokenize --json --tokenizer " + test::data_dir("tokenizer/tokenizer.json") + " --ids " + ids);
    ASSERT_EQ(d.exit_code, 0) << d.err;
    ++checked;
  }
  EXPECT_GE(checked, 10);
}

TEST(CliText, PerplexityReproducesTheTrainingReport) {
  const auto report = test::read_json(models_dir("report.json"));
  for (const char* m : {"nemotron_h_small", "qwen3_5_small", "draft_small"}) {
    auto r = run_cli(std::string("perplexity --json --model ") + models_dir(m) + " --file " + models_dir("heldout.txt"));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["tokens"], report["models"][m]["heldout_txt_tokens"]);
    EXPECT_NEAR(j["mean_nll"].get<double>(), report["models"][m]["heldout_txt_nll"].get<double>(), 2e-3) << m;
  }
}

TEST(CliText, GeneratePromptUsesTheEmbeddedModel) {
  auto plain = run_cli("generate --prompt 'The Python standard library' --max-new-tokens 12");
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_EQ(plain.out.rfind("The Python standard library", 0), 0u) << plain.out;
  EXPECT_GT(plain.out.size(), std::string("The Python standard library").size() + 10);
  auto j = run_cli("generate --json --prompt 'The Python standard library' --max-new-tokens 12");
  ASSERT_EQ(j.exit_code, 0) << j.err;
  const auto out = nlohmann::json::parse(j.out);
  EXPECT_EQ(out["tokens"].size(), 12u);
  // The streamed text is the prompt followed by the decoded tokens.
  EXPECT_EQ(plain.out, "The Python standard library" + out["text"].get<std::string>() + "\n");
  auto spec = run_cli("generate --json --prompt 'The Python standard library' --max-new-tokens 12 --spec draft:" +
                      models_dir("draft_small") + ":3");
  ASSERT_EQ(spec.exit_code, 0) << spec.err;
  EXPECT_EQ(nlohmann::json::parse(spec.out)["tokens"], out["tokens"]);
}

TEST(CliText, TextErrors) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"generate --prompt hi --prompt-ids 1", "exactly one"},
      {"generate --model " + test::data_dir("nemotron_h_tiny") + " --prompt hi", "tokenizer.json"},
      {"tokenize --tokenizer /no/such.json --text hi", "/no/such.json"},
      {"tokenize --text hi", "--tokenizer FILE or --model DIR"},
      {"detokenize --model " + models_dir("nemotron_h_small") + " --ids 1,999999", "999999"},
      {"perplexity --model " + models_dir("nemotron_h_small") + " --file /no/such.txt", "/no/such.txt"},
  };
  for (const auto& [args, needle] : cases) {
    auto r = run_cli(args);
    EXPECT_NE(r.exit_code, 0) << args;
    EXPECT_NE(r.err.find(needle), std::string::npos) << args << ": " << r.err;
  }
}

}  // namespace
}  // namespace replayssm
