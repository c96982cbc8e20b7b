// Blockwise symmetric quantisation of a float32 vector: the lossy half of the pseudo-gradient codec
// (codec.h). Owns nothing; torch-free (raw spans) so the fuzzed wire-format parser can use it.
// Knows nothing about tensors, names, the wire format or zstd.
//
// The vector (a flattened tensor, P values) is cut into blocks of `block_size` consecutive values;
// the last block may be shorter. Each block b gets one scale and every value one integer code:
//   scale_b = absmax_b / L, rounded UP to the next float32 so that |x| / scale_b <= L exactly
//   code_i  = round(x_i / scale_b)                       in -L..L   (L = 127 for int8, 7 for int4, 1 for int2)
//   deq_i   = code_i * scale_b                           (one float32 multiply)
// An all-zero block has scale 0 and codes 0 (decoded exactly).
//
// Error bound, per element, tested exactly (tests/unit/mesh/test_quantize.cpp):
//   round to nearest:    |x_i - deq_i| <= scale_b * (1/2 + 2^-16) + 2^-149
//   stochastic rounding: |x_i - deq_i| <= scale_b * (1   + 2^-16) + 2^-149,  and E[deq_i] = x_i
// The 1/2 (or 1) is the rounding step; the 2^-16 term covers float32 rounding of the product
// code * scale (at most L * scale * 2^-24 <= scale * 2^-17) and of x / scale (computed in double);
// 2^-149 covers a product that lands in float32's subnormal range.
//
// Why the scale is float32, not float16: float16 tops out at 65504 and its normal range ends at
// 6e-5, so absmax / 127 of a pseudo-gradient block (values near an inner lr of 1e-5 .. 1e-6)
// falls into float16's subnormals, keeps 1-3 significant bits and can round to 0 (the block is
// lost); an outlier above 65504 * 127 overflows. float32 costs 4 bytes per 64 values
// (0.5 bit per value: int8 8.5 bits/value instead of 8.25) and keeps the bound above exact.
//
// Why int4 is symmetric (levels -7..7, code -8 unused) and not asymmetric min/max: measured on
// N(0, 1) data (2^20 values), relative error ||deq - x|| / ||x||: symmetric block 64 = 0.108
// (4.5 bits/value), asymmetric block 64 = 0.090 (5 bits/value), asymmetric block 128 = 0.100
// (4.5 bits/value). At equal bits the asymmetric form gains only ~7%, while the symmetric one keeps
// 0 exact (frozen or untouched parameters stay exactly 0, which adapters and error feedback rely
// on), is unbiased under sign flips, shares int8's code path and needs only one scale checked.
// int8 on the same data: 0.0059 at block 64.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace meshrl::mesh {

inline constexpr int kInt8MaxLevel = 127;
inline constexpr int kInt4MaxLevel = 7;
// int2 is ternary: codes -1, 0, 1 (2-bit two's complement; -2 unused, as int4 leaves -8 unused).
inline constexpr int kInt2MaxLevel = 1;
inline constexpr size_t kDefaultBlockSize = 64;

struct QuantizeConfig {
  size_t block_size = kDefaultBlockSize;  // >= 1
  // Off by default: round to nearest has half the worst-case error; stochastic rounding makes each
  // decoded value unbiased, which matters only without error feedback.
  bool stochastic_rounding = false;
  uint64_t seed = 0;  // stochastic rounding only: element i draws from hash(seed, i)
};

// Number of blocks covering n values: ceil(n / block_size).
size_t quant_n_blocks(size_t n, size_t block_size);

// The bound above for one element of a block with this scale (in double, so tests compare exactly).
double quant_error_bound(float scale, bool stochastic_rounding);

// x [P] finite (a broken invariant otherwise: callers validate input first) -> scales
// [n_blocks(P)] and codes [P] in -max_level..max_level. max_level in 1..127.
void quantize_blockwise(std::span<const float> x, int max_level, const QuantizeConfig& config,
                        std::span<float> scales, std::span<int8_t> codes);

