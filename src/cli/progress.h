// A progress display for a count with a known total (SFT steps, GRPO steps, rounds, evaluation
// rows, downloaded bytes): done/total, rate and ETA. On a terminal it redraws one bar in place
// ("\r"), at most ~10 times a second; when stdout is a file or a pipe it prints plain lines instead
// (every update, or at most one per plain_every_s), so logs stay readable. Nothing with --quiet or
// --json (terminal.h). Knows nothing about training.
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <string>

#include "cli/terminal.h"

namespace meshrl::cli {

// --- pure formatting (unit-tested) ---

// "0:07", "12:34", "1:02:03"; "--:--" when unknown (negative, NaN or infinite).
std::string format_duration(double seconds);
// "812 B", "12.3 KB", "4.56 MB", "1.20 GB" (decimal units).
std::string format_bytes(double bytes);
// "12.3 steps/s" (unit), "0.25 s/step" when slower than one per second, "3.40 MB/s" for bytes;
// "-" when unknown (<= 0).
std::string format_rate(double per_second, const std::string& unit, bool bytes);
// "[#########...............]" of width characters inside the brackets; done clamped to [0, total].
std::string format_bar(int64_t done, int64_t total, int width);

struct ProgressLine {
  std::string label;   // "sft", "train", "eval", "round", "download"
  std::string unit;    // "steps", "rounds", "rows"; ignored for bytes
  bool bytes = false;  // done/total are bytes: shown as MB, rate as MB/s
  int64_t done = 0, total = 0;
  double elapsed_s = 0;
  double rate = 0;     // units per second; <= 0 unknown
  std::string status;  // free text after the numbers
};
// Terminal:  "sft [########........]  120/500  12.3 steps/s  ETA 0:31  loss 0.41"
// Plain:     "sft 120/500 (24%)  12.3 steps/s  elapsed 0:10  ETA 0:31  loss 0.41"
std::string render_progress(const ProgressLine& p, bool tty);
// Seconds left at this rate; negative when unknown.
double eta_seconds(int64_t done, int64_t total, double rate);

// --- the display ---

struct ProgressOptions {
  std::string unit = "steps";
  bool bytes = false;
  double tty_interval_s = 0.1;   // redraws at most this often (the last one always)
  double plain_every_s = 0;      // plain lines at most this often; 0 = every update (the caller filters)
};

// An evaluation's generated rows (eval, train, coordinator, demo): unit "rows", and plain lines at
// most every 5 s, since the periodic evaluations inside a run would otherwise fill its log.
ProgressOptions eval_progress_options();

class Progress {
 public:
  using Clock = std::function<double()>;  // monotonic seconds; tests inject their own
  explicit Progress(std::string label, ProgressOptions options = {}, Terminal& terminal = Terminal::get(), Clock clock = {});
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // Starts the clock now at done (else the first update starts it, and its rate shows from the
  // second update on).
  void start(int64_t done = 0);
  // done of total with a short status after the numbers. Thread-safe. Reaching total ends the
  // bar's line (a later update starts a new one).
  void update(int64_t done, int64_t total, const std::string& status = "");
  // Ends the bar's line (terminal mode) before other output; safe to call twice.
  void finish();
  // A line of its own (plain text on stdout, normal verbosity only), keeping the bar below it.
  void line(const std::string& text);
  bool is_tty() const { return term_.out_tty(); }

 private:
  std::mutex mu_;
  std::string label_;
  ProgressOptions o_;
  Terminal& term_;
  Clock clock_;
  double t0_ = -1;           // first update
  int64_t done0_ = 0;        // done at the first update (the rate counts from there)
  double last_draw_ = -1e300;
};

}  // namespace meshrl::cli
