// Safetensors files to and from libtorch tensors. The format itself (parsing, validation, layout)
// is in safetensors.h; this file only maps dtypes and copies bytes. Knows nothing about models.
//
// Assumes a little-endian host (x86-64, arm64), as the format stores little-endian bytes; the build
// refuses a big-endian target rather than silently swapping.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <torch/torch.h>

#include "core/status.h"
#include "model/safetensors.h"

namespace meshrl::model {

// Safetensors dtype <-> torch scalar type. dtype_from_torch is nullopt for types not handled
// here (complex, quantized, unsigned 16/32/64, float8).
torch::ScalarType dtype_to_torch(Dtype dtype);
std::optional<Dtype> dtype_from_torch(torch::ScalarType type);

// Reads a whole file: every tensor in its stored dtype, on the CPU, owning its memory (the file is
// mapped, validated with parse_safetensors, and each tensor copied out). BOOL bytes other than 0/1
// are rejected. Errors name the file, the tensor and the field.
Result<std::map<std::string, torch::Tensor>> read_safetensors(const std::filesystem::path& path);

// Same, also returning the file's __metadata__.
struct SafetensorsContents {
  std::map<std::string, torch::Tensor> tensors;
  std::map<std::string, std::string> metadata;
};
Result<SafetensorsContents> read_safetensors_with_metadata(const std::filesystem::path& path);

// Writes tensors (any device, any layout: contiguous CPU copies are taken) atomically, in the
// reference layout (build_safetensors_file): the same tensors always give the same bytes. Fails on
// an unsupported dtype, an undefined tensor, or a duplicate name.
Status write_safetensors(const std::filesystem::path& path,
                         const std::vector<std::pair<std::string, torch::Tensor>>& tensors,
                         const std::map<std::string, std::string>& metadata = {});

// The file bytes write_safetensors would write (used to shard and to test).
Result<std::string> safetensors_bytes(const std::vector<std::pair<std::string, torch::Tensor>>& tensors,
                                      const std::map<std::string, std::string>& metadata = {});

}  // namespace meshrl::model
