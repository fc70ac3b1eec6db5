// DenseCache: step validation leaves the cache untouched on error; fork is
// a deep copy; release frees; byte accounting counts what is held.
#include <gtest/gtest.h>

#include "replayssm/model.h"
#include "backend/cpu/dense_cache.h"
#include "test_util.h"

namespace replayssm {
namespace {

class DenseCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto m = Model::load(test::data_dir("nemotron_h_tiny"));
    ASSERT_TRUE(m.ok()) << m.status().message();
    model_ = std::move(m).value();
  }
  // Feeds `ids` to `seq` and returns the last row's logits.
  std::vector<float> feed(DenseCache& c, int64_t seq, const std::vector<int32_t>& ids) {
    const int64_t n = static_cast<int64_t>(ids.size()), last = n - 1;
    SeqSlice s{seq, c.length(seq), n, 0};
    std::vector<float> out(model_->config().vocab_size);
    Status st = model_->forward({&s, 1}, ids, c, {&last, 1}, out.data());
    EXPECT_TRUE(st.ok()) << st.message();
    return out;
  }
  std::unique_ptr<Model> model_;
};

TEST_F(DenseCacheTest, StepValidation) {
  DenseCache c(cache_spec(model_->config()));
  const int64_t a = c.add_sequence();
  std::vector<float> out(97);
  const int32_t tok = 3;
  const int64_t row = 0;
  SeqSlice unknown{a + 5, 0, 1, 0}, wrong_pos{a, 2, 1, 0};
  EXPECT_EQ(model_->forward({&unknown, 1}, {&tok, 1}, c, {&row, 1}, out.data()).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(model_->forward({&wrong_pos, 1}, {&tok, 1}, c, {&row, 1}, out.data()).code(), StatusCode::kInvalidArgument);
  SeqSlice twice[2] = {{a, 0, 1, 0}, {a, 0, 1, 1}};
  const int32_t toks[2] = {3, 4};
  EXPECT_EQ(model_->forward(twice, toks, c, {&row, 1}, out.data()).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(c.length(a), 0);  // nothing happened
  EXPECT_EQ(c.kv_bytes(), 0u);
}

TEST_F(DenseCacheTest, ForkIsIndependentDeepCopy) {
  DenseCache c(cache_spec(model_->config()));
  const int64_t a = c.add_sequence();
  feed(c, a, {5, 9, 11, 2});
  auto f = c.fork(a);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(c.length(*f), 4);
  auto la = feed(c, a, {7, 7});
  auto lf = feed(c, *f, {8});
  // The fork continues exactly as a fresh sequence with the same tokens.
  DenseCache fresh(cache_spec(model_->config()));
  const int64_t s = fresh.add_sequence();
  EXPECT_EQ(feed(fresh, s, {5, 9, 11, 2, 8}), lf);
  const int64_t s2 = fresh.add_sequence();
  EXPECT_EQ(feed(fresh, s2, {5, 9, 11, 2, 7, 7}), la);
}

TEST_F(DenseCacheTest, ReleaseAndBytes) {
  const ModelConfig& cfg = model_->config();
  DenseCache c(cache_spec(cfg));
  const int64_t a = c.add_sequence(), b = c.add_sequence();
  EXPECT_EQ(c.state_bytes(), 2u * static_cast<size_t>(ssm_state_bytes_per_sequence(cfg, 4)));
  feed(c, a, {1, 2, 3});
  EXPECT_EQ(c.kv_bytes(), 3u * static_cast<size_t>(kv_bytes_per_token(cfg, 4)));
  ASSERT_TRUE(c.release(a).ok());
  EXPECT_FALSE(c.release(a).ok());
  EXPECT_EQ(c.length(a), -1);
  EXPECT_EQ(c.kv_bytes(), 0u);
  EXPECT_EQ(c.state_bytes(), static_cast<size_t>(ssm_state_bytes_per_sequence(cfg, 4)));
  ASSERT_TRUE(c.release(b).ok());
  EXPECT_EQ(c.state_bytes(), 0u);
}

}  // namespace
}  // namespace replayssm
