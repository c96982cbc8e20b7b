// Blockwise quantisation (src/mesh/quantize.h): every element within the stated bound, exactly.
//   build-codec/tests/test_mesh --gtest_filter='Quantize*'
#include <gtest/gtest.h>

#include <algorithm>
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

struct Ternary {
  std::vector<float> scales;
  std::vector<int8_t> codes;
};

Ternary topk(const std::vector<float>& x, double density, size_t block) {
  Ternary t{std::vector<float>(quant_n_blocks(x.size(), block)), std::vector<int8_t>(x.size())};
  quantize_ternary_topk(x, density, block, t.scales, t.codes);
  return t;
}

TEST(QuantizeTernaryTopk, KeepsEachBlocksLargestShareAtTheirMeanMagnitude) {
  // 1000 values in blocks of 64: 15 full blocks keep round(64 / 16) = 4, the last 40 keep
  // round(2.5) = 3 (half away from zero). Every kept magnitude is >= every dropped one in its block,
  // codes carry the sign, and the scale is the kept magnitudes' mean.
  const size_t block = 64;
  auto x = gaussian(1000, 1e-3, 21);
  auto t = topk(x, 1.0 / 16, block);
  for (size_t b = 0; b < t.scales.size(); ++b) {
    const size_t begin = b * block, end = std::min(x.size(), begin + block);
    size_t kept = 0;
    double sum = 0, min_kept = 1e30, max_dropped = 0;
    for (size_t i = begin; i < end; ++i) {
      ASSERT_GE(t.codes[i], -1);
      ASSERT_LE(t.codes[i], 1);
      const double a = std::fabs(static_cast<double>(x[i]));
      if (t.codes[i] != 0) {
        ++kept;
        sum += a;
        min_kept = std::min(min_kept, a);
        EXPECT_EQ(t.codes[i] > 0, x[i] > 0) << i;
      } else {
        max_dropped = std::max(max_dropped, a);
      }
    }
    EXPECT_EQ(kept, b + 1 < t.scales.size() ? 4u : 3u) << "block " << b;
    EXPECT_GE(min_kept, max_dropped) << "block " << b;
    EXPECT_EQ(t.scales[b], static_cast<float>(sum / static_cast<double>(kept))) << "block " << b;
  }
}

TEST(QuantizeTernaryTopk, TiesZerosAndTinyDensities) {
  // Ties at the k-th magnitude go to the lowest index; zeros are never sent; an all-zero block
  // has scale 0; a density too small for one value per block still keeps one.
  std::vector<float> x = {0, 0, 0, 0, 2, -2, 2, 0,   // block 0: k = 2 of three equal magnitudes
                          0, 0, 0, 0, 0, 0, 0, 0,    // block 1: all zero
                          0, 0, 5, 0, 0, 0, 0, 0};   // block 2: one non-zero, k = 2
  auto t = topk(x, 0.25, 8);
  EXPECT_EQ(std::vector<int8_t>(t.codes.begin(), t.codes.begin() + 8), (std::vector<int8_t>{0, 0, 0, 0, 1, -1, 0, 0}));
  EXPECT_EQ(t.scales[0], 2.0f);
  EXPECT_EQ(t.scales[1], 0.0f);
  for (size_t i = 8; i < 16; ++i) EXPECT_EQ(t.codes[i], 0);
  EXPECT_EQ(t.codes[18], 1);
  EXPECT_EQ(t.scales[2], 5.0f);
  auto one = topk(gaussian(64, 1.0, 3), 1e-6, 64);
  EXPECT_EQ(std::count_if(one.codes.begin(), one.codes.end(), [](int8_t c) { return c != 0; }), 1);
  std::vector<float> bad(10, 1.0f);
  bad[4] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_THROW(topk(bad, 0.5, 8), CheckFailure);
  EXPECT_THROW(topk(x, 0.0, 8), CheckFailure);
}

