// Mixtures of experts on the CUDA backend: refused by name, not run without
// their blocks. The device model refuses before a byte is uploaded (so this
// runs without a GPU); the backend, where a GPU is, refuses as it checks the
// model, and make_backend passes that on.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>

#include "../moe_test_util.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/device_model.h"
#include "cuda_test_util.h"
#include "replayssm/make_backend.h"

namespace replayssm {
namespace {

TEST(CudaMoe, MoeModelsAreRefusedByName) {
  for (const std::string& config : {test::nemotron_moe_config(), test::qwen_moe_config(true)}) {
    // A scratch directory of its own (tests/test_util.h is the CPU binary's).
    const std::filesystem::path dir =
        std::filesystem::temp_directory_path() / ("rssm_cuda_moe_" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    test::write_moe_checkpoint(dir.string(), config, /*per_expert=*/false, /*bf16=*/false);
    auto m = Model::load(dir.string());
    std::filesystem::remove_all(dir);
    ASSERT_TRUE(m.ok()) << m.status().message();
    auto dm = cuda::DeviceModel::create(**m, 1);
    ASSERT_FALSE(dm.ok());
    EXPECT_NE(dm.status().message().find("MoE layers"), std::string::npos) << dm.status().message();
    if (!test::have_gpu()) continue;
    auto b = make_backend("cuda", **m);
    ASSERT_FALSE(b.ok());
    EXPECT_NE(b.status().message().find("MoE layers are not supported on cuda"), std::string::npos)
        << b.status().message();
  }
}

}  // namespace
}  // namespace replayssm
