#include "mesh/quantize.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/check.h"
#include "core/splitmix64.h"

namespace meshrl::mesh {
namespace {

// Adding and subtracting 1.5 * 2^52 rounds a double of magnitude < 2^51 to the nearest integer
// (ties to even) in the default rounding mode. Unlike std::nearbyint it vectorises on baseline
// x86-64 (no SSE4.1 round instruction) and never calls libm.
inline double round_nearest(double r) {
  constexpr double kMagic = 6755399441055744.0;  // 1.5 * 2^52
  return (r + kMagic) - kMagic;
}

// Smallest float32 scale s with s * max_level >= absmax (exact in double: 24 x 7 significant bits).
float block_scale(float absmax, int max_level) {
  if (absmax == 0.0f) return 0.0f;
  float s = static_cast<float>(static_cast<double>(absmax) / max_level);
  while (static_cast<double>(s) * max_level < static_cast<double>(absmax))
    s = std::nextafter(s, std::numeric_limits<float>::infinity());
  return s;
}

}  // namespace

size_t quant_n_blocks(size_t n, size_t block_size) {
  MESHRL_CHECK(block_size >= 1, "[quantize] block_size must be >= 1, got " << block_size);
  return n / block_size + (n % block_size != 0 ? 1 : 0);
}

double quant_error_bound(float scale, bool stochastic_rounding) {
  const double step = stochastic_rounding ? 1.0 : 0.5;
  return static_cast<double>(scale) * (step + std::ldexp(1.0, -16)) + std::ldexp(1.0, -149);
}

void quantize_blockwise(std::span<const float> x, int max_level, const QuantizeConfig& config,
                        std::span<float> scales, std::span<int8_t> codes) {
  const size_t n = x.size(), bs = config.block_size;
  MESHRL_CHECK(max_level >= 1 && max_level <= 127, "[quantize] max_level must be in 1..127, got " << max_level);
  MESHRL_CHECK(codes.size() == n, "[quantize] codes must be [" << n << "], got [" << codes.size() << "]");
  MESHRL_CHECK(scales.size() == quant_n_blocks(n, bs),
               "[quantize] scales must be [" << quant_n_blocks(n, bs) << "], got [" << scales.size() << "]");
  const double level = max_level;
  for (size_t b = 0, begin = 0; begin < n; ++b, begin += bs) {
    const size_t end = std::min(n, begin + bs);
    float absmax = 0.0f;
    for (size_t i = begin; i < end; ++i) {
      const float a = std::fabs(x[i]);
      absmax = (a > absmax || a != a) ? a : absmax;  // unlike std::max, lets a NaN through to the check
    }
    MESHRL_CHECK(std::isfinite(absmax), "[quantize] block " << b << " holds a non-finite value");
    const float s = block_scale(absmax, max_level);
    scales[b] = s;
    if (s == 0.0f) {
      std::fill(codes.begin() + begin, codes.begin() + end, int8_t{0});
      continue;
    }
    const double inv = 1.0 / static_cast<double>(s);
    if (!config.stochastic_rounding) {
      for (size_t i = begin; i < end; ++i) {
        const double q = std::clamp(round_nearest(static_cast<double>(x[i]) * inv), -level, level);
        codes[i] = static_cast<int8_t>(q);
      }
    } else {
      for (size_t i = begin; i < end; ++i) {
        // u uniform in [0, 1) from the top 53 bits: floor(r + u) rounds up with probability frac(r).
        // Counter-based: element i's draw depends only on (seed, i), so any slice of a tensor can be
        // quantised independently with the same result.
        const double u = static_cast<double>(splitmix64(config.seed ^ splitmix64(i)) >> 11) * 0x1.0p-53;
        const double q = std::clamp(std::floor(static_cast<double>(x[i]) * inv + u), -level, level);
        codes[i] = static_cast<int8_t>(q);
      }
    }
  }
}

void quantize_ternary_topk(std::span<const float> x, double density, size_t block_size, std::span<float> scales,
                           std::span<int8_t> codes) {
  const size_t n = x.size();
  MESHRL_CHECK(density > 0.0 && density <= 1.0, "[quantize] ternary density must be in (0, 1], got " << density);
  MESHRL_CHECK(codes.size() == n, "[quantize] codes must be [" << n << "], got [" << codes.size() << "]");
  MESHRL_CHECK(scales.size() == quant_n_blocks(n, block_size),
               "[quantize] scales must be [" << quant_n_blocks(n, block_size) << "], got [" << scales.size() << "]");
  std::vector<uint32_t> order;
  for (size_t b = 0, begin = 0; begin < n; ++b, begin += block_size) {
    const size_t end = std::min(n, begin + block_size), len = end - begin;
    std::fill(codes.begin() + begin, codes.begin() + end, int8_t{0});
    order.clear();
    for (size_t i = begin; i < end; ++i) {
      MESHRL_CHECK(std::isfinite(x[i]), "[quantize] block " << b << " holds a non-finite value");
      if (x[i] != 0.0f) order.push_back(static_cast<uint32_t>(i - begin));
    }
    const size_t k = std::min(order.size(), std::max<size_t>(1, static_cast<size_t>(std::lround(density * len))));
    // Larger magnitude first; equal magnitudes by position, so the choice never depends on the sort.
    auto larger = [&](uint32_t a, uint32_t c) {
      const float fa = std::fabs(x[begin + a]), fc = std::fabs(x[begin + c]);
      return fa != fc ? fa > fc : a < c;
    };
    if (k < order.size()) std::nth_element(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k), order.end(), larger);
    double sum = 0.0;
    for (size_t j = 0; j < k; ++j) {
      const size_t i = begin + order[j];
      sum += std::fabs(static_cast<double>(x[i]));
      codes[i] = x[i] > 0.0f ? int8_t{1} : int8_t{-1};
    }
    scales[b] = k == 0 ? 0.0f : static_cast<float>(sum / static_cast<double>(k));
  }
}

