// UpdateCodec (src/mesh/codec.h): NamedTensors round trips for every codec, with and without zstd.
//   build-codec/tests/test_mesh --gtest_filter='Codec*'
#include <gtest/gtest.h>

#include "mesh/codec.h"
#include "mesh/quantize.h"

namespace meshrl::mesh {
namespace {

NamedTensors sample_set(uint64_t seed) {
  torch::manual_seed(seed);
  NamedTensors s;
  s.names = {"model.embed_tokens.weight", "model.layers.0.mlp.down_proj.weight", "model.norm.weight", "odd"};
  s.tensors = {torch::randn({33, 16}) * 1e-3, torch::randn({16, 24}).t() * 1e-4,  // a non-contiguous view
               torch::zeros({16}), torch::randn({3, 1, 7})};
  return s;
}

const UpdateDecodeLimits kLimits{64 << 20, 1024};

TEST(Codec, Fp32IsExactWithAndWithoutZstd) {
  auto set = sample_set(1);
  for (int level : {0, 3}) {
    auto codec = make_codec({CodecId::kFp32, 64, level, false}).value();
    auto bytes = codec->encode(set).value();
    auto back = codec->decode(bytes, kLimits).value();
    ASSERT_EQ(back.names, set.names);
    for (size_t i = 0; i < set.size(); ++i) {
      EXPECT_EQ(back.tensors[i].sizes(), set.tensors[i].sizes());
      EXPECT_TRUE(torch::equal(back.tensors[i], set.tensors[i])) << set.names[i];
    }
  }
}

TEST(Codec, QuantizedRoundTripWithinTheBoundPerElement) {
  auto set = sample_set(2);
  for (auto id : {CodecId::kInt8, CodecId::kInt4, CodecId::kInt2})
    for (uint32_t block : {64u, 5u})
      for (int level : {0, 3}) {
        auto codec = make_codec({id, block, level, false}).value();
        auto back = codec->decode(codec->encode(set).value(), kLimits).value();
        ASSERT_EQ(back.names, set.names);
        const int L = id == CodecId::kInt8 ? kInt8MaxLevel : id == CodecId::kInt4 ? kInt4MaxLevel : kInt2MaxLevel;
        for (size_t i = 0; i < set.size(); ++i) {
          auto x = set.tensors[i].contiguous().flatten().to(torch::kFloat64);
          auto d = back.tensors[i].flatten().to(torch::kFloat64);
          ASSERT_EQ(back.tensors[i].sizes(), set.tensors[i].sizes());
          for (int64_t b = 0; b * block < x.numel(); ++b) {
            auto xb = x.slice(0, b * block, std::min<int64_t>(x.numel(), (b + 1) * block));
            auto db = d.slice(0, b * block, std::min<int64_t>(x.numel(), (b + 1) * block));
            // The stored scale is absmax / L rounded up, so bound with a hair over absmax / L.
            const float scale = static_cast<float>(xb.abs().max().item<double>() / L * (1 + 3e-7));
            EXPECT_LE((xb - db).abs().max().item<double>(), quant_error_bound(scale, false))
                << codec_name(id) << " " << set.names[i] << " block " << b;
          }
        }
        // The all-zero tensor stays exactly zero.
        EXPECT_TRUE(torch::equal(back.tensors[2], torch::zeros({16})));
      }
}

TEST(Codec, SmallerOnTheWireInTheExpectedOrder) {
  torch::manual_seed(3);
  NamedTensors set{{"w"}, {torch::randn({256, 256}) * 1e-3}};
  auto size = [&](CodecId id, int level) { return make_codec({id, 64, level, false}).value()->encode(set).value().size(); };
  const double n = 256.0 * 256.0;
  EXPECT_GT(size(CodecId::kFp32, 0), n * 4);               // raw floats plus a small header
  EXPECT_LT(size(CodecId::kFp32, 0), n * 4 + 100);
  EXPECT_LT(size(CodecId::kInt8, 0), n * 1.07);            // 8 + 0.5 bits per value
  EXPECT_LT(size(CodecId::kInt4, 0), n * 0.57);            // 4 + 0.5 bits per value
  EXPECT_LT(size(CodecId::kInt2, 0), n * 0.32);            // 2 + 0.5 bits per value
  // Ternary codes are mostly 0 (|x| under half the block's absmax): zstd takes them to about
  // 1 bit per value of codes, plus the scales.
  EXPECT_LT(size(CodecId::kInt2, 3), n * 0.22);
  EXPECT_LT(size(CodecId::kInt8, 3), size(CodecId::kInt8, 0));  // zstd finds the Gaussian's entropy
}

TEST(Codec, SparseTernaryIsSmallerOnTheWireAndAnyInt2ReceiverDecodesIt) {
  torch::manual_seed(3);
  NamedTensors set{{"w"}, {torch::randn({256, 256}) * 1e-3}};
  CodecConfig absmax{CodecId::kInt2, 512, 3, false}, sparse = absmax;
  sparse.int2_density = 1.0 / 16;
  const auto a = make_codec(absmax).value()->encode(set).value();
  const auto s = make_codec(sparse).value()->encode(set).value();
  const double n = 256.0 * 256.0;
  // Sparse ternary's size is set by its density, not the data: 1 in 16 is 0.40 bits of entropy
  // per value plus 0.0625 of scales; zstd 3 gets 0.67 (absmax ternary, 11% non-zero: 0.88).
  EXPECT_LT(s.size() * 8 / n, 0.70);
  EXPECT_LT(s.size(), 0.8 * a.size());
  // Same layout: a receiver configured for absmax ternary decodes it, and sees 1 value in 16.
  auto back = make_codec(absmax).value()->decode(s, kLimits).value();
  EXPECT_EQ(back.tensors[0].ne(0).sum().item<int64_t>(), static_cast<int64_t>(n / 16));
  EXPECT_EQ(back.tensors[0].sign().ne(set.tensors[0].sign()).logical_and(back.tensors[0].ne(0)).sum().item<int64_t>(), 0);
  CodecConfig int8{CodecId::kInt8, 64, 3, false};
  int8.int2_density = 0.5;
  auto refused = make_codec(int8);
  ASSERT_FALSE(refused.is_ok());
  EXPECT_NE(refused.status().message().find("int2_density must be 0, or in (0, 1] with codec int2"), std::string::npos);
}

TEST(Codec, MeanScaleTernaryCostsTheSameBytesAndSendsLessError) {
  // [mesh] int2_scale = "mean": absmax ternary's codes with least-squares scales (quantize.h).
  // Same support, so zstd sees the same codes: the size differs only in the scales' bytes; any
  // int2 receiver decodes it; the decoded update is nearer the input.
  torch::manual_seed(5);
  NamedTensors set{{"w"}, {torch::randn({256, 256}) * 1e-3}};
  CodecConfig absmax{CodecId::kInt2, 2048, 19, false}, mean = absmax;
  mean.int2_mean_scale = true;
  const auto a = make_codec(absmax).value()->encode(set).value();
  const auto m = make_codec(mean).value()->encode(set).value();
  EXPECT_NE(a, m);
  EXPECT_NEAR(static_cast<double>(m.size()), static_cast<double>(a.size()), 0.02 * a.size());
  auto da = make_codec(absmax).value()->decode(a, kLimits).value().tensors[0];
  auto dm = make_codec(absmax).value()->decode(m, kLimits).value().tensors[0];
  EXPECT_TRUE(da.ne(0).equal(dm.ne(0)));
  EXPECT_LT((dm - set.tensors[0]).norm().item<double>(), (da - set.tensors[0]).norm().item<double>());
}

TEST(Codec, StochasticRoundingIsSeeded) {
  auto set = sample_set(4);
  auto codec = make_codec({CodecId::kInt4, 64, 3, true}).value();
  EXPECT_EQ(codec->encode(set, 7).value(), codec->encode(set, 7).value());
  EXPECT_NE(codec->encode(set, 7).value(), codec->encode(set, 8).value());
  auto plain = make_codec({CodecId::kInt4, 64, 3, false}).value();
  EXPECT_EQ(plain->encode(set, 7).value(), plain->encode(set, 8).value()) << "the seed only matters when stochastic";
}

TEST(Codec, RefusesBadSetsConfigsAndAnotherCodecsBytes) {
  auto int8 = make_codec({CodecId::kInt8, 64, 3, false}).value();
  NamedTensors nan{{"w"}, {torch::tensor({1.0f, std::nanf("")})}};
  EXPECT_NE(int8->encode(nan).status().message().find("not finite"), std::string::npos);
  NamedTensors f64{{"w"}, {torch::ones({2}, torch::kFloat64)}};
  EXPECT_NE(int8->encode(f64).status().message().find("float32"), std::string::npos);
  NamedTensors uneven{{"a", "b"}, {torch::ones({2})}};
  EXPECT_FALSE(int8->encode(uneven).is_ok());
  NamedTensors dup{{"a", "a"}, {torch::ones({2}), torch::ones({2})}};
  EXPECT_NE(int8->encode(dup).status().message().find("duplicate"), std::string::npos);
  EXPECT_FALSE(make_codec({CodecId::kInt8, 0, 3, false}).is_ok());
  EXPECT_FALSE(make_codec({CodecId::kInt8, 64, 50, false}).is_ok());
  EXPECT_FALSE(make_codec({static_cast<CodecId>(9), 64, 3, false}).is_ok());
  auto int4 = make_codec({CodecId::kInt4, 64, 3, false}).value();
  auto bytes = int4->encode(sample_set(5)).value();
  auto wrong = int8->decode(bytes, kLimits);
  ASSERT_FALSE(wrong.is_ok());
  EXPECT_NE(wrong.status().message().find("codec: got int4, this run uses int8"), std::string::npos);
  EXPECT_TRUE(decode_update(bytes, kLimits).is_ok()) << "decode_update takes any codec";
  // The caller's cap applies through the torch face too.
  EXPECT_NE(int4->decode(bytes, {1000, 1024}).status().message().find("cap"), std::string::npos);
}

TEST(Codec, EmptySetAndEmptyTensors) {
  auto codec = make_codec({CodecId::kInt4, 64, 3, false}).value();
  auto empty = codec->decode(codec->encode(NamedTensors{}).value(), kLimits).value();
  EXPECT_EQ(empty.size(), 0u);
  NamedTensors zero{{"z"}, {torch::zeros({0, 5})}};
  auto back = codec->decode(codec->encode(zero).value(), kLimits).value();
  EXPECT_EQ(back.tensors[0].sizes(), torch::IntArrayRef({0, 5}));
}

}  // namespace
}  // namespace meshrl::mesh
