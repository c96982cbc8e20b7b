#include "cli/progress.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>

namespace meshrl::cli {

std::string format_duration(double s) {
  if (!std::isfinite(s) || s < 0) return "--:--";
  const long long t = std::llround(s);
  char b[32];
  if (t >= 3600) std::snprintf(b, sizeof b, "%lld:%02lld:%02lld", t / 3600, (t / 60) % 60, t % 60);
  else std::snprintf(b, sizeof b, "%lld:%02lld", t / 60, t % 60);
  return b;
}

std::string format_bytes(double bytes) {
  char b[32];
  if (bytes < 1e3) std::snprintf(b, sizeof b, "%.0f B", bytes);
  else if (bytes < 1e6) std::snprintf(b, sizeof b, "%.1f KB", bytes / 1e3);
  else if (bytes < 1e9) std::snprintf(b, sizeof b, "%.2f MB", bytes / 1e6);
  else std::snprintf(b, sizeof b, "%.2f GB", bytes / 1e9);
  return b;
}

std::string format_rate(double per_second, const std::string& unit, bool bytes) {
  if (!std::isfinite(per_second) || per_second <= 0) return "-";
  if (bytes) return format_bytes(per_second) + "/s";
  char b[64];
  if (per_second >= 1) {
    std::snprintf(b, sizeof b, per_second >= 100 ? "%.0f %s/s" : "%.1f %s/s", per_second, unit.c_str());
  } else {
    // "0.25 s/step": the singular of the unit reads better per item.
    std::string one = unit;
    if (one.size() > 1 && one.back() == 's') one.pop_back();
    std::snprintf(b, sizeof b, "%.2g s/%s", 1.0 / per_second, one.c_str());
  }
  return b;
}

std::string format_bar(int64_t done, int64_t total, int width) {
  const int64_t d = std::clamp<int64_t>(done, 0, std::max<int64_t>(total, 0));
  const int filled = total > 0 ? static_cast<int>(static_cast<double>(width) * static_cast<double>(d) / static_cast<double>(total)) : 0;
  std::string s = "[";
  s.append(static_cast<size_t>(filled), '#');
  s.append(static_cast<size_t>(width - filled), '.');
  s += "]";
  return s;
}

double eta_seconds(int64_t done, int64_t total, double rate) {
  if (!(rate > 0) || !std::isfinite(rate) || total <= 0) return -1;
  if (done >= total) return 0;
  return static_cast<double>(total - done) / rate;
}

std::string render_progress(const ProgressLine& p, bool tty) {
  const auto count = [&](int64_t x) {
    return p.bytes ? format_bytes(static_cast<double>(x)) : std::to_string(static_cast<long long>(x));
  };
  std::string s = p.label;
  s += tty ? " " + format_bar(p.done, p.total, 24) + "  " : " ";
  s += count(p.done) + "/" + count(p.total);
  if (!tty && p.total > 0) {
    char pct[16];
    std::snprintf(pct, sizeof pct, " (%d%%)", static_cast<int>(100.0 * static_cast<double>(std::clamp<int64_t>(p.done, 0, p.total)) /
                                                               static_cast<double>(p.total)));
    s += pct;
  }
  s += "  " + format_rate(p.rate, p.unit, p.bytes);
  if (!tty) s += "  elapsed " + format_duration(p.elapsed_s);
  s += p.done >= p.total && p.total > 0 ? "  done in " + format_duration(p.elapsed_s)
                                        : "  ETA " + format_duration(eta_seconds(p.done, p.total, p.rate));
  if (!p.status.empty()) s += "  " + p.status;
  return s;
}

ProgressOptions eval_progress_options() {
  ProgressOptions o;
  o.unit = "rows";
  o.plain_every_s = 5;
  return o;
}

namespace {
double mono_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace

Progress::Progress(std::string label, ProgressOptions options, Terminal& terminal, Clock clock)
    : label_(std::move(label)), o_(std::move(options)), term_(terminal), clock_(clock ? std::move(clock) : Clock(mono_now)) {}

Progress::~Progress() { finish(); }

void Progress::start(int64_t done) {
  std::lock_guard<std::mutex> lk(mu_);
  t0_ = clock_();
  done0_ = done;
  if (!term_.out_tty() && o_.plain_every_s > 0) last_draw_ = t0_;
}

void Progress::update(int64_t done, int64_t total, const std::string& status) {
  std::lock_guard<std::mutex> lk(mu_);
  const double now = clock_();
  if (t0_ < 0) {
    t0_ = now;
    done0_ = done;  // the rate counts from the first update
    // Throttled plain lines start with the first interval, not with a line at 0%.
    if (!term_.out_tty() && o_.plain_every_s > 0) last_draw_ = now;
  }
  const bool last = total > 0 && done >= total;
  const bool tty = term_.out_tty();
  const double interval = tty ? o_.tty_interval_s : o_.plain_every_s;
  if (!last && last_draw_ > -1e299 && now - last_draw_ < interval) return;
  last_draw_ = now;
  ProgressLine p;
  p.label = label_;
  p.unit = o_.unit;
  p.bytes = o_.bytes;
  p.done = done;
  p.total = total;
  p.elapsed_s = now - t0_;
  p.rate = p.elapsed_s > 0 && done > done0_ ? static_cast<double>(done - done0_) / p.elapsed_s : 0;
  p.status = status;
  const std::string text = render_progress(p, tty);
  if (tty) term_.draw_bar(text);
  else term_.print(text);
  if (last) {
    if (tty) term_.end_bar();
    t0_ = -1;  // a later update starts a new run (the next download)
    last_draw_ = -1e300;
  }
}

void Progress::finish() {
  std::lock_guard<std::mutex> lk(mu_);
  term_.end_bar();
}

void Progress::line(const std::string& text) { term_.print(text); }

}  // namespace meshrl::cli
