#include "trust/private_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace meshrl::trust {

Status write_private_file(const std::filesystem::path& path, const std::string& data) {
  auto tmp = path;
  tmp += ".tmp";
  ::unlink(tmp.c_str());  // a leftover tmp may have looser permissions; O_EXCL then creates ours
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return io_error("[trust] cannot create " + tmp.string() + ": " + std::strerror(errno));
  size_t done = 0;
  while (done < data.size()) {
    ssize_t w = ::write(fd, data.data() + done, data.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) {
      std::string err = std::strerror(errno);
      ::close(fd);
      return io_error("[trust] write to " + tmp.string() + " failed: " + err);
    }
    done += static_cast<size_t>(w);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) return io_error("[trust] fsync/close of " + tmp.string() + " failed");
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) return io_error("[trust] rename " + tmp.string() + " -> " + path.string() + ": " + ec.message());
  return Status::ok();
}

}  // namespace meshrl::trust
