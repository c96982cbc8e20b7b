// Safetensors <-> libtorch: every dtype round-trips bit-exactly, re-saving is byte-identical.
//   cmake --build build --target test_model && build/tests/test_model --gtest_filter='SafetensorsTorch*'
#include <gtest/gtest.h>

#include "core/file_io.h"
#include "model/safetensors_torch.h"
#include "support/temp_dir.h"

namespace meshrl::model {
namespace {
namespace fs = std::filesystem;

// Bit patterns, so NaN payloads and -0.0 count.
bool same_bits(const torch::Tensor& a, const torch::Tensor& b) {
  if (a.scalar_type() != b.scalar_type() || a.sizes() != b.sizes()) return false;
  if (a.numel() == 0) return true;  // an empty tensor's data pointer may be null: memcmp must not see it
  auto ac = a.contiguous(), bc = b.contiguous();
  return std::memcmp(ac.data_ptr(), bc.data_ptr(), ac.numel() * ac.element_size()) == 0;
}

TEST(SafetensorsTorch, EveryDtypeRoundTripsExactly) {
  torch::manual_seed(7);
  auto f32 = torch::randn({3, 5});
  auto specials = torch::tensor({0.0f, -0.0f, 1.0f / 3, 65504.0f, 1e-7f, std::numeric_limits<float>::infinity(),
                                 -std::numeric_limits<float>::infinity(), std::nanf("")});
  std::vector<std::pair<std::string, torch::Tensor>> in = {
      {"f32", f32},
      {"f16", torch::cat({torch::randn({17}), specials}).to(torch::kFloat16)},
      {"bf16", torch::cat({torch::randn({17}), specials}).to(torch::kBFloat16)},
      {"f64", torch::randn({2, 2}, torch::kFloat64)},
      {"i64", torch::randint(-(int64_t{1} << 40), int64_t{1} << 40, {4}, torch::kInt64)},
      {"i32", torch::randint(-100000, 100000, {4}, torch::kInt32)},
      {"i16", torch::randint(-30000, 30000, {4}, torch::kInt16)},
      {"i8", torch::randint(-128, 127, {4}, torch::kInt8)},
      {"u8", torch::randint(0, 255, {4}, torch::kUInt8)},
      {"bool", torch::tensor({true, false, true})},
      {"scalar", torch::tensor(2.5f)},
      {"empty", torch::zeros({0, 3})},
  };
  const test_support::TempDir tmp;
  const fs::path dir = tmp.path();
  auto st = write_safetensors(dir / "t.safetensors", in, {{"format", "pt"}, {"note", "hi"}});
  ASSERT_TRUE(st.is_ok()) << st.message();
  auto back = read_safetensors_with_metadata(dir / "t.safetensors");
  ASSERT_TRUE(back.is_ok()) << back.status().message();
  EXPECT_EQ(back->metadata.at("note"), "hi");
  ASSERT_EQ(back->tensors.size(), in.size());
  for (const auto& [name, t] : in) {
    const auto& b = back->tensors.at(name);
    EXPECT_TRUE(same_bits(t, b)) << name;
    EXPECT_EQ(b.device().type(), torch::kCPU);
  }
  EXPECT_EQ(back->tensors.at("scalar").dim(), 0);
  EXPECT_TRUE(std::isnan(back->tensors.at("bf16")[24].item<float>()));
}

TEST(SafetensorsTorch, ReadTensorsOwnTheirMemory) {
  const test_support::TempDir tmp;
  const fs::path dir = tmp.path();
  ASSERT_TRUE(write_safetensors(dir / "a.safetensors", {{"w", torch::arange(6, torch::kFloat32)}}).is_ok());
  auto back = read_safetensors(dir / "a.safetensors");
  ASSERT_TRUE(back.is_ok());
  fs::remove_all(dir);  // the mapping is gone; the tensor must not point into it
  EXPECT_EQ(back->at("w").sum().item<float>(), 15.0f);
  back->at("w").add_(1);  // writable
  EXPECT_EQ(back->at("w")[0].item<float>(), 1.0f);
}

TEST(SafetensorsTorch, ResaveIsByteIdentical) {
  torch::manual_seed(3);
  const test_support::TempDir tmp;
  const fs::path dir = tmp.path();
  std::vector<std::pair<std::string, torch::Tensor>> in = {
      {"b.weight", torch::randn({4, 3})}, {"a.weight", torch::randn({2})}, {"c.ids", torch::arange(5)}};
  ASSERT_TRUE(write_safetensors(dir / "1.safetensors", in, {{"format", "pt"}}).is_ok());
  auto back = read_safetensors(dir / "1.safetensors").value();
  std::vector<std::pair<std::string, torch::Tensor>> again(back.begin(), back.end());
  ASSERT_TRUE(write_safetensors(dir / "2.safetensors", again, {{"format", "pt"}}).is_ok());
  EXPECT_EQ(read_file(dir / "1.safetensors").value(), read_file(dir / "2.safetensors").value());
}

TEST(SafetensorsTorch, NonContiguousInputIsWrittenByValue) {
  const test_support::TempDir tmp;
  const fs::path dir = tmp.path();
  auto base = torch::arange(12, torch::kFloat32).reshape({3, 4});
  auto t = base.t();  // [4, 3], strided
  ASSERT_TRUE(write_safetensors(dir / "t.safetensors", {{"t", t}, {"n", base.narrow(1, 1, 2)}}).is_ok());
  auto back = read_safetensors(dir / "t.safetensors").value();
  EXPECT_TRUE(torch::equal(back.at("t"), t));
  EXPECT_TRUE(torch::equal(back.at("n"), base.narrow(1, 1, 2)));
}

TEST(SafetensorsTorch, RejectsBadBoolBytes) {
  const test_support::TempDir tmp;
  const fs::path dir = tmp.path();
  auto file = build_safetensors_file({{"flags", Dtype::BOOL, {3}, std::string("\x01\x00\x02", 3)}}, {}).value();
  ASSERT_TRUE(write_file_atomic(dir / "b.safetensors", file).is_ok());
  auto r = read_safetensors(dir / "b.safetensors");
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("tensor 'flags'"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("BOOL byte 2"), std::string::npos) << r.status().message();
}

TEST(SafetensorsTorch, ReportsFileErrors) {
  const test_support::TempDir tmp;
  const fs::path dir = tmp.path();
  auto missing = read_safetensors(dir / "nope.safetensors");
  ASSERT_FALSE(missing.is_ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  ASSERT_TRUE(write_file_atomic(dir / "empty.safetensors", std::string()).is_ok());
  auto empty = read_safetensors(dir / "empty.safetensors");
  ASSERT_FALSE(empty.is_ok());
  EXPECT_NE(empty.status().message().find("empty.safetensors"), std::string::npos);
  // A truncated file: header promises more data than there is.
  ASSERT_TRUE(write_safetensors(dir / "full.safetensors", {{"w", torch::ones({64})}}).is_ok());
  auto bytes = read_file(dir / "full.safetensors").value();
  ASSERT_TRUE(write_file_atomic(dir / "cut.safetensors", bytes.substr(0, bytes.size() - 1)).is_ok());
  auto cut = read_safetensors(dir / "cut.safetensors");
  ASSERT_FALSE(cut.is_ok());
  EXPECT_NE(cut.status().message().find("tensor 'w', field 'data_offsets'"), std::string::npos)
      << cut.status().message();
}

TEST(SafetensorsTorch, RejectsUnsupportedTensors) {
  auto r = safetensors_bytes({{"c", torch::zeros({2}, torch::kComplexFloat)}});
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("'c'"), std::string::npos);
  EXPECT_FALSE(safetensors_bytes({{"u", torch::Tensor()}}).is_ok());
  EXPECT_FALSE(safetensors_bytes({{"a", torch::zeros({1})}, {"a", torch::zeros({1})}}).is_ok());
}

TEST(SafetensorsTorch, DtypeMapping) {
  for (Dtype d : {Dtype::F32, Dtype::F16, Dtype::BF16, Dtype::F64, Dtype::I64, Dtype::I32, Dtype::I16, Dtype::I8,
                  Dtype::U8, Dtype::BOOL}) {
    EXPECT_EQ(dtype_from_torch(dtype_to_torch(d)), d);
    EXPECT_EQ(static_cast<size_t>(c10::elementSize(dtype_to_torch(d))), dtype_size(d));
  }
}

}  // namespace
}  // namespace meshrl::model
