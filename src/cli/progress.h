// A one-line progress display: on a terminal it redraws a bar in place ("\r"); when stdout is a
// file or a pipe it prints plain lines instead, so logs stay readable. Knows nothing about training.
#pragma once

#include <cstdint>
#include <string>

namespace meshrl::cli {

class Progress {
 public:
  Progress();
  // done of total, with a short status text after the bar. Plain mode prints one line per call.
  void update(int64_t done, int64_t total, const std::string& status);
  // Ends the bar's line (terminal mode) before other output.
  void finish();
  // Prints a line of its own, keeping the bar intact below it on a terminal.
  void line(const std::string& text);
  bool is_tty() const { return tty_; }

 private:
  bool tty_ = false;
  bool open_ = false;
};

}  // namespace meshrl::cli
