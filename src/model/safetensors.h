// The safetensors file format, without libtorch: parse a header from raw bytes and lay out a file
// from raw tensor bytes. The torch-facing reader and writer live in safetensors_torch.h; this part
// is fuzzed on its own (tests/fuzz/fuzz_safetensors.cpp). Knows nothing about models or tensors
// beyond names, dtypes, shapes and byte spans.
//
// File layout (Hugging Face's format, little-endian):
//   [8 bytes]  N: u64 length of the header
//   [N bytes]  header: a JSON object, padded with spaces so that N % 8 == 0 (on write)
//                {"__metadata__": {"k": "v", ...},            (optional, string -> string)
//                 "name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}, ...}
//   [rest]     data section; offsets are relative to its start (byte 8 + N of the file)
//
// Every byte is treated as hostile: parse_safetensors checks sizes with checked arithmetic before
// anything is trusted, and reports the source, the tensor and the field on failure.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace meshrl::model {

enum class Dtype { F32, F16, BF16, F64, I64, I32, I16, I8, U8, BOOL };

size_t dtype_size(Dtype dtype);                    // bytes per element: F32 4, BF16 2, BOOL 1, ...
std::string_view dtype_name(Dtype dtype);          // as in the header: "F32", "BF16", "BOOL", ...
std::optional<Dtype> dtype_from_name(std::string_view name);

// Header limits: larger headers are refused (the reference library uses the same 100 MB cap).
inline constexpr uint64_t kMaxSafetensorsHeaderBytes = 100'000'000;
inline constexpr size_t kMaxSafetensorsRank = 16;

struct TensorEntry {
  std::string name;
  Dtype dtype = Dtype::F32;
  std::vector<int64_t> shape;  // each >= 0; product * dtype_size fits in uint64 and int64
  uint64_t begin = 0;          // byte offsets into the data section, [begin, end)
  uint64_t end = 0;

  int64_t numel() const;
  uint64_t n_bytes() const { return end - begin; }
};

struct SafetensorsHeader {
  std::vector<TensorEntry> tensors;  // sorted by begin (the order of the bytes in the file)
  std::map<std::string, std::string> metadata;
  uint64_t data_offset = 0;  // 8 + header length: where the data section starts in the file
};

// Parses and validates the header of a whole file held in memory. Fails (kDataLoss, message
// naming `source`, the tensor and the field) on: a file shorter than 8 bytes, a header length over
// the file or over 100 MB, a header that is not a JSON object, duplicate keys anywhere (duplicate
// tensor names included), __metadata__ not string -> string, an unknown dtype or field, a shape that
// is not a list of non-negative ints or whose size overflows, data_offsets not [begin, end] ints,
// begin > end, end beyond the data section, end - begin != numel * dtype_size, overlapping spans.
// Gaps between spans and trailing bytes are allowed (the reference writer never makes them).
Result<SafetensorsHeader> parse_safetensors(std::string_view file_bytes, const std::string& source);

// The first 8 + N bytes of a file: the length prefix and the header JSON, padded with spaces to a
// multiple of 8. Entries are written in the given order with their given offsets, each as
// {"dtype", "shape", "data_offsets"}; "__metadata__" comes first and is omitted when empty.
std::string serialize_safetensors_header(const std::vector<TensorEntry>& tensors,
                                         const std::map<std::string, std::string>& metadata);

// One tensor's raw little-endian bytes, borrowed for the duration of a call.
struct TensorBytes {
  std::string name;
  Dtype dtype = Dtype::F32;
  std::vector<int64_t> shape;
  std::string_view bytes;  // numel * dtype_size bytes
};

// A whole file in memory. The layout matches Hugging Face's writer: tensors sorted by dtype
// (widest first, in the reference library's dtype order) then by name, packed without gaps, so
// the same tensors always give the same bytes. Fails on duplicate or empty names, the reserved
// name "__metadata__", or a byte count that does not match the shape.
Result<std::string> build_safetensors_file(const std::vector<TensorBytes>& tensors,
                                           const std::map<std::string, std::string>& metadata);

// build_safetensors_file, then an atomic write (temp file, fsync, rename).
Status write_safetensors_raw(const std::filesystem::path& path, const std::vector<TensorBytes>& tensors,
                             const std::map<std::string, std::string>& metadata);

}  // namespace meshrl::model
