// Model loading (see model.h); the size accounting is in model_sizes.cpp.
#include "replayssm/model.h"

#include <algorithm>
#include <string>

#include "core/host_memory.h"
#include "io/safetensors.h"
#include "model/program.h"

namespace replayssm {

namespace {

// Copies each tensor from the checkpoint into fp32 storage; keeps the first error.
class CheckpointBinder final : public WeightBinder {
 public:
  CheckpointBinder(const Checkpoint& ckpt, std::vector<std::vector<float>>* storage)
      : ckpt_(ckpt), storage_(storage) {}
  Status status;

  void tensor(const std::string& name, const std::vector<int64_t>& shape, const float** ptr,
              bool optional) override {
    *ptr = nullptr;
    if (!status.ok()) return;
    if (optional && ckpt_.find(name) == nullptr) return;
    std::vector<float> data;
    status = ckpt_.read_f32(name, shape, &data);
    if (!status.ok()) return;
    storage_->push_back(std::move(data));
    *ptr = storage_->back().data();
  }

  // The fused tensor when the checkpoint has it, else one per expert and
  // part; a checkpoint with neither is an error naming both forms.
  void experts(const TensorSpec& spec, const float** ptr) override {
    *ptr = nullptr;
    if (!status.ok()) return;
    const int64_t E = spec.shape[0], rows = spec.shape[1], cols = spec.shape[2];
    const int64_t parts = static_cast<int64_t>(spec.expert_parts.size());
    std::vector<float> data;
    if (ckpt_.find(spec.name) != nullptr || parts == 0) {
      status = ckpt_.read_f32(spec.name, spec.shape, &data);
    } else if (ckpt_.find(spec.expert_prefix + "0" + spec.expert_parts[0]) == nullptr) {
      status = invalid_argument("missing tensor '" + spec.name + "' (the experts fused) or '" + spec.expert_prefix +
                                "0" + spec.expert_parts[0] + "' (one per expert)");
    } else {
      data.resize(static_cast<size_t>(E * rows * cols));
      const int64_t part_rows = rows / parts;
      std::vector<float> part;
      for (int64_t e = 0; e < E && status.ok(); ++e)
        for (int64_t i = 0; i < parts && status.ok(); ++i) {
          status = ckpt_.read_f32(spec.expert_prefix + std::to_string(e) + spec.expert_parts[size_t(i)],
                                  {part_rows, cols}, &part);
          if (status.ok()) std::copy(part.begin(), part.end(), data.begin() + (e * rows + i * part_rows) * cols);
        }
    }
    if (!status.ok()) return;
    storage_->push_back(std::move(data));
    *ptr = storage_->back().data();
  }

 private:
  const Checkpoint& ckpt_;
  std::vector<std::vector<float>>* storage_;
};

}  // namespace

Model::~Model() = default;

namespace {

// A checkpoint holding layers the config does not list (a layer pattern cut
// short, num_hidden_layers too small) would otherwise run as a shallower
// model without a word: the first tensor of a layer past the last is an
// error naming it. Tensors outside `prefix + "layers."` (a vision tower,
// MTP heads) are not the text model's and are left alone.
Status check_no_extra_layers(const ModelConfig& c, const Checkpoint& ckpt) {
  const std::string layers = c.weight_prefix + "layers.";
  for (auto it = ckpt.tensors().lower_bound(layers); it != ckpt.tensors().end(); ++it) {
    const std::string& name = it->first;
    if (name.compare(0, layers.size(), layers) != 0) break;
    const size_t end = name.find('.', layers.size());
    const std::string idx = name.substr(layers.size(), end == std::string::npos ? std::string::npos : end - layers.size());
    if (idx.empty() || idx.find_first_not_of("0123456789") != std::string::npos || idx.size() > 9) continue;
    if (std::stoll(idx) >= c.n_layers)
      return invalid_argument("tensor '" + name + "' belongs to layer " + idx + " but the config has " +
                              std::to_string(c.n_layers) + " layers (its layer list or num_hidden_layers is short)");
  }
  return {};
}

}  // namespace

Result<std::unique_ptr<Model>> Model::load(const std::string& dir) {
  RSSM_ASSIGN_OR_RETURN(ModelConfig cfg, load_model_config(dir));
  RSSM_RETURN_IF_ERROR(check_host_memory(parameter_count(cfg) * 4, available_memory_bytes(), dir + ": fp32 weights"));
  RSSM_ASSIGN_OR_RETURN(Checkpoint ckpt, Checkpoint::open_dir(dir));
  std::unique_ptr<Model> m(new Model());
  m->config_ = std::move(cfg);
  m->program_ = std::make_unique<Program>();
  CheckpointBinder b(ckpt, &m->storage_);
  bind_program(m->config_, b, m->program_.get());
  if (b.status.ok()) b.status = check_no_extra_layers(m->config_, ckpt);
  if (!b.status.ok()) return Status(b.status.code(), dir + ": " + b.status.message());
  return m;
}

}  // namespace replayssm
