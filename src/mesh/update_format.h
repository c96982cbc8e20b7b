// The wire format of an encoded update (a pseudo-gradient or a broadcast delta): writing it from
// raw float32 spans and parsing it back, with every byte treated as hostile. Torch-free so it is
// fuzzed on its own (tests/fuzz/fuzz_update_decoder.cpp); codec.h is the libtorch face of it.
// Knows nothing about models, the network, or what the tensors mean.
//
// Layout, version 1, little-endian:
//   "MRLU"            4 bytes magic
//   format_version    u16   (kUpdateFormatVersion; anything else is refused)
//   codec             u8    CodecId: 1 fp32, 2 int8, 3 int4, 4 int2
//   compression       u8    0 none, 1 zstd (one frame per tensor payload)
//   n_tensors         u32
//   n_tensors records:
//     name_len u16, name bytes   (1..kMaxUpdateNameBytes, unique within the update)
//     rank u8, rank x i64 dims   (rank <= kMaxUpdateRank, dims >= 0)
//     numel u64                  (== product of dims, checked)
//     block_size u32             (0 for fp32; 1..kMaxUpdateBlockSize for int8 / int4 / int2)
//     stored_bytes u64           (payload bytes as stored: the zstd frame, or the raw payload)
//   payloads, in record order, back to back; the buffer ends exactly after the last.
// A payload before compression (its "raw size", fixed by codec, numel and block size):
//   fp32: numel x f32
//   int8: n_blocks x f32 scales, then numel x i8 codes in -127..127
//   int4: n_blocks x f32 scales, then ceil(numel / 2) bytes of packed codes in -7..7 (quantize.h)
//   int2: n_blocks x f32 scales, then ceil(numel / 4) bytes of packed codes in -1..1 (ternary)
// A zstd payload is exactly one frame that declares its content size, equal to the raw size.
//
// parse_update checks everything that can be checked without decompressing: magic, version,
// codec, every length against the buffer (checked arithmetic), numel against shape, names, block
// sizes, each frame's declared content size against the raw size, and the caller's cap on
// decoded bytes, before allocating anything sized by the buffer. decode_update_tensor then
// decompresses one payload and checks its values (scales finite, >= 0 and not overflowing on
// dequantisation; codes in range; fp32 values finite), so decoded values are always finite.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "mesh/quantize.h"

namespace meshrl::mesh {

enum class CodecId : uint8_t { kFp32 = 1, kInt8 = 2, kInt4 = 3, kInt2 = 4 };
enum class Compression : uint8_t { kNone = 0, kZstd = 1 };

inline constexpr char kUpdateMagic[4] = {'M', 'R', 'L', 'U'};
inline constexpr uint16_t kUpdateFormatVersion = 1;
inline constexpr size_t kUpdateHeaderBytes = 12;  // magic + version + codec + compression + n_tensors
inline constexpr size_t kMaxUpdateNameBytes = 1024;
inline constexpr size_t kMaxUpdateRank = 8;
inline constexpr uint32_t kMaxUpdateBlockSize = 1u << 16;

std::string_view codec_name(CodecId id);                      // "fp32", "int8", "int4", "int2"
std::optional<CodecId> codec_from_name(std::string_view name);

// One float32 tensor to encode; the spans must outlive write_update.
struct UpdateTensorView {
  std::string_view name;
  std::span<const int64_t> shape;  // product == values.size()
  std::span<const float> values;   // [P] row-major
};

struct UpdateEncodeOptions {
  CodecId codec = CodecId::kInt8;
  uint32_t block_size = kDefaultBlockSize;  // int8 / int4 only
  int zstd_level = 3;                       // 0 = store payloads uncompressed; else 1..22 (negative: zstd's fast levels)
  bool stochastic_rounding = false;
  uint64_t seed = 0;  // stochastic rounding only; tensor t uses seed mixed with t
  // int2 only: 0 rounds every value against its block's absmax; in (0, 1] sends each block's
  // largest density share as +-mean magnitude (quantize_ternary_topk). The decoder is the same.
  double int2_density = 0.0;
  // int2 with int2_density 0 only: the absmax codes with each block's least-squares scale
  // (quantize_ternary_mean_scale). The decoder is the same.
  bool int2_mean_scale = false;
};

// Encodes the tensors in order. Fails (kInvalidArgument, naming the tensor) on an empty, too long
// or duplicate name, a rank over kMaxUpdateRank, a shape whose product is not values.size(), a
// non-finite value, a block size out of range, or a zstd failure.
Result<std::string> write_update(std::span<const UpdateTensorView> tensors, const UpdateEncodeOptions& options);

// Sizes of the layout above, for planning without encoding (src/plan): one tensor's header record
// (name_len, name, rank, dims, numel, block_size, stored_bytes) and its payload before zstd.
// Encoded size with zstd level 0 = kUpdateHeaderBytes + sum over tensors of both.
uint64_t update_record_bytes(size_t name_bytes, size_t rank);
uint64_t update_raw_payload_bytes(CodecId codec, uint64_t numel, uint32_t block_size);  // saturates on overflow

// The caller's caps, set from what it expects (e.g. the run's parameter count): a buffer that
// declares more is refused before anything is allocated for it.
struct UpdateDecodeLimits {
  uint64_t max_decoded_bytes = 1ull << 30;  // sum over tensors of numel * 4 (the float32 output)
  uint32_t max_tensors = 1u << 16;
};

struct UpdateRecord {
  std::string name;
  std::vector<int64_t> shape;
  uint64_t numel = 0;
  uint32_t block_size = 0;
  uint64_t raw_bytes = 0;       // payload size before compression (derived, see layout)
  uint64_t stored_offset = 0;   // where the stored payload starts in the buffer
  uint64_t stored_bytes = 0;
};

struct ParsedUpdate {
  uint16_t format_version = 0;
  CodecId codec = CodecId::kFp32;
  Compression compression = Compression::kNone;
  std::vector<UpdateRecord> tensors;
  uint64_t total_numel = 0;
  std::string_view bytes;  // the parsed buffer: not owned, must outlive every decode_update_tensor
};

// Parses and validates everything but the payload contents. Errors are kDataLoss (a malformed
// buffer) or kInvalidArgument (over the caller's limits, unknown codec or version), each naming
// `source`, the tensor (index and name when known) and the field.
Result<ParsedUpdate> parse_update(std::string_view bytes, const UpdateDecodeLimits& limits,
                                  std::string_view source = "update");

// Decodes tensor `index` into out [numel]. Allocates at most its raw size (<= numel * 4 + 4 *
// n_blocks, itself under the caller's cap). Fails (kDataLoss) on a zstd error or a checksum
// mismatch, a non-finite / negative / overflowing scale, an out-of-range code or a non-zero
// int4 padding nibble, a non-finite fp32 value.
Status decode_update_tensor(const ParsedUpdate& update, size_t index, std::span<float> out,
                            std::string_view source = "update");

}  // namespace meshrl::mesh
