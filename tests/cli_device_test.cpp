// `--device cuda` on generate, logits and perplexity without the GPU path
// running: what is refused up front (one line naming the option, non-zero
// exit, nothing decoded), and — on a machine with no GPU, as CI is — that a
// valid request says so instead of falling back to the CPU. The GPU runs
// themselves are tests/cuda/decoder_cuda_test.cpp.
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

TEST(CliDevice, CudaRefusesWhatItCannotRunByName) {
  const std::string m = " --model " + data_dir("nemotron_h_tiny");
  const std::vector<Refusal> cases = {
      {"generate --device cuda --prompt-ids 1,2 --beam 2 --spec ngram:2" + m, "--beam, --n and --spec cannot be combined"},
      {"generate --device cuda --prompt-ids 1,2 --spec ngram:8" + m, "--spec: 8 drafts per verify; --device cuda verifies 1..7"},
      {"generate --device cuda --prompt-ids 1,2 --spec ngram:4 --window 8" + m,
       "--window: 8 is too small for 4 drafts on cuda (replay needs a window >= 10)"},
      {"generate --device cuda --prompt-ids 1,2 --strategy recompute --window 2000000" + m,
       "--window: 2000000 out of range [1, 1048576] on cuda (recompute"},
      {"generate --device cuda --prompt-ids 1,2 --exact --strategy snapshot" + m,
       "--exact: exact replay needs --strategy replay"},
      {"generate --device cuda --prompt-ids 1,2 --state-budget 100000" + m,
       "only --strategy, --window and --exact apply on cuda"},
      {"generate --device cuda --prompt-ids 1,2 --window 1" + m, "--window: 1 out of range [2, 64] on cuda"},
      {"logits --device cuda --prompt-ids 1,2 --checkpoint-interval 4" + m, "only --strategy, --window and --exact apply"},
      {"logits --device cuda --prompt-ids 1,2 --window 65" + m, "--window: 65 out of range [2, 64] on cuda"},
      {"generate --device tpu --prompt-ids 1,2" + m, "--device: unknown device 'tpu' (expected cpu or cuda)"},
      {"logits --device tpu --prompt-ids 1,2" + m, "--device: unknown device 'tpu'"},
  };
  for (const Refusal& c : cases) {
    const auto r = run_cli(c.args);
    EXPECT_NE(r.exit_code, 0) << c.args;
    // A build without nvcc refuses every cuda request before looking further.
    const bool no_backend = r.err.find("this build has no CUDA backend") != std::string::npos &&
                            c.args.find("--device cuda") != std::string::npos;
    EXPECT_TRUE(no_backend || r.err.find(c.message) != std::string::npos) << c.args << "\n" << r.err;
    EXPECT_TRUE(r.out.empty()) << c.args << "\n" << r.out;
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
