// The model on the GPU and its CPU reference on the same bf16 matrices
// (a second copy of the model, rounded as DeviceModel rounds it), planned
// as the CUDA backend is: what remains between the two is activation
// rounding. Shared by the backend's tests on the fixtures.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "backend/cpu/cpu_backend.h"
#include "backend/cuda/cuda_backend.h"
#include "../backend_test_util.h"
#include "cuda_test_util.h"
#include "replayssm/model.h"

namespace replayssm::test {

// A test over one fixture model (the parameter): SetUp skips without a GPU
// and loads both; a subclass's SetUp calls this one first and returns on
// IsSkipped() or HasFatalFailure().
class GpuAndReferenceTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
    auto m = Model::load(fixture(GetParam()));
    ASSERT_TRUE(m.ok()) << m.status().message();
    model_ = std::move(m).value();
    auto r = Model::load(fixture(GetParam()));
    ASSERT_TRUE(r.ok()) << r.status().message();
    ref_model_ = std::move(r).value();
    round_matrices_to_bf16(*ref_model_);
    auto b = cuda::CudaBackend::create(*model_);
    ASSERT_TRUE(b.ok()) << b.status().message();
    gpu_ = std::move(b).value();
    auto c = cpu::CpuBackend::create(*ref_model_);
    ASSERT_TRUE(c.ok()) << c.status().message();
    cpu_ = std::move(c).value();
    ref_ = std::make_unique<PlannedAs>(*cpu_, *gpu_);
  }

  std::unique_ptr<Model> model_, ref_model_;
  std::unique_ptr<cuda::CudaBackend> gpu_;
  std::unique_ptr<cpu::CpuBackend> cpu_;
  std::unique_ptr<PlannedAs> ref_;  // the CPU, planned with the GPU's units
};

}  // namespace replayssm::test
