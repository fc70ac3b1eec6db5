// Safetensors and checkpoint loading: valid files read exactly; every kind
// of damage is a Status naming the file and tensor, never a crash.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/dtype.h"
#include "io/safetensors.h"
#include "replayssm/model.h"
#include "test_util.h"

namespace replayssm {
namespace {

namespace fs = std::filesystem;
using test::TempDir;

// Writes 8-byte length + header + data; `hlen_override` fakes the length.
void write_raw(const std::string& path, const std::string& header, const std::string& data,
               int64_t hlen_override = -1) {
  std::ofstream out(path, std::ios::binary);
  uint64_t n = hlen_override >= 0 ? static_cast<uint64_t>(hlen_override) : header.size();
  for (int i = 0; i < 8; ++i) out.put(static_cast<char>((n >> (8 * i)) & 0xff));
  out << header << data;
}

struct RawTensor {
  std::string dtype;
  std::vector<int64_t> shape;
  std::string bytes;
};

// A well-formed file holding `tensors` in order.
void write_tensors(const std::string& path, const std::map<std::string, RawTensor>& tensors) {
  nlohmann::json h = nlohmann::json::object();
  std::string data;
  for (const auto& [name, t] : tensors) {
    h[name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {data.size(), data.size() + t.bytes.size()}}};
    data += t.bytes;
  }
  h["__metadata__"] = {{"format", "pt"}};
  write_raw(path, h.dump(), data);
}

std::string f32_bytes(const std::vector<float>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4);
}

TEST(Safetensors, ReadsF32Bf16F16Exactly) {
  TempDir dir;
  std::string bf, hf;
  for (float x : {1.0f, -2.5f, 0.15625f}) {
    uint16_t b = f32_to_bf16(x);
    bf.append(reinterpret_cast<const char*>(&b), 2);
  }
  for (uint16_t h : {uint16_t{0x3c00}, uint16_t{0xc100}, uint16_t{0x0001}}) hf.append(reinterpret_cast<const char*>(&h), 2);
  write_tensors(dir.file("model.safetensors"), {{"a", {"F32", {2, 2}, f32_bytes({1, 2, 3, 4})}},
                                                {"b", {"BF16", {3}, bf}},
                                                {"h", {"F16", {3}, hf}}});
  auto ck = Checkpoint::open_dir(dir.path());
  ASSERT_TRUE(ck.ok()) << ck.status().message();
  std::vector<float> v;
  ASSERT_TRUE(ck->read_f32("a", {2, 2}, &v).ok());
  EXPECT_EQ(v, (std::vector<float>{1, 2, 3, 4}));
  ASSERT_TRUE(ck->read_f32("b", {3}, &v).ok());
  EXPECT_EQ(v, (std::vector<float>{1.0f, -2.5f, 0.15625f}));
  ASSERT_TRUE(ck->read_f32("h", {3}, &v).ok());
  EXPECT_EQ(v[0], 1.0f);
  EXPECT_EQ(v[1], -2.5f);
  EXPECT_EQ(v[2], std::ldexp(1.0f, -24));  // smallest f16 subnormal
}

void expect_error(const Status& st, StatusCode code, const std::vector<std::string>& parts) {
  EXPECT_EQ(st.code(), code) << st.message();
  for (const std::string& p : parts) EXPECT_NE(st.message().find(p), std::string::npos) << st.message();
}

TEST(Safetensors, ShortFile) {
  TempDir dir;
  std::ofstream(dir.file("model.safetensors")) << "abc";
  expect_error(Checkpoint::open_dir(dir.path()).status(), StatusCode::kCorrupt,
               {dir.file("model.safetensors"), "too short"});
}

TEST(Safetensors, HeaderLengthPastEnd) {
  TempDir dir;
  write_raw(dir.file("model.safetensors"), "{}", "", 1 << 20);
  expect_error(Checkpoint::open_dir(dir.path()).status(), StatusCode::kCorrupt,
               {"header length", "truncated"});
}