TEST(QuantizeTernaryTopk, MostOfAbsmaxTernarysEnergyFromAQuarterOfTheValues) {
  // On N(0, 1) in blocks of 512, absmax ternary sends 11.1% of the values (those above ~1.6 sigma)
  // as +-absmax: ||deq - x|| / ||x|| = 0.84, so it removes 1 - 0.84^2 = 30% of the squared error.
  // Keeping 1 in 32 at their mean magnitude sends 3.1% and removes 19% (error 0.90): two thirds
  // of the energy for under a third of the values, which is what makes its zstd output small.
  auto x = gaussian(1 << 16, 1.0, 11);
  QuantizeConfig cfg;
  cfg.block_size = 512;
  auto absmax = round_trip(x, kInt2MaxLevel, cfg);
  auto sparse = topk(x, 1.0 / 32, 512);
  std::vector<float> out(x.size());
  dequantize_blockwise(sparse.scales, sparse.codes, 512, out);
  auto rel = [&](const std::vector<float>& d) {
    double num = 0, den = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      num += std::pow(static_cast<double>(d[i]) - x[i], 2);
      den += static_cast<double>(x[i]) * x[i];
    }
    return std::sqrt(num / den);
  };
  auto nonzero = [](const std::vector<int8_t>& c) {
    return static_cast<double>(std::count_if(c.begin(), c.end(), [](int8_t v) { return v != 0; })) / c.size();
  };
  EXPECT_NEAR(nonzero(sparse.codes), 1.0 / 32, 1e-9);
  EXPECT_NEAR(nonzero(absmax.codes), 0.111, 0.005);
  EXPECT_NEAR(rel(absmax.out), 0.84, 0.01);
  EXPECT_NEAR(rel(out), 0.90, 0.01);
  EXPECT_LT(rel(out), 1.0) << "contractive, so error feedback converges";
  EXPECT_GT(1 - std::pow(rel(out), 2), 0.6 * (1 - std::pow(rel(absmax.out), 2)));
}

TEST(QuantizeTernaryMeanScale, AbsmaxCodesAtTheirMeanMagnitudeWithLessError) {
  // Same codes as absmax ternary (so the same bytes before the scales); each block's scale is the
  // mean magnitude of what it sends, which sends the block's mass on that support exactly and,
  // on N(0, 1) in blocks of 512, cuts ||deq - x|| / ||x|| from 0.84 to 0.75: it removes 44% of the
  // squared error per round where absmax removes 29%.
  const size_t block = 512;
  auto x = gaussian((1 << 16) + 100, 1.0, 11);  // a ragged last block
  QuantizeConfig cfg;
  cfg.block_size = block;
  auto absmax = round_trip(x, kInt2MaxLevel, cfg);
  Ternary t{std::vector<float>(quant_n_blocks(x.size(), block)), std::vector<int8_t>(x.size())};
  quantize_ternary_mean_scale(x, block, t.scales, t.codes);
  EXPECT_EQ(t.codes, absmax.codes);
  double err_mean = 0, err_absmax = 0, den = 0;
  for (size_t b = 0; b < t.scales.size(); ++b) {
    double sent = 0;
    size_t k = 0;
    for (size_t i = b * block; i < std::min(x.size(), (b + 1) * block); ++i)
      if (t.codes[i] != 0) {
        sent += std::fabs(static_cast<double>(x[i]));
        ++k;
      }
    ASSERT_GT(k, 0u);
    EXPECT_EQ(t.scales[b], static_cast<float>(sent / static_cast<double>(k))) << "block " << b;
    EXPECT_LT(t.scales[b], absmax.scales[b]) << "block " << b;  // the largest value is sent below its size
  }
  std::vector<float> out(x.size());
  dequantize_blockwise(t.scales, t.codes, block, out);
  for (size_t i = 0; i < x.size(); ++i) {
    err_mean += std::pow(static_cast<double>(out[i]) - x[i], 2);
    err_absmax += std::pow(static_cast<double>(absmax.out[i]) - x[i], 2);
    den += static_cast<double>(x[i]) * x[i];
  }
  EXPECT_LT(err_mean, err_absmax);
  EXPECT_NEAR(std::sqrt(err_mean / den), 0.746, 0.01);
  // An all-zero block has scale 0; a non-finite value is a broken invariant, as for absmax.
  std::vector<float> z = {0, 0, 0, 0, 1, -3, 0.5f, 2};
  Ternary zt{std::vector<float>(2), std::vector<int8_t>(8)};
  quantize_ternary_mean_scale(z, 4, zt.scales, zt.codes);
  EXPECT_EQ(zt.scales[0], 0.0f);
  EXPECT_EQ(zt.codes, (std::vector<int8_t>{0, 0, 0, 0, 0, -1, 0, 1}));  // 1 < 3 / 2 stays home
  EXPECT_EQ(zt.scales[1], 2.5f);
  z[2] = std::numeric_limits<float>::infinity();
  EXPECT_THROW(quantize_ternary_mean_scale(z, 4, zt.scales, zt.codes), CheckFailure);
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
