#include "core/file_io.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

namespace meshrl {

Result<std::string> read_file(const std::filesystem::path& path, uint64_t max_bytes) {
  std::error_code ec;
  auto size = std::filesystem::file_size(path, ec);
  if (ec) return not_found("[file] cannot read " + path.string() + ": " + ec.message());
  if (size > max_bytes)
    return invalid_argument("[file] " + path.string() + " is " + std::to_string(size) + " bytes, over the limit of " +
                            std::to_string(max_bytes));
  std::ifstream in(path, std::ios::binary);
  if (!in) return io_error("[file] cannot open " + path.string());
  std::string out(size, '\0');
  in.read(out.data(), static_cast<std::streamsize>(size));
  if (static_cast<uint64_t>(in.gcount()) != size) return io_error("[file] short read on " + path.string());
  return out;
}

Status write_file_atomic(const std::filesystem::path& path, const void* data, size_t n_bytes) {
  auto tmp = path;
  tmp += ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return io_error("[file] cannot create " + tmp.string() + ": " + std::strerror(errno));
  const char* p = static_cast<const char*>(data);
  size_t left = n_bytes;
  while (left > 0) {
    ssize_t w = ::write(fd, p, left);
    if (w < 0) {
      if (errno == EINTR) continue;
      std::string err = std::strerror(errno);
      ::close(fd);
      return io_error("[file] write to " + tmp.string() + " failed: " + err);
    }
    p += w;
    left -= static_cast<size_t>(w);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) return io_error("[file] fsync/close of " + tmp.string() + " failed");
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) return io_error("[file] rename " + tmp.string() + " -> " + path.string() + ": " + ec.message());
  auto dir = path.parent_path().empty() ? std::filesystem::path(".") : path.parent_path();
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return Status::ok();
}

}  // namespace meshrl
