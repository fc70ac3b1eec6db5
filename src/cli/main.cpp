// replayssm: the command-line entry point. Subcommands live in one file each.
#include <cstdio>
#include <utility>
#include <vector>

#include "cli/commands.h"

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
  const std::vector<std::pair<CLI::App*, Runner>> commands = {
      {info, replayssm::cli::add_info(*info)},
      {logits, replayssm::cli::add_logits(*logits)},
      {generate, replayssm::cli::add_generate(*generate)},
      {tokenize, replayssm::cli::add_tokenize(*tokenize)},
      {detokenize, replayssm::cli::add_detokenize(*detokenize)},
      {perplexity, replayssm::cli::add_perplexity(*perplexity)},
      {bench, replayssm::cli::add_bench(*bench)},
  };
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
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
