// Fuzzes config.json parsing (parse_model_config): the input is the file's
// text, Python's bare Infinity and NaN included. An accepted config then
// goes through what `info`, the memory checks and the loader compute from
// it (the tensor list, parameter count, cache layout, bytes per sequence
// and per token), which must not overflow, and must hold what the model
// builder relies on: blocks with their layer index, heads that divide
// evenly, EOS ids inside the vocabulary.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "replayssm/model.h"
#include "replayssm/model_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace replayssm;
  auto r = parse_model_config(std::string(reinterpret_cast<const char*>(data), size), "config.json");
  if (!r.ok()) return 0;
  const ModelConfig& c = *r;
  if (c.blocks.empty() || c.blocks.size() != c.block_layer.size() || c.vocab_size <= 0 || c.hidden_size <= 0)
    std::abort();
  if (c.count(BlockKind::kAttention) > 0 && (c.attn.n_kv_heads <= 0 || c.attn.n_heads % c.attn.n_kv_heads != 0))
    std::abort();
  for (int32_t e : c.eos_token_ids)
    if (e < 0 || e >= c.vocab_size) std::abort();
  for (const TensorSpec& t : expected_tensors(c))
    for (int64_t d : t.shape)
      if (d <= 0) std::abort();
  if (parameter_count(c) <= 0 || ssm_state_bytes_per_sequence(c, 2) < 0 || kv_bytes_per_token(c, 2) < 0) std::abort();
  (void)cache_spec(c);
  return 0;
}
