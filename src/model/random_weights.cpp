// Model::random — a model with pseudo-random weights, for benchmark presets
// that must run without checkpoint files (a 27B model's shapes on a machine
// that holds no 27B download).
//
// The tensor list comes from the same binder as loading (program.h), so a
// random model has exactly the shapes and parameter count of a real one.
// Values are chosen by tensor role, read from the tensor name, because a
// uniform fill would leave the recurrences outside their domain (A_log must
// give decays in (0, 1), dt_bias a small positive step) and the norms at
// random scales. Each tensor is filled in fixed-size chunks, each chunk from
// its own generator seeded by (seed, tensor name, chunk index): the weights
// depend on neither the thread count nor the tensor order.
#include <algorithm>
#include <cmath>
#include <string>
#include <thread>
#include <vector>

#include "core/host_memory.h"
#include "model/program.h"
#include "replayssm/model.h"

namespace replayssm {

namespace {

uint64_t splitmix64(uint64_t& x) {
  uint64_t z = (x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

// xoshiro256** — fast, and identical on every platform (unlike std:: distributions).
class Rng {
 public:
  explicit Rng(uint64_t seed) {
    for (uint64_t& w : s_) w = splitmix64(seed);
  }
  uint64_t next() {
    const uint64_t r = rotl(s_[1] * 5, 7) * 9, t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return r;
  }
  // Uniform in [lo, hi).
  float uniform(float lo, float hi) {
    return lo + (hi - lo) * static_cast<float>(next() >> 40) * (1.0f / 16777216.0f);
  }

 private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t s_[4];
};

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// How one tensor is filled.
struct Fill {
  enum Kind { kUniform, kConstant, kLogUniformALog, kDtBias } kind = kUniform;
  float a = 0.0f, b = 0.0f;  // uniform bounds, or the constant in a
};

Fill fill_for(const ModelConfig& c, const std::string& name, const std::vector<int64_t>& shape) {
  const float unit_norm = c.norm_unit_offset ? 0.0f : 1.0f;  // (1 + w) vs w
  if (ends_with(name, "A_log")) return {Fill::kLogUniformALog, 1.0f, 16.0f};  // A = −exp(A_log) ∈ [−16, −1]
  if (ends_with(name, "dt_bias")) return {Fill::kDtBias, 1e-3f, 1e-1f};        // softplus⁻¹ of dt
  if (ends_with(name, ".D")) return {Fill::kConstant, 1.0f};
  if (ends_with(name, ".bias")) return {Fill::kConstant, 0.0f};
  if (ends_with(name, "conv1d.weight")) {
    const float k = 1.0f / std::sqrt(static_cast<float>(shape.back()));
    return {Fill::kUniform, -k, k};
  }
  // The Gated DeltaNet output norm is plain even where every other Qwen3.5
  // norm is zero-centred (docs/models.md).
  if (ends_with(name, "linear_attn.norm.weight")) return {Fill::kConstant, 1.0f};
  if (shape.size() == 1 && name.find("norm") != std::string::npos) return {Fill::kConstant, unit_norm};
  if (shape.size() >= 2) {
    // Embeddings: unit variance rows. Projections (and stacks of expert
    // projections, (E, out, in)): variance 1/fan-in, so a unit-variance
    // input gives a unit-variance output (uniform: ±sqrt(3/n)).
    const bool embed = name.find("embed") != std::string::npos;
    const float k = embed ? std::sqrt(3.0f) : std::sqrt(3.0f / static_cast<float>(shape.back()));
    return {Fill::kUniform, -k, k};
  }
  return {Fill::kConstant, 0.0f};
}

constexpr int64_t kChunk = int64_t{1} << 20;

void fill_chunk(const Fill& f, uint64_t seed, float* out, int64_t n) {
  Rng rng(seed);
  switch (f.kind) {
    case Fill::kConstant:
      std::fill_n(out, n, f.a);
      break;
    case Fill::kUniform:
      for (int64_t i = 0; i < n; ++i) out[i] = rng.uniform(f.a, f.b);
      break;
    case Fill::kLogUniformALog:
      for (int64_t i = 0; i < n; ++i) out[i] = std::log(rng.uniform(f.a, f.b));
      break;
    case Fill::kDtBias:
      for (int64_t i = 0; i < n; ++i) {
        // dt log-uniform in [a, b]; dt_bias = softplus⁻¹(dt) = dt + log(1 − e^−dt).
        const float dt = std::exp(rng.uniform(std::log(f.a), std::log(f.b)));
        out[i] = dt + std::log(-std::expm1(-dt));
      }
      break;
  }
}

// Fills every tensor, chunks spread over the cores.
class RandomBinder final : public WeightBinder {
 public:
  RandomBinder(const ModelConfig& c, uint64_t seed, bool matrices, std::vector<std::vector<float>>* storage)
      : c_(c), seed_(seed), matrices_(matrices), storage_(storage) {}

  void tensor(const std::string& name, const std::vector<int64_t>& shape, const float** ptr,
              bool optional) override {
    *ptr = nullptr;
    if (optional) return;  // random models carry only the required tensors
    if (!matrices_ && shape.size() == 2) return;  // left to the device
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    storage_->emplace_back(static_cast<size_t>(n));
    float* data = storage_->back().data();
    const Fill f = fill_for(c_, name, shape);
    const uint64_t base = seed_ ^ fnv1a(name);
    for (int64_t off = 0; off < n; off += kChunk)
      jobs_.push_back({f, base + static_cast<uint64_t>(off / kChunk) * 0x9e3779b97f4a7c15ull, data + off,
                       std::min(kChunk, n - off)});
    *ptr = data;
  }

  // Expert stacks are matrices: left to the device without matrices.
  void experts(const TensorSpec& spec, const float** ptr) override {
    *ptr = nullptr;
    if (!matrices_) return;
    tensor(spec.name, spec.shape, ptr, false);
  }

  void run() {
    const int64_t n_jobs = static_cast<int64_t>(jobs_.size());
    const int64_t n_threads = std::clamp<int64_t>(std::thread::hardware_concurrency(), 1, 64);
    auto work = [&](int64_t t) {
      for (int64_t j = t; j < n_jobs; j += n_threads) fill_chunk(jobs_[j].f, jobs_[j].seed, jobs_[j].out, jobs_[j].n);
    };
    if (n_jobs < 4 || n_threads == 1) {
      work(0);
      for (int64_t t = 1; t < n_threads; ++t) work(t);
      return;
    }
    std::vector<std::thread> pool;
    for (int64_t t = 0; t < n_threads; ++t) pool.emplace_back(work, t);
    for (std::thread& th : pool) th.join();
  }

 private:
  struct Job {
    Fill f;
    uint64_t seed;
    float* out;
    int64_t n;
  };
  const ModelConfig& c_;
  uint64_t seed_;
  bool matrices_;
  std::vector<std::vector<float>>* storage_;
  std::vector<Job> jobs_;
};

}  // namespace

Result<std::unique_ptr<Model>> Model::make_random(const ModelConfig& config, uint64_t seed, bool matrices) {
  if (config.blocks.empty() || config.block_layer.size() != config.blocks.size())
    return invalid_argument("random model: the config has no layers (or a block without its layer index)");
  if (config.vocab_size < 1 || config.hidden_size < 1)
    return invalid_argument("random model: vocab_size and hidden_size must be positive");
  // A 30B preset is 120 GiB of fp32: refuse before the first allocation
  // rather than let the host swap or the OOM killer end the process.
  if (matrices)
    RSSM_RETURN_IF_ERROR(check_host_memory(parameter_count(config) * 4, available_memory_bytes(),
                                           "random model " + (config.dir.empty() ? config.arch_name : config.dir) +
                                               ": fp32 weights"));
  std::unique_ptr<Model> m(new Model());
  m->config_ = config;
  m->program_ = std::make_unique<Program>();
  m->has_matrices_ = matrices;
  RandomBinder b(m->config_, seed, matrices, &m->storage_);
  bind_program(m->config_, b, m->program_.get());
  b.run();
  return m;
}

Result<std::unique_ptr<Model>> Model::random(const ModelConfig& config, uint64_t seed) {
  return make_random(config, seed, true);
}

Result<std::unique_ptr<Model>> Model::random_without_matrices(const ModelConfig& config, uint64_t seed) {
  return make_random(config, seed, false);
}

}  // namespace replayssm
