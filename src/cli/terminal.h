// What a meshrl process writes to the terminal, in one place: log lines (one format for the
// coordinator, the nodes and the demo), progress bars (progress.h) and the final result.
//
//   log lines   -> stderr: "2026-11-30T10:30:01.123Z INFO  paris  joined at version 3"
//                  (UTC, millisecond, level padded to 5, process or node name, message)
//   progress    -> stdout: redrawn in place on a terminal, plain lines otherwise (progress.h)
//   the result  -> stdout: human-readable lines, or one JSON object with --json
//
// --quiet keeps errors and the final result; --json keeps errors and prints only the JSON result on
// stdout. Thread-safe: coordinator threads log while the main thread draws a bar; a log line
// clears the bar, is written, and the bar is redrawn below it. Torch-free, so it is unit-tested alone.
#pragma once

#include <chrono>
#include <cstdio>
#include <mutex>
#include <string>
#include <string_view>

namespace meshrl::cli {

enum class Level { kDebug, kInfo, kWarn, kError };
enum class Verbosity { kNormal, kQuiet, kJson };

// "DEBUG", "INFO", "WARN", "ERROR".
const char* level_name(Level level);

// One log line without the newline: "<UTC ISO-8601 with ms>Z <LEVEL padded to 5> <name>  <message>".
// Newlines inside the message become spaces, so one call is always one line.
std::string format_log_line(std::chrono::system_clock::time_point t, Level level, std::string_view name,
                            std::string_view message);

// The level of a line from the mesh's string log callbacks (they carry no level): "FATAL..." is an
// error; refusals, rejections, drops, failures and retries are warnings; the rest is info.
Level guess_level(std::string_view message);

// Whether a line of this level is written at this verbosity: everything when normal, only errors
// with --quiet or --json.
bool log_enabled(Verbosity v, Level level);

class Terminal {
 public:
  // out: results and progress; err: log lines. out_tty: whether out is a terminal (bars in place).
  Terminal(std::FILE* out, std::FILE* err, bool out_tty);

  // The process-wide terminal on stdout/stderr (isatty(stdout) decides the bar style).
  static Terminal& get();

  void set_verbosity(Verbosity v);
  Verbosity verbosity() const;
  // The name in log lines: "coordinator", the node's name, "demo", "train", ...
  void set_name(std::string name);
  bool out_tty() const { return out_tty_; }

  void log(Level level, std::string_view message);
  void info(std::string_view m) { log(Level::kInfo, m); }
  void warn(std::string_view m) { log(Level::kWarn, m); }
  void error(std::string_view m) { log(Level::kError, m); }

  // A line of the final result: written unless --json.
  void result(std::string_view line);
  // The --json result: written only with --json, as one line.
  void json_result(std::string_view json);
  // A line on stdout that is neither a log line nor the result (progress in plain mode): written
  // only at normal verbosity.
  void print(std::string_view line);

  // Progress (progress.h): draws text as the bar in place (terminal only), or ends the bar's line.
  void draw_bar(std::string_view text);
  void end_bar();

 private:
  void clear_bar_locked();
  void redraw_bar_locked();

  mutable std::mutex mu_;
  std::FILE* out_;
  std::FILE* err_;
  bool out_tty_;
  Verbosity verbosity_ = Verbosity::kNormal;
  std::string name_ = "meshrl";
  std::string bar_;        // the bar on screen ("" = none)
};

// Shorthands on Terminal::get().
inline void log_info(std::string_view m) { Terminal::get().info(m); }
inline void log_warn(std::string_view m) { Terminal::get().warn(m); }
inline void log_error(std::string_view m) { Terminal::get().error(m); }

}  // namespace meshrl::cli
