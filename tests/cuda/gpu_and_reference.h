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

struct GpuAndReference {
  std::unique_ptr<Model> model, ref_model;
  std::unique_ptr<cuda::CudaBackend> gpu;
  std::unique_ptr<cpu::CpuBackend> cpu;
  std::unique_ptr<PlannedAs> ref;  // the CPU, planned with the GPU's units
};

// Fatal gtest failures where a part does not load; the caller returns on
// HasFatalFailure().
inline void load_gpu_and_reference(const std::string& name, GpuAndReference* g) {
  auto m = Model::load(fixture(name));
  ASSERT_TRUE(m.ok()) << m.status().message();
  g->model = std::move(m).value();
  auto r = Model::load(fixture(name));
  ASSERT_TRUE(r.ok()) << r.status().message();
  g->ref_model = std::move(r).value();
  round_matrices_to_bf16(*g->ref_model);
  auto b = cuda::CudaBackend::create(*g->model);
  ASSERT_TRUE(b.ok()) << b.status().message();
  g->gpu = std::move(b).value();
  auto c = cpu::CpuBackend::create(*g->ref_model);
  ASSERT_TRUE(c.ok()) << c.status().message();
  g->cpu = std::move(c).value();
  g->ref = std::make_unique<PlannedAs>(*g->cpu, *g->gpu);
}

}  // namespace replayssm::test
