// Whole-file reads and durable writes (temp file, fsync, rename). Knows nothing about formats.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "core/status.h"

namespace meshrl {

// Reads a whole file; refuses files larger than max_bytes so a hostile path cannot exhaust memory.
Result<std::string> read_file(const std::filesystem::path& path, uint64_t max_bytes = uint64_t{1} << 40);

// Writes atomically: `path`.tmp, fsync, rename over `path`, fsync the directory.
Status write_file_atomic(const std::filesystem::path& path, const void* data, size_t n_bytes);
inline Status write_file_atomic(const std::filesystem::path& path, const std::string& s) {
  return write_file_atomic(path, s.data(), s.size());
}

}  // namespace meshrl
