#include "cli/progress.h"

#include <unistd.h>

#include <cstdio>

namespace meshrl::cli {

Progress::Progress() : tty_(::isatty(STDOUT_FILENO) == 1) {}

void Progress::update(int64_t done, int64_t total, const std::string& status) {
  if (!tty_) {
    std::printf("[%lld/%lld] %s\n", static_cast<long long>(done), static_cast<long long>(total), status.c_str());
    std::fflush(stdout);
    return;
  }
  constexpr int kWidth = 24;
  const int filled = total > 0 ? static_cast<int>(kWidth * done / total) : 0;
  std::string bar(filled, '#');
  bar.resize(kWidth, '.');
  std::printf("\r\033[K[%s] %lld/%lld %s", bar.c_str(), static_cast<long long>(done), static_cast<long long>(total),
              status.c_str());
  std::fflush(stdout);
  open_ = true;
}

void Progress::finish() {
  if (tty_ && open_) std::printf("\n");
  open_ = false;
  std::fflush(stdout);
}

void Progress::line(const std::string& text) {
  if (tty_ && open_) std::printf("\r\033[K");
  std::printf("%s\n", text.c_str());
  open_ = false;
  std::fflush(stdout);
}

}  // namespace meshrl::cli
