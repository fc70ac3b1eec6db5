// `--device` on generate, logits and perplexity: one set of refusals
// whichever device is named (the commands run the same workloads over
// either backend: one line naming the option, non-zero exit, nothing
// decoded), and — on a machine with no GPU, as CI is — that a valid cuda
// request says so instead of falling back to the CPU. The GPU runs
// themselves are tests/cuda/cuda_backend_test.cpp and the conformance suite.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "test_util.h"

namespace replayssm {
namespace {

using test::data_dir;
using test::run_cli;

struct Refusal {
  std::string args, message;
};

TEST(CliDevice, RefusalsAreTheSameOnEitherDevice) {
  const std::string m = " --model " + data_dir("nemotron_h_tiny");
  const std::vector<Refusal> cases = {
      {"generate --prompt-ids 1,2 --beam 2 --spec ngram:2" + m, "--beam, --n and --spec cannot be combined"},
      {"generate --prompt-ids 1,2 --window 0" + m, "--window: must be >= 1, got 0"},
      {"generate --prompt-ids 1,2 --page-size 5000" + m, "--page-size: must be in [1, "},
      {"logits --prompt-ids 1,2 --strategy fast" + m, "--strategy: unknown strategy 'fast'"},
      {"logits --prompt-ids 1,2 --state-budget -5" + m, "--state-budget"},
      {"generate --prompt-ids 1,2 --spec ngram:0" + m, "--spec: draft length '0' must be in [1, 64]"},
  };
  for (const std::string device : {"cpu", "cuda"})
    for (const Refusal& c : cases) {
      const std::string args = c.args + " --device " + device;
      const auto r = run_cli(args);
      EXPECT_NE(r.exit_code, 0) << args;
      // Where cuda cannot run at all, that is said before anything else.
      const bool no_cuda = device == "cuda" && (r.err.find("this build has no CUDA backend") != std::string::npos ||
                                                r.err.find("--device cuda: no CUDA device") != std::string::npos);
      EXPECT_TRUE(no_cuda || r.err.find(c.message) != std::string::npos) << args << "\n" << r.err;
      EXPECT_TRUE(r.out.empty()) << args << "\n" << r.out;
    }
  for (const std::string cmd : {"generate", "logits"}) {
    const auto r = run_cli(cmd + " --device tpu --prompt-ids 1,2" + m);
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.err.find("--device: unknown device 'tpu' (expected cpu or cuda)"), std::string::npos) << r.err;
  }
}

TEST(CliDevice, CudaWithoutAGpuSaysSoAndDoesNotFallBack) {
  if (std::filesystem::exists("/dev/nvidia0")) GTEST_SKIP() << "a GPU is present: tests/cuda runs the cuda path";
  const std::string m = " --model " + data_dir("nemotron_h_tiny");
  const std::string small = " --model " + test::models_dir("nemotron_h_small");
  // --prompt echoes its text before the first token: the device is asked
  // before that, so nothing reaches stdout; perplexity and bench likewise.
  for (const std::string& args :
       {"generate --device cuda --prompt-ids 1,2 --max-new-tokens 2" + m,
        "generate --device cuda --prompt-ids 1,2 --max-new-tokens 2 --exact" + m,
        "generate --device cuda --prompt Hello --max-new-tokens 2" + small,
        "generate --device cuda --prompt Hello --max-new-tokens 2 --beam 2" + small,
        "logits --device cuda --prompt-ids 1,2" + m,
        "perplexity --device cuda --file " + test::models_dir("heldout.txt") + small}) {
    const auto r = run_cli(args);
    EXPECT_NE(r.exit_code, 0) << args;
    const bool no_gpu = r.err.find("--device cuda: no CUDA device") != std::string::npos;
    const bool no_backend = r.err.find("this build has no CUDA backend") != std::string::npos;
    EXPECT_TRUE(no_gpu || no_backend) << args << "\n" << r.err;
    EXPECT_TRUE(r.out.empty()) << args << "\n" << r.out;
  }
}

}  // namespace
}  // namespace replayssm