// Sparse ternary (the int2 codec with [mesh] int2_density > 0): each block keeps only its k =
// max(1, round(density * block length)) largest-magnitude values, sent as sign * s_b, where s_b is
// the mean magnitude of the kept values (the least-squares scale for that support); every other
// value becomes 0, and error feedback (error_feedback.h) carries it to the next round. Same wire
// layout and decoder as absmax ternary. Why it exists: absmax ternary keeps every value above
// absmax / 2, which once error feedback has flattened the residual is about a quarter of them
// (~1.1 bits per value after zstd on the demo); 1 in 16 takes ~0.5. The price is delay: what a
// block does not send waits rounds in the residual, and on the demo 1/16 at H = 2 ended at 57%
// held-out pass@1 against 76% (BENCHMARKS.md, "demo"). For byte-starved links only.
// Ties at the k-th magnitude are broken by position (lowest index first); zeros are never kept,
// so a block with fewer than k non-zero values keeps just those (an all-zero block: scale 0).
// x [P] finite (checked), density in (0, 1] -> scales [n_blocks(P)], codes [P] in -1..1.
void quantize_ternary_topk(std::span<const float> x, double density, size_t block_size, std::span<float> scales,
                           std::span<int8_t> codes);

// Ternary with the least-squares scale ([mesh] broadcast_int2_scale = "mean", the default for an
// int2 broadcast; int2_scale = "mean" for the updates). The codes are absmax ternary's: a value
// is sent iff it rounds away from 0 against the block's absmax (|x| > about absmax_b / 2). Only
// each block's scale changes: it is the mean magnitude of the values the block sends, not their
// maximum. For that support this scale minimises ||x - deq||^2 and sends the block's mass on it
// exactly (on N(0, 1) in blocks of 512 the relative error falls from 0.84 to 0.75).
// Why the demo's broadcast uses it: absmax ternary decodes every sent value as the block's
// largest. The coordinator quantises the mean of the nodes' ternary updates, whose values sit on a
// lattice (sums of +-a_i / N) near its a / 2 threshold, so it sends about a / 2 as a. Its residual
// then holds -a / 2, which the next round sends back as -a, and so on. On the demo, successive
// broadcasts had a median cosine of -0.32, and by round 31 26% of the values were non-zero, about
// 1.14 bits per value. With this scale the cosine is 0.00 and 11% are non-zero (0.70 bits), and
// held-out pass@1 rises (BENCHMARKS.md, "demo", 2026-12-01; bench/broadcast_trace.py shows it).
// On the nodes' updates it did worse (2 seeds), so int2_scale stays absmax there.
// Same wire layout and decoder as absmax ternary; an all-zero block has scale 0.
// x [P] finite (checked) -> scales [n_blocks(P)], codes [P] in -1..1.
void quantize_ternary_mean_scale(std::span<const float> x, size_t block_size, std::span<float> scales,
                                 std::span<int8_t> codes);

// scales [n_blocks(P)], codes [P] -> out [P]: out_i = codes_i * scales_{i / block_size}.
void dequantize_blockwise(std::span<const float> scales, std::span<const int8_t> codes, size_t block_size,
                          std::span<float> out);

// 4-bit packing, two codes per byte: element 2k in the low nibble, 2k+1 in the high nibble, each
// as 4-bit two's complement. An odd count leaves the last high nibble 0.
// codes [P] in -8..7 -> packed [ceil(P / 2)].
void pack_int4(std::span<const int8_t> codes, std::span<uint8_t> packed);
// packed [ceil(P / 2)] -> codes [P] in -8..7 (range checks are the caller's: the wire format).
void unpack_int4(std::span<const uint8_t> packed, std::span<int8_t> codes);

// 2-bit packing, four codes per byte: element 4k + j in bits 2j..2j+1, each as 2-bit two's
// complement. A count not divisible by 4 leaves the last byte's unused high bits 0.
// codes [P] in -2..1 -> packed [ceil(P / 4)].
void pack_int2(std::span<const int8_t> codes, std::span<uint8_t> packed);
// packed [ceil(P / 4)] -> codes [P] in -2..1 (range and padding checks are the caller's).
void unpack_int2(std::span<const uint8_t> packed, std::span<int8_t> codes);

}  // namespace meshrl::mesh
