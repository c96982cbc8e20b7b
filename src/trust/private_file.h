// Durable writes of secrets: like write_file_atomic (core/file_io.h), but the file is created
// owner-only (0600) from the first byte, so a private key is never readable by others, not even
// for the moment between create and chmod.
#pragma once

#include <filesystem>
#include <string>

#include "core/status.h"

namespace meshrl::trust {

Status write_private_file(const std::filesystem::path& path, const std::string& data);

}  // namespace meshrl::trust