TEST(Safetensors, HeaderNotJson) {
  TempDir dir;
  write_raw(dir.file("model.safetensors"), "{\"a\": [", "");
  expect_error(Checkpoint::open_dir(dir.path()).status(), StatusCode::kCorrupt, {"not a JSON object"});
}

TEST(Safetensors, OffsetsPastEndOfData) {
  TempDir dir;
  write_raw(dir.file("model.safetensors"),
            R"({"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}})", std::string(8, '\0'));
  expect_error(Checkpoint::open_dir(dir.path()).status(), StatusCode::kCorrupt,
               {"'w'", "past the end"});
}

TEST(Safetensors, ShapeDisagreesWithOffsets) {
  TempDir dir;
  write_raw(dir.file("model.safetensors"),
            R"({"w": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 20]}})", std::string(20, '\0'));
  expect_error(Checkpoint::open_dir(dir.path()).status(), StatusCode::kCorrupt,
               {"'w'", "needs 24 bytes", "span 20"});
}

TEST(Safetensors, BadEntries) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"w": {"dtype": "F7", "shape": [1], "data_offsets": [0, 4]}})", "unknown dtype"},
      {R"({"w": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}})", "bad shape"},
      {R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [4, 0]}})", "begin > end"},
      {R"({"w": {"dtype": "F32", "shape": [1]}})", "missing data_offsets"},
      {R"({"w": 3})", "not an object"},
      {R"({"w": {"dtype": 7, "shape": [1], "data_offsets": [0, 4]}})", "dtype must be a string, got 7"},
      {R"({"w": {"dtype": "F32", "shape": "1", "data_offsets": [0, 4]}})", "shape must be a list"},
      {R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [4]}})", "data_offsets must be [begin, end]"},
  };
  for (const auto& [header, what] : cases) {
    TempDir dir;
    write_raw(dir.file("model.safetensors"), header, std::string(4, '\0'));
    expect_error(Checkpoint::open_dir(dir.path()).status(), StatusCode::kCorrupt, {"'w'", what});
  }
}

// The reference reader's rule: the tensors tile the data exactly. A tensor
// reading another's bytes, a hole, or bytes past the last tensor is damage.
TEST(Safetensors, TensorsMustTileTheData) {
  const std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
      {R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
           "b": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})", {"'b' starts at byte 4", "'a' ends at byte 8"}},
      {R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
           "b": {"dtype": "F32", "shape": [1], "data_offsets": [8, 12]}})", {"'b' starts at byte 8", "'a' ends at byte 4"}},
      {R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]},
           "b": {"dtype": "F32", "shape": [1], "data_offsets": [8, 12]}})", {"'a' starts at byte 4", "the data starts"}},
      {R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
           "b": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})", {"4 bytes after the last tensor"}},
  };
  for (const auto& [header, what] : cases) {
    TempDir dir;
    write_raw(dir.file("model.safetensors"), header, std::string(12, '\0'));
    expect_error(Checkpoint::open_dir(dir.path()).status(), StatusCode::kCorrupt, what);
  }
  // Stored out of name order, and a zero-size tensor anywhere: still a tiling.
  TempDir dir;
  write_raw(dir.file("model.safetensors"),
            R"({"z": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
                "a": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]},
                "e": {"dtype": "F32", "shape": [0], "data_offsets": [4, 4]}})",
            std::string(12, '\0'));
  auto ck = Checkpoint::open_dir(dir.path());
  ASSERT_TRUE(ck.ok()) << ck.status().message();
  // A zero-size tensor reads as no values (its copy once passed memcpy a
  // null destination, undefined even for 0 bytes).
  std::vector<float> v = {1.0f};
  ASSERT_TRUE(ck->read_f32("e", {0}, &v).ok());
  EXPECT_TRUE(v.empty());
}

TEST(Safetensors, UnsupportedDtypeIsReportedWhenRead) {
  TempDir dir;
  write_tensors(dir.file("model.safetensors"), {{"i", {"I32", {1}, std::string(4, '\0')}}});
  auto ck = Checkpoint::open_dir(dir.path());
  ASSERT_TRUE(ck.ok());
  std::vector<float> v;
  expect_error(ck->read_f32("i", {1}, &v), StatusCode::kUnsupported, {"'i'", "I32"});
}

