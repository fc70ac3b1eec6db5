// replayssm: the command-line entry point. Subcommands live in one file each.
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "cli/commands.h"

namespace {

// CLI11 saturates an integer past 64 bits to the type's limit; such a value
// is refused instead, naming the option it follows (not a text: --prompt
// and --text take any words, digits too).
bool integer_out_of_range(const char* s) {
  const char* digits = s[0] == '-' ? s + 1 : s;
  if (*digits == '\0' || std::strspn(digits, "0123456789") != std::strlen(digits)) return false;
  errno = 0;
  if (s[0] == '-') (void)std::strtoll(s, nullptr, 10);
  else (void)std::strtoull(s, nullptr, 10);
  return errno == ERANGE;
}

}  // namespace

int main(int argc, char** argv) {
  using replayssm::cli::Runner;
  CLI::App app{"replayssm: replay-first decoding for hybrid (attention + SSM) language models"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "replayssm 0.1.0");
  auto* info = app.add_subcommand("info", "Print a model's architecture, size and per-sequence state");
  auto* logits = app.add_subcommand("logits", "Print the logits of every prompt position as JSON");
  auto* generate = app.add_subcommand("generate", "Generate tokens after a prompt");
  auto* tokenize = app.add_subcommand("tokenize", "Token ids of a text (tokenizer.json)");
  auto* detokenize = app.add_subcommand("detokenize", "Text of token ids (tokenizer.json)");
  auto* perplexity = app.add_subcommand("perplexity", "Mean NLL and perplexity of a text file");
  auto* bench = app.add_subcommand("bench", "Measure decode speed, memory, concurrency, rollback and restore");
  auto* serve = app.add_subcommand("serve", "Serve the model over an OpenAI-compatible HTTP API");
  auto* bench_serve =
      app.add_subcommand("bench-serve", "Measure a server (or the engine in process): throughput, TTFT, TPOT");
  const std::vector<std::pair<CLI::App*, Runner>> commands = {
      {info, replayssm::cli::add_info(*info)},
      {logits, replayssm::cli::add_logits(*logits)},
      {generate, replayssm::cli::add_generate(*generate)},
      {tokenize, replayssm::cli::add_tokenize(*tokenize)},
      {detokenize, replayssm::cli::add_detokenize(*detokenize)},
      {perplexity, replayssm::cli::add_perplexity(*perplexity)},
      {bench, replayssm::cli::add_bench(*bench)},
      {serve, replayssm::cli::add_serve(*serve)},
      {bench_serve, replayssm::cli::add_bench_serve(*bench_serve)},
  };
  for (int i = 1; i < argc; ++i)
    if (integer_out_of_range(argv[i]) && !(i > 1 && (std::strcmp(argv[i - 1], "--prompt") == 0 ||
                                                     std::strcmp(argv[i - 1], "--text") == 0))) {
      std::fprintf(stderr, "replayssm: error: %s%s%s is out of range for a 64-bit integer\n", i > 1 ? argv[i - 1] : "",
                   i > 1 ? ": " : "", argv[i]);
      return 2;
    }
  if (argc > 1 && argv[1][0] != '-') {  // the first word names the command
    bool known = false;
    for (const auto& [sub, run] : commands) known |= sub->get_name() == argv[1];
    if (!known) {
      std::fprintf(stderr,
                   "replayssm: error: unknown command '%s' (expected info, logits, generate, tokenize, detokenize, "
                   "perplexity, bench, serve or bench-serve; see --help)\n",
                   argv[1]);
      return 2;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    // A usage error, as one line like every other error (CLI11's own
    // format adds a second line and its own exit codes).
    std::fprintf(stderr, "replayssm: error: %s (see --help)\n", e.what());
    return 2;
  }
  for (const auto& [sub, run] : commands) {
    if (!sub->parsed()) continue;
    const replayssm::Status st = run();
    if (!st.ok()) {
      std::fprintf(stderr, "replayssm %s: error: %s\n", sub->get_name().c_str(), st.message().c_str());
      return 1;
    }
  }
  return 0;
}
