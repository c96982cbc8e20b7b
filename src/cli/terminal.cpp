#include "cli/terminal.h"

#include <unistd.h>

#include <cstdint>
#include <ctime>

namespace meshrl::cli {

const char* level_name(Level level) {
  switch (level) {
    case Level::kDebug: return "DEBUG";
    case Level::kInfo: return "INFO";
    case Level::kWarn: return "WARN";
    case Level::kError: return "ERROR";
  }
  return "INFO";
}

std::string format_log_line(std::chrono::system_clock::time_point t, Level level, std::string_view name,
                            std::string_view message) {
  using namespace std::chrono;
  const auto ms = duration_cast<milliseconds>(t.time_since_epoch()).count();
  const std::time_t secs = static_cast<std::time_t>(ms >= 0 ? ms / 1000 : (ms - 999) / 1000);
  const int milli = static_cast<int>(ms - static_cast<int64_t>(secs) * 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char stamp[96];
  std::snprintf(stamp, sizeof stamp, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                tm.tm_hour, tm.tm_min, tm.tm_sec, milli);
  char head[128];
  std::snprintf(head, sizeof head, "%s %-5s ", stamp, level_name(level));
  std::string line = head;
  line.append(name);
  line += "  ";
  for (char c : message) line += (c == '\n' || c == '\r') ? ' ' : c;
  while (!line.empty() && line.back() == ' ') line.pop_back();
  return line;
}

Level guess_level(std::string_view m) {
  auto starts = [&](std::string_view p) { return m.substr(0, p.size()) == p; };
  auto has = [&](std::string_view p) { return m.find(p) != std::string_view::npos; };
  if (starts("FATAL") || starts("ERROR")) return Level::kError;
  if (starts("WARNING") || starts("refused") || starts("rejected") || starts("dropped") || has(" rejected: ") ||
      has("retrying") || has(" failed"))
    return Level::kWarn;
  return Level::kInfo;
}

bool log_enabled(Verbosity v, Level level) { return v == Verbosity::kNormal ? level != Level::kDebug : level == Level::kError; }

Terminal::Terminal(std::FILE* out, std::FILE* err, bool out_tty) : out_(out), err_(err), out_tty_(out_tty) {}

Terminal& Terminal::get() {
  static Terminal t(stdout, stderr, ::isatty(STDOUT_FILENO) == 1);
  return t;
}

void Terminal::set_verbosity(Verbosity v) {
  std::lock_guard<std::mutex> lk(mu_);
  verbosity_ = v;
}

Verbosity Terminal::verbosity() const {
  std::lock_guard<std::mutex> lk(mu_);
  return verbosity_;
}

void Terminal::set_name(std::string name) {
  std::lock_guard<std::mutex> lk(mu_);
  name_ = std::move(name);
}

void Terminal::clear_bar_locked() {
  if (bar_.empty()) return;
  std::fputs("\r\033[K", out_);
  std::fflush(out_);
}

void Terminal::redraw_bar_locked() {
  if (bar_.empty()) return;
  std::fputs(bar_.c_str(), out_);
  std::fflush(out_);
}

void Terminal::log(Level level, std::string_view message) {
  const auto now = std::chrono::system_clock::now();
  std::lock_guard<std::mutex> lk(mu_);
  if (!log_enabled(verbosity_, level)) return;
  const std::string line = format_log_line(now, level, name_, message) + "\n";
  clear_bar_locked();
  std::fputs(line.c_str(), err_);
  std::fflush(err_);
  redraw_bar_locked();
}

void Terminal::result(std::string_view line) {
  std::lock_guard<std::mutex> lk(mu_);
  if (verbosity_ == Verbosity::kJson) return;
  clear_bar_locked();
  bar_.clear();
  std::fwrite(line.data(), 1, line.size(), out_);
  std::fputc('\n', out_);
  std::fflush(out_);
}

void Terminal::json_result(std::string_view json) {
  std::lock_guard<std::mutex> lk(mu_);
  if (verbosity_ != Verbosity::kJson) return;
  std::fwrite(json.data(), 1, json.size(), out_);
  std::fputc('\n', out_);
  std::fflush(out_);
}

void Terminal::print(std::string_view line) {
  std::lock_guard<std::mutex> lk(mu_);
  if (verbosity_ != Verbosity::kNormal) return;
  clear_bar_locked();
  std::fwrite(line.data(), 1, line.size(), out_);
  std::fputc('\n', out_);
  std::fflush(out_);
  redraw_bar_locked();
}

void Terminal::draw_bar(std::string_view text) {
  std::lock_guard<std::mutex> lk(mu_);
  if (!out_tty_ || verbosity_ != Verbosity::kNormal) return;
  bar_ = "\r\033[K";
  bar_.append(text);
  std::fputs(bar_.c_str(), out_);
  std::fflush(out_);
}

void Terminal::end_bar() {
  std::lock_guard<std::mutex> lk(mu_);
  if (bar_.empty()) return;
  bar_.clear();
  std::fputc('\n', out_);
  std::fflush(out_);
}

}  // namespace meshrl::cli
