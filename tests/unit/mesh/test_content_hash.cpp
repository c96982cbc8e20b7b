// Content hash and the broadcast property (src/mesh/content_hash.h, named_tensors.h): equal bits
// give equal hashes, one flipped bit changes it, and two nodes applying the same encoded delta to
// equal weights end bit-identical.
//   build-codec/tests/test_mesh --gtest_filter='ContentHash*:Broadcast*'
#include <gtest/gtest.h>

#include <cstring>

#include "mesh/codec.h"
#include "mesh/content_hash.h"

namespace meshrl::mesh {
namespace {

NamedTensors params(uint64_t seed) {
  torch::manual_seed(seed);
  return NamedTensors{{"embed", "layers.0.w", "norm"},
                      {torch::randn({64, 16}) * 0.02, torch::randn({16, 48}) * 0.02, torch::ones({16})}};
}

TEST(ContentHash, DeterministicAndFormatted) {
  const auto h = content_hash(params(1));
  EXPECT_EQ(h.size(), 32u);
  EXPECT_EQ(h.find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_EQ(h, content_hash(params(1)));
  EXPECT_EQ(h, content_hash(clone_named_tensors(params(1))));
  EXPECT_NE(h, content_hash(params(2)));
  // An empty set has a fixed, non-trivial hash.
  EXPECT_EQ(content_hash(NamedTensors{}), content_hash(NamedTensors{}));
  EXPECT_NE(content_hash(NamedTensors{}), std::string(32, '0'));
}

TEST(ContentHash, EverySingleBitFlipOfAValueChangesIt) {
  auto p = params(3);
  const auto base = content_hash(p);
  auto& t = p.tensors[1];
  auto* bytes = reinterpret_cast<uint8_t*>(t.data_ptr<float>());
  const size_t n_bytes = static_cast<size_t>(t.numel()) * 4;
  // Every bit of a few values spread over the tensor, including the sign bit of the last.
  for (size_t byte : {size_t{0}, size_t{1}, n_bytes / 2, n_bytes - 1})
    for (int bit = 0; bit < 8; ++bit) {
      bytes[byte] ^= static_cast<uint8_t>(1u << bit);
      EXPECT_NE(content_hash(p), base) << "byte " << byte << " bit " << bit;
      bytes[byte] ^= static_cast<uint8_t>(1u << bit);
    }
  EXPECT_EQ(content_hash(p), base) << "restored";
  // -0.0 and +0.0 compare equal as floats but are different bits: the hash tells them apart.
  NamedTensors pz{{"z"}, {torch::zeros({4})}}, nz{{"z"}, {-torch::zeros({4})}};
  EXPECT_NE(content_hash(pz), content_hash(nz));
}

TEST(ContentHash, NamesShapesOrderAndDtypeCount) {
  auto p = params(4);
  const auto base = content_hash(p);
  auto renamed = clone_named_tensors(p);
  renamed.names[2] = "norm2";
  EXPECT_NE(content_hash(renamed), base);
  auto reshaped = clone_named_tensors(p);
  reshaped.tensors[0] = reshaped.tensors[0].reshape({16, 64});  // same bytes, other shape
  EXPECT_NE(content_hash(reshaped), base);
  NamedTensors swapped{{p.names[1], p.names[0], p.names[2]}, {p.tensors[1], p.tensors[0], p.tensors[2]}};
  EXPECT_NE(content_hash(swapped), base);
  // Same bytes reinterpreted as int32: the dtype is hashed.
  NamedTensors as_int{{"w"}, {p.tensors[0].view(torch::kInt32)}};
  NamedTensors as_float{{"w"}, {p.tensors[0]}};
  EXPECT_NE(content_hash(as_int), content_hash(as_float));
  // A non-contiguous view hashes as its logical (row-major) contents.
  auto t = torch::randn({8, 5});
  EXPECT_EQ(content_hash(NamedTensors{{"t"}, {t.t()}}), content_hash(NamedTensors{{"t"}, {t.t().contiguous()}}));
}

TEST(Broadcast, TwoIndependentDecodesAppliedToEqualParamsAreBitIdentical) {
  for (auto id : {CodecId::kFp32, CodecId::kInt8, CodecId::kInt4}) {
    auto codec = make_codec({id, 64, 3, false}).value();
    auto coordinator = params(5);
    auto node_a = clone_named_tensors(coordinator);
    auto node_b = clone_named_tensors(coordinator);
    ASSERT_EQ(content_hash(node_a), content_hash(coordinator));
    for (int round = 0; round < 5; ++round) {
      torch::manual_seed(100 + round);
      NamedTensors delta{coordinator.names,
                         {torch::randn({64, 16}) * 1e-3, torch::randn({16, 48}) * 1e-4, torch::randn({16}) * 1e-2}};
      // The coordinator applies exactly what it sends: its own decode of its own bytes.
      const std::string wire = codec->encode(delta).value();
      const std::string copy_a(wire), copy_b(wire);  // separate buffers, as on separate machines
      ASSERT_TRUE(apply_delta(coordinator, codec->decode(wire, {1 << 20, 16}).value()).is_ok());
      ASSERT_TRUE(apply_delta(node_a, decode_update(copy_a, {1 << 20, 16}).value()).is_ok());
      ASSERT_TRUE(apply_delta(node_b, decode_update(copy_b, {1 << 20, 16}).value()).is_ok());
      const auto h = content_hash(coordinator);
      EXPECT_EQ(content_hash(node_a), h) << codec_name(id) << " round " << round;
      EXPECT_EQ(content_hash(node_b), h) << codec_name(id) << " round " << round;
    }
    // And the lossy codecs really were lossy: applying the raw delta would have diverged.
    if (id != CodecId::kFp32) {
      auto exact = params(5);
      for (int round = 0; round < 5; ++round) {
        torch::manual_seed(100 + round);
        NamedTensors delta{exact.names,
                           {torch::randn({64, 16}) * 1e-3, torch::randn({16, 48}) * 1e-4, torch::randn({16}) * 1e-2}};
        ASSERT_TRUE(apply_delta(exact, delta).is_ok());
      }
      EXPECT_NE(content_hash(exact), content_hash(coordinator));
    }
  }
}

TEST(Broadcast, ApplyDeltaWorksThroughViewsAndRefusesOtherLayouts) {
  auto base = torch::zeros({4, 6});
  NamedTensors view{{"w"}, {base.narrow(1, 0, 3)}};  // a view, like hf_tensors() of a fused weight
  NamedTensors delta{{"w"}, {torch::ones({4, 3})}};
  ASSERT_TRUE(apply_delta(view, delta).is_ok());
  EXPECT_EQ(base.sum().item<float>(), 12.0f);
  NamedTensors wrong_shape{{"w"}, {torch::ones({3, 4})}};
  NamedTensors wrong_name{{"v"}, {torch::ones({4, 3})}};
  EXPECT_NE(apply_delta(view, wrong_shape).message().find("shape"), std::string::npos);
  EXPECT_NE(apply_delta(view, wrong_name).message().find("'w' vs 'v'"), std::string::npos);
  EXPECT_EQ(base.sum().item<float>(), 12.0f) << "a refused delta changes nothing";
}

}  // namespace
}  // namespace meshrl::mesh