void quantize_ternary_mean_scale(std::span<const float> x, size_t block_size, std::span<float> scales,
                                 std::span<int8_t> codes) {
  QuantizeConfig absmax;
  absmax.block_size = block_size;
  quantize_blockwise(x, kInt2MaxLevel, absmax, scales, codes);  // checks shapes and finiteness
  const size_t n = x.size();
  for (size_t b = 0, begin = 0; begin < n; ++b, begin += block_size) {
    const size_t end = std::min(n, begin + block_size);
    double sum = 0.0;
    size_t k = 0;
    for (size_t i = begin; i < end; ++i)
      if (codes[i] != 0) {
        sum += std::fabs(static_cast<double>(x[i]));
        ++k;
      }
    scales[b] = k == 0 ? 0.0f : static_cast<float>(sum / static_cast<double>(k));
  }
}

void dequantize_blockwise(std::span<const float> scales, std::span<const int8_t> codes, size_t block_size,
                          std::span<float> out) {
  const size_t n = codes.size();
  MESHRL_CHECK(out.size() == n, "[dequantize] out must be [" << n << "], got [" << out.size() << "]");
  MESHRL_CHECK(scales.size() == quant_n_blocks(n, block_size),
               "[dequantize] scales must be [" << quant_n_blocks(n, block_size) << "], got [" << scales.size() << "]");
  for (size_t b = 0, begin = 0; begin < n; ++b, begin += block_size) {
    const size_t end = std::min(n, begin + block_size);
    const float s = scales[b];
    for (size_t i = begin; i < end; ++i) out[i] = static_cast<float>(codes[i]) * s;
  }
}

void pack_int4(std::span<const int8_t> codes, std::span<uint8_t> packed) {
  const size_t n = codes.size();
  MESHRL_CHECK(packed.size() == (n + 1) / 2, "[pack_int4] packed must be [" << (n + 1) / 2 << "], got [" << packed.size() << "]");
  for (size_t k = 0; k < n / 2; ++k) {
    const auto lo = static_cast<uint8_t>(codes[2 * k]) & 0x0F;
    const auto hi = static_cast<uint8_t>(codes[2 * k + 1]) & 0x0F;
    packed[k] = static_cast<uint8_t>(lo | (hi << 4));
  }
  if (n % 2 != 0) packed[n / 2] = static_cast<uint8_t>(static_cast<uint8_t>(codes[n - 1]) & 0x0F);
}

void unpack_int4(std::span<const uint8_t> packed, std::span<int8_t> codes) {
  const size_t n = codes.size();
  MESHRL_CHECK(packed.size() == (n + 1) / 2, "[unpack_int4] packed must be [" << (n + 1) / 2 << "], got [" << packed.size() << "]");
  // Sign-extend a nibble: shift it to the top of an int8, then arithmetic-shift back.
  auto nibble = [](unsigned v) { return static_cast<int8_t>(static_cast<int8_t>(v << 4) >> 4); };
  for (size_t k = 0; k < n / 2; ++k) {
    codes[2 * k] = nibble(packed[k] & 0x0F);
    codes[2 * k + 1] = nibble(packed[k] >> 4);
  }
  if (n % 2 != 0) codes[n - 1] = nibble(packed[n / 2] & 0x0F);
}

void pack_int2(std::span<const int8_t> codes, std::span<uint8_t> packed) {
  const size_t n = codes.size();
  MESHRL_CHECK(packed.size() == (n + 3) / 4, "[pack_int2] packed must be [" << (n + 3) / 4 << "], got [" << packed.size() << "]");
  std::fill(packed.begin(), packed.end(), uint8_t{0});
  for (size_t i = 0; i < n; ++i)
    packed[i / 4] = static_cast<uint8_t>(packed[i / 4] | ((static_cast<uint8_t>(codes[i]) & 0x03) << (2 * (i % 4))));
}

void unpack_int2(std::span<const uint8_t> packed, std::span<int8_t> codes) {
  const size_t n = codes.size();
  MESHRL_CHECK(packed.size() == (n + 3) / 4, "[unpack_int2] packed must be [" << (n + 3) / 4 << "], got [" << packed.size() << "]");
  // Sign-extend two bits: shift them to the top of an int8, then arithmetic-shift back.
  for (size_t i = 0; i < n; ++i) {
    const unsigned v = (packed[i / 4] >> (2 * (i % 4))) & 0x03;
    codes[i] = static_cast<int8_t>(static_cast<int8_t>(v << 6) >> 6);
  }
}

}  // namespace meshrl::mesh