TEST(Safetensors, NoWeightsInDirectory) {
  TempDir dir;
  expect_error(Checkpoint::open_dir(dir.path()).status(), StatusCode::kNotFound,
               {"no model.safetensors"});
}

TEST(Safetensors, ShardIndexErrors) {
  TempDir dir;
  write_tensors(dir.file("s1.safetensors"), {{"a", {"F32", {1}, f32_bytes({1})}}});
  std::ofstream(dir.file("model.safetensors.index.json"))
      << R"({"weight_map": {"a": "s1.safetensors", "b": "s2.safetensors"}})";
  expect_error(Checkpoint::open_dir(dir.path()).status(), StatusCode::kNotFound, {"s2.safetensors"});
  std::ofstream(dir.file("model.safetensors.index.json"))
      << R"({"weight_map": {"a": "s1.safetensors", "b": "s1.safetensors"}})";
  expect_error(Checkpoint::open_dir(dir.path()).status(), StatusCode::kCorrupt,
               {"'b'", "absent"});
  std::ofstream(dir.file("model.safetensors.index.json")) << R"({"weight_map": {"a": "../x"}})";
  expect_error(Checkpoint::open_dir(dir.path()).status(), StatusCode::kCorrupt, {"leaves"});
}

// A fixture model copied to a scratch directory, to damage.
class DamagedModel : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* f : {"config.json", "model.safetensors"})
      fs::copy_file(test::data_dir("nemotron_h_tiny") + "/" + f, dir_.file(f));
  }
  TempDir dir_;
};

TEST_F(DamagedModel, IntactCopyLoads) {
  auto m = Model::load(dir_.path());
  EXPECT_TRUE(m.ok()) << m.status().message();
}

TEST_F(DamagedModel, TruncatedFile) {
  const std::string f = dir_.file("model.safetensors");
  fs::resize_file(f, fs::file_size(f) - 100);
  expect_error(Model::load(dir_.path()).status(), StatusCode::kCorrupt, {f, "past the end", "truncated"});
}

TEST_F(DamagedModel, MissingTensor) {
  auto src = SafetensorsFile::open(test::data_dir("nemotron_h_tiny") + "/model.safetensors");
  ASSERT_TRUE(src.ok());
  std::map<std::string, RawTensor> keep;
  for (const auto& [name, t] : (*src)->tensors())
    if (name != "backbone.layers.3.mixer.dt_bias")
      keep[name] = {t.dtype_name, t.shape, std::string(reinterpret_cast<const char*>(t.data), t.nbytes)};
  write_tensors(dir_.file("model.safetensors"), keep);
  expect_error(Model::load(dir_.path()).status(), StatusCode::kNotFound,
               {"missing tensor 'backbone.layers.3.mixer.dt_bias'"});
}

TEST_F(DamagedModel, ShapeMismatchWithConfig) {
  auto cfg = test::read_json(dir_.file("config.json"));
  cfg["ssm_state_size"] = 13;
  std::ofstream(dir_.file("config.json")) << cfg.dump();
  expect_error(Model::load(dir_.path()).status(), StatusCode::kCorrupt,
               {"backbone.layers.0.mixer.in_proj.weight", "config expects"});
}

// A layer list cut short would run the first layers as the whole model.
TEST_F(DamagedModel, LayersPastTheConfig) {
  auto cfg = test::read_json(dir_.file("config.json"));
  cfg.erase("layers_block_type");
  cfg["hybrid_override_pattern"] = "M*-";
  std::ofstream(dir_.file("config.json")) << cfg.dump();
  expect_error(Model::load(dir_.path()).status(), StatusCode::kInvalidArgument,
               {dir_.path(), "belongs to layer 3 but the config has 3 layers"});
}

}  // namespace
}  // namespace replayssm
