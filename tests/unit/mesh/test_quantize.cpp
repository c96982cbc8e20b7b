// Blockwise quantisation (src/mesh/quantize.h): every element within the stated bound, exactly.
//   build-codec/tests/test_mesh --gtest_filter='Quantize*'
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "core/check.h"
#include "mesh/quantize.h"

namespace meshrl::mesh {
namespace {

struct RoundTrip {
  std::vector<float> scales;
  std::vector<int8_t> codes;
  std::vector<float> out;
};

RoundTrip round_trip(const std::vector<float>& x, int level, const QuantizeConfig& cfg) {
  RoundTrip r;
  r.scales.resize(quant_n_blocks(x.size(), cfg.block_size));
  r.codes.resize(x.size());
  r.out.resize(x.size());
  quantize_blockwise(x, level, cfg, r.scales, r.codes);
  dequantize_blockwise(r.scales, r.codes, cfg.block_size, r.out);
  return r;
}

// Checks the header's promises for every element: codes in range, |x - deq| within the bound,
// scale the smallest float with scale * L >= absmax (so not needlessly coarse).
void expect_within_bound(const std::vector<float>& x, int level, const QuantizeConfig& cfg) {
  auto r = round_trip(x, level, cfg);
  for (size_t i = 0; i < x.size(); ++i) {
    const size_t b = i / cfg.block_size;
    ASSERT_GE(r.codes[i], -level) << i;
    ASSERT_LE(r.codes[i], level) << i;
    const double err = std::fabs(static_cast<double>(x[i]) - static_cast<double>(r.out[i]));
    ASSERT_LE(err, quant_error_bound(r.scales[b], cfg.stochastic_rounding))
        << "element " << i << " x=" << x[i] << " deq=" << r.out[i] << " scale=" << r.scales[b];
  }
  for (size_t b = 0; b < r.scales.size(); ++b) {
    double absmax = 0;
    for (size_t i = b * cfg.block_size; i < std::min(x.size(), (b + 1) * cfg.block_size); ++i)
      absmax = std::max(absmax, std::fabs(static_cast<double>(x[i])));
    EXPECT_GE(static_cast<double>(r.scales[b]) * level, absmax) << "block " << b;
    if (absmax > 0) {
      const float smaller = std::nextafter(r.scales[b], 0.0f);
      EXPECT_LT(static_cast<double>(smaller) * level, absmax) << "block " << b << " scale not the smallest";
    } else {
      EXPECT_EQ(r.scales[b], 0.0f);
    }
  }
}

std::vector<float> gaussian(size_t n, double std, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> d(0.0, std);
  std::vector<float> v(n);
  for (auto& x : v) x = static_cast<float>(d(rng));
  return v;
}

class QuantizeLevels : public ::testing::TestWithParam<int> {};

TEST_P(QuantizeLevels, GaussianWithinBoundForManyBlockSizesAndRaggedLengths) {
  const int level = GetParam();
  for (size_t bs : {1, 7, 64, 100}) {
    for (size_t n : {0, 1, 63, 64, 65, 1001}) {
      QuantizeConfig cfg;
      cfg.block_size = bs;
      SCOPED_TRACE("block " + std::to_string(bs) + " n " + std::to_string(n));
      expect_within_bound(gaussian(n, 1e-3, n * 31 + bs), level, cfg);
    }
  }
}

TEST_P(QuantizeLevels, AllZeroAndConstantBlocks) {
  const int level = GetParam();
  QuantizeConfig cfg;
  auto zeros = round_trip(std::vector<float>(130, 0.0f), level, cfg);
  for (float v : zeros.out) EXPECT_EQ(v, 0.0f);
  for (float s : zeros.scales) EXPECT_EQ(s, 0.0f);
  for (float c : {1.0f, -3.25f, 1e-30f, 7e37f}) {
    std::vector<float> x(130, c);
    expect_within_bound(x, level, cfg);
    // A constant block hits the top level exactly: scale = |c| / L rounded up, code = +-L.
    auto r = round_trip(x, level, cfg);
    EXPECT_EQ(std::abs(r.codes[0]), level);
    EXPECT_NEAR(r.out[0], c, std::fabs(c) * 1e-6);
  }
}

TEST_P(QuantizeLevels, DenormalsAndTinyValues) {
  const int level = GetParam();
  QuantizeConfig cfg;
  cfg.block_size = 16;
  std::vector<float> x;
  const float tmin = std::numeric_limits<float>::denorm_min();
  for (int i = 0; i < 64; ++i) x.push_back(static_cast<float>((i % 2 ? -1 : 1) * (i + 1)) * tmin);  // subnormal
  for (int i = 0; i < 16; ++i) x.push_back(FLT_MIN * static_cast<float>(i - 8) / 3.0f);             // around FLT_MIN
  x.push_back(tmin);  // a ragged last block holding only the smallest subnormal
  expect_within_bound(x, level, cfg);
  auto r = round_trip(x, level, cfg);
  EXPECT_GT(r.scales.back(), 0.0f) << "a non-zero block must keep a non-zero scale";
}

TEST_P(QuantizeLevels, SingleHugeOutlierBlock) {
  const int level = GetParam();
  QuantizeConfig cfg;
  auto x = gaussian(256, 1e-3, 7);
  x[70] = 3e38f;     // near FLT_MAX: scale * L must not overflow
  x[200] = -1e20f;
  expect_within_bound(x, level, cfg);
  auto r = round_trip(x, level, cfg);
  EXPECT_TRUE(std::isfinite(r.out[70]));
  EXPECT_EQ(r.codes[70], level);
  // The outlier only costs its own block: block 0's range (scale x L = its absmax, a few sigma of
  // 1e-3) is untouched by it.
  EXPECT_LT(r.scales[0] * level, 5e-3);
}

TEST_P(QuantizeLevels, StochasticRoundingBoundAndUnbiased) {
  const int level = GetParam();
  QuantizeConfig cfg;
  cfg.stochastic_rounding = true;
  cfg.seed = 1234;
  expect_within_bound(gaussian(1000, 1.0, 3), level, cfg);
  // A value a third of a step above a level: the mean over many seeds approaches it, while round to
  // nearest always gives the lower level.
  std::vector<float> x(64, 0.0f);
  x[0] = static_cast<float>(level);  // fixes scale = 1
  x[1] = 1.0f / 3.0f;
  double sum = 0;
  const int trials = 4000;
  for (int s = 0; s < trials; ++s) {
    cfg.seed = s;
    sum += round_trip(x, level, cfg).out[1];
  }
  EXPECT_NEAR(sum / trials, 1.0 / 3.0, 0.03);
  cfg.stochastic_rounding = false;
  EXPECT_EQ(round_trip(x, level, cfg).out[1], 0.0f);
}

INSTANTIATE_TEST_SUITE_P(Quantize, QuantizeLevels, ::testing::Values(kInt8MaxLevel, kInt4MaxLevel, kInt2MaxLevel),
                         [](const auto& info) {
                           return info.param == kInt8MaxLevel ? "int8" : info.param == kInt4MaxLevel ? "int4" : "int2";
                         });

TEST(Quantize, Int4PackingOddAndEvenLengths) {
  for (size_t n : {0, 1, 2, 3, 15, 16, 17}) {
    std::vector<int8_t> codes(n);
    for (size_t i = 0; i < n; ++i) codes[i] = static_cast<int8_t>(static_cast<int>(i * 5 % 16) - 8);  // -8..7
    std::vector<uint8_t> packed((n + 1) / 2);
    pack_int4(codes, packed);
    if (n % 2 == 1) {
      EXPECT_EQ(packed.back() >> 4, 0) << "padding nibble must be 0";
    }
    if (n >= 2) {
      EXPECT_EQ(packed[0], static_cast<uint8_t>((codes[0] & 0xF) | ((codes[1] & 0xF) << 4)));
    }
    std::vector<int8_t> back(n);
    unpack_int4(packed, back);
    EXPECT_EQ(back, codes) << "n = " << n;
  }
}

TEST(Quantize, Int2PackingEveryLengthModFour) {
  for (size_t n : {0, 1, 2, 3, 4, 5, 6, 7, 8, 13}) {
    std::vector<int8_t> codes(n);
    for (size_t i = 0; i < n; ++i) codes[i] = static_cast<int8_t>(static_cast<int>(i * 3 % 4) - 2);  // -2..1
    std::vector<uint8_t> packed((n + 3) / 4);
    pack_int2(codes, packed);
    if (n % 4 != 0) {
      EXPECT_EQ(packed.back() >> (2 * (n % 4)), 0) << "padding bits must be 0, n = " << n;
    }
    if (n >= 4) {
      uint8_t want = 0;
      for (int j = 0; j < 4; ++j) want = static_cast<uint8_t>(want | ((codes[j] & 0x3) << (2 * j)));
      EXPECT_EQ(packed[0], want);
    }
    std::vector<int8_t> back(n);
    unpack_int2(packed, back);
    EXPECT_EQ(back, codes) << "n = " << n;
  }
}

TEST(Quantize, Int2IsTernaryAndContractive) {
  // Ternary codes keep the sign of every value at least half its block's absmax and zero the rest,
  // so ||deq - x|| < ||x|| (the error feedback of codec.h then converges): on N(0,1), block 64,
  // about 0.72 of ||x||, against 0.108 for int4.
  auto x = gaussian(1 << 16, 1.0, 11);
  auto r = round_trip(x, kInt2MaxLevel, QuantizeConfig{});
  double num = 0, den = 0;
  size_t nonzero = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    ASSERT_GE(r.codes[i], -1);
    ASSERT_LE(r.codes[i], 1);
    if (r.codes[i] != 0) {
      ++nonzero;
      EXPECT_EQ(r.codes[i] > 0, x[i] > 0);
    }
    num += std::pow(static_cast<double>(r.out[i]) - x[i], 2);
    den += static_cast<double>(x[i]) * x[i];
  }
  EXPECT_LT(std::sqrt(num / den), 0.9);
  EXPECT_GT(std::sqrt(num / den), 0.5);
  // |x| > absmax / 2 (about 1.2 sigma for 64 Gaussian values) for roughly a fifth of the values.
  EXPECT_NEAR(static_cast<double>(nonzero) / x.size(), 0.22, 0.05);
}

TEST(Quantize, Int8ErrorOnGaussianIsSmall) {
  // ||deq - x|| / ||x|| on N(0,1), block 64: about 0.006 for int8 and 0.108 for int4 (quantize.h).
  auto x = gaussian(1 << 16, 1.0, 11);
  QuantizeConfig cfg;
  for (int level : {kInt8MaxLevel, kInt4MaxLevel}) {
    auto r = round_trip(x, level, cfg);
    double num = 0, den = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      num += std::pow(static_cast<double>(r.out[i]) - x[i], 2);
      den += static_cast<double>(x[i]) * x[i];
    }
    const double rel = std::sqrt(num / den);
    if (level == kInt8MaxLevel) EXPECT_NEAR(rel, 0.0059, 0.0006);
    else EXPECT_NEAR(rel, 0.108, 0.006);
  }
}

TEST(Quantize, NonFiniteInputIsABrokenInvariant) {
  // Callers (write_update) validate input first; quantising a NaN anyway must stop loudly, not
  // produce a code from an undefined conversion.
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    std::vector<float> x(10, 1.0f);
    x[3] = bad;
    QuantizeConfig cfg;
    EXPECT_THROW(round_trip(x, kInt8MaxLevel, cfg), CheckFailure);
  }
}

}  // namespace
}  // namespace meshrl::mesh
