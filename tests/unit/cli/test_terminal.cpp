// The terminal output's pure parts: log-line format, levels, --quiet/--json suppression, progress
// formatting (bar, rate, ETA, durations, bytes) and the progress display's throttling and modes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>

#include "cli/progress.h"
#include "cli/terminal.h"

namespace meshrl::cli {
namespace {

// A FILE* whose contents can be read back (open_memstream).
struct MemFile {
  char* buf = nullptr;
  size_t len = 0;
  std::FILE* f = open_memstream(&buf, &len);
  ~MemFile() {
    std::fclose(f);
    std::free(buf);
  }
  std::string str() {
    std::fflush(f);
    return std::string(buf, len);
  }
};

std::chrono::system_clock::time_point at_ms(int64_t ms) {
  return std::chrono::system_clock::time_point(std::chrono::milliseconds(ms));
}

TEST(LogLine, UtcTimestampLevelNameMessage) {
  // 2026-11-30T10:30:01.123Z
  const int64_t ms = 1796034601123;
  EXPECT_EQ(format_log_line(at_ms(ms), Level::kInfo, "paris", "joined at version 3"),
            "2026-11-30T10:30:01.123Z INFO  paris  joined at version 3");
  EXPECT_EQ(format_log_line(at_ms(ms), Level::kError, "coordinator", "boom"),
            "2026-11-30T10:30:01.123Z ERROR coordinator  boom");
  EXPECT_EQ(format_log_line(at_ms(ms), Level::kWarn, "x", "w"), "2026-11-30T10:30:01.123Z WARN  x  w");
  // Milliseconds are zero-padded; the epoch is 1970.
  EXPECT_EQ(format_log_line(at_ms(7), Level::kDebug, "n", "m"), "1970-01-01T00:00:00.007Z DEBUG n  m");
}

TEST(LogLine, OneLinePerMessage) {
  const std::string l = format_log_line(at_ms(0), Level::kInfo, "n", "a\nb\r\nc\n");
  EXPECT_EQ(l.find('\n'), std::string::npos);
  EXPECT_EQ(l.find('\r'), std::string::npos);
  EXPECT_EQ(l.substr(l.size() - 6), "a b  c");
}

TEST(LogLine, GuessLevelOfMeshLines) {
  EXPECT_EQ(guess_level("FATAL: closing round 3 failed: disk full; restart with --resume"), Level::kError);
  EXPECT_EQ(guess_level("rejected update paris.v1.s0: stale"), Level::kWarn);
  EXPECT_EQ(guess_level("dropped: paris (lease expired)"), Level::kWarn);
  EXPECT_EQ(guess_level("refused join of 'x': duplicate"), Level::kWarn);
  EXPECT_EQ(guess_level("download: unavailable; retrying"), Level::kWarn);
  EXPECT_EQ(guess_level("update paris.v1.s0 rejected: too stale, 10 bytes, reward 0.1"), Level::kWarn);
  EXPECT_EQ(guess_level("joined: paris (cpu, ...)"), Level::kInfo);
  EXPECT_EQ(guess_level("update paris.v1.s0 acknowledged, 10 bytes, reward 0.1"), Level::kInfo);
}

TEST(Terminal, LogsGoToErrWithTheProcessName) {
  MemFile out, err;
  Terminal t(out.f, err.f, false);
  t.set_name("paris");
  t.info("joined at version 3");
  t.result("final");
  const std::string e = err.str();
  EXPECT_NE(e.find("Z INFO  paris  joined at version 3\n"), std::string::npos) << e;
  EXPECT_EQ(e.find("final"), std::string::npos);
  EXPECT_EQ(out.str(), "final\n");
}

TEST(Terminal, QuietKeepsErrorsAndTheResult) {
  MemFile out, err;
  Terminal t(out.f, err.f, false);
  t.set_verbosity(Verbosity::kQuiet);
  t.info("chatty");
  t.warn("warned");
  t.print("progress line");
  t.error("broke");
  t.result("pass@1 50%");
  t.json_result("{\"x\":1}");
  EXPECT_EQ(out.str(), "pass@1 50%\n");
  const std::string e = err.str();
  EXPECT_EQ(e.find("chatty"), std::string::npos);
  EXPECT_EQ(e.find("warned"), std::string::npos);
  EXPECT_NE(e.find("ERROR meshrl  broke"), std::string::npos) << e;
}

TEST(Terminal, JsonPrintsOnlyTheJsonOnStdout) {
  MemFile out, err;
  Terminal t(out.f, err.f, true);
  t.set_verbosity(Verbosity::kJson);
  t.info("chatty");
  t.draw_bar("bar");
  t.print("progress line");
  t.result("human result");
  t.json_result("{\"pass_at_1\":0.5}");
  t.error("broke");
  EXPECT_EQ(out.str(), "{\"pass_at_1\":0.5}\n");
  EXPECT_NE(err.str().find("broke"), std::string::npos);
  EXPECT_EQ(err.str().find("chatty"), std::string::npos);
  EXPECT_FALSE(log_enabled(Verbosity::kJson, Level::kWarn));
  EXPECT_TRUE(log_enabled(Verbosity::kNormal, Level::kInfo));
  EXPECT_FALSE(log_enabled(Verbosity::kNormal, Level::kDebug));
}

TEST(Terminal, LogLineClearsAndRedrawsTheBar) {
  MemFile out, err;
  Terminal t(out.f, err.f, true);
  t.draw_bar("sft [##..] 1/2");
  t.info("hello");
  EXPECT_EQ(out.str(), "\r\033[Ksft [##..] 1/2\r\033[K\r\033[Ksft [##..] 1/2");
  t.end_bar();
  t.end_bar();  // once only
  EXPECT_EQ(out.str().back(), '\n');
  EXPECT_EQ(out.str().find("\n"), out.str().size() - 1);
}

TEST(ProgressFormat, Durations) {
  EXPECT_EQ(format_duration(0), "0:00");
  EXPECT_EQ(format_duration(7.4), "0:07");
  EXPECT_EQ(format_duration(754), "12:34");
  EXPECT_EQ(format_duration(3723), "1:02:03");
  EXPECT_EQ(format_duration(-1), "--:--");
  EXPECT_EQ(format_duration(std::numeric_limits<double>::infinity()), "--:--");
}

TEST(ProgressFormat, BytesAndRates) {
  EXPECT_EQ(format_bytes(812), "812 B");
  EXPECT_EQ(format_bytes(12345), "12.3 KB");
  EXPECT_EQ(format_bytes(4.56e6), "4.56 MB");
  EXPECT_EQ(format_bytes(1.2e9), "1.20 GB");
  EXPECT_EQ(format_rate(12.34, "steps", false), "12.3 steps/s");
  EXPECT_EQ(format_rate(250, "rows", false), "250 rows/s");
  EXPECT_EQ(format_rate(0.25, "steps", false), "4 s/step");
  EXPECT_EQ(format_rate(3.4e6, "", true), "3.40 MB/s");
  EXPECT_EQ(format_rate(0, "steps", false), "-");
}

TEST(ProgressFormat, BarAndEta) {
  EXPECT_EQ(format_bar(0, 10, 10), "[..........]");
  EXPECT_EQ(format_bar(5, 10, 10), "[#####.....]");
  EXPECT_EQ(format_bar(15, 10, 4), "[####]");
  EXPECT_EQ(format_bar(-3, 10, 4), "[....]");
  EXPECT_EQ(format_bar(3, 0, 4), "[....]");
  EXPECT_DOUBLE_EQ(eta_seconds(100, 500, 10), 40);
  EXPECT_DOUBLE_EQ(eta_seconds(500, 500, 10), 0);
  EXPECT_LT(eta_seconds(1, 500, 0), 0);
}

TEST(ProgressFormat, TerminalAndPlainLines) {
  ProgressLine p;
  p.label = "sft";
  p.unit = "steps";
  p.done = 120;
  p.total = 500;
  p.elapsed_s = 10;
  p.rate = 12;
  p.status = "loss 0.41";
  EXPECT_EQ(render_progress(p, true), "sft [#####...................]  120/500  12.0 steps/s  ETA 0:32  loss 0.41");
  EXPECT_EQ(render_progress(p, false), "sft 120/500 (24%)  12.0 steps/s  elapsed 0:10  ETA 0:32  loss 0.41");
  p.done = 500;
  EXPECT_EQ(render_progress(p, false), "sft 500/500 (100%)  12.0 steps/s  elapsed 0:10  done in 0:10  loss 0.41");
  ProgressLine b;
  b.label = "download";
  b.bytes = true;
  b.done = 2000000;
  b.total = 8000000;
  b.rate = 1e6;
  EXPECT_EQ(render_progress(b, true), "download [######..................]  2.00 MB/8.00 MB  1.00 MB/s  ETA 0:06");
}

TEST(Progress, TtyRedrawsAreThrottledAndTheLastAlwaysDrawn) {
  MemFile out, err;
  Terminal t(out.f, err.f, true);
  double now = 100;
  Progress bar("train", {}, t, [&] { return now; });
  for (int i = 1; i <= 9; ++i) {  // 9 updates within 0.09 s: one draw
    bar.update(i, 10);
    now += 0.01;
  }
  std::string s = out.str();
  EXPECT_EQ(s.find("2/10"), std::string::npos);
  EXPECT_NE(s.find("1/10"), std::string::npos);
  now += 0.2;
  bar.update(10, 10, "end");  // the last one draws and ends the line
  s = out.str();
  EXPECT_NE(s.find("10/10"), std::string::npos);
  EXPECT_NE(s.find("done in 0:00"), std::string::npos) << s;
  EXPECT_EQ(s.back(), '\n');
}

TEST(Progress, PlainLinesWithRateAndNothingWhenQuiet) {
  MemFile out, err;
  Terminal t(out.f, err.f, false);
  double now = 0;
  ProgressOptions o;
  o.unit = "rows";
  Progress bar("eval", o, t, [&] { return now; });
  bar.update(0, 4);
  now = 2;
  bar.update(2, 4);
  EXPECT_EQ(out.str(), "eval 0/4 (0%)  -  elapsed 0:00  ETA --:--\neval 2/4 (50%)  1.0 rows/s  elapsed 0:02  ETA 0:02\n");
  t.set_verbosity(Verbosity::kQuiet);
  bar.update(4, 4);
  EXPECT_EQ(out.str().find("4/4"), std::string::npos);
}

TEST(Progress, ThrottledPlainLinesSkipTheFirstAndKeepTheLast) {
  MemFile out, err;
  Terminal t(out.f, err.f, false);
  double now = 0;
  ProgressOptions o;
  o.bytes = true;
  o.plain_every_s = 5;
  Progress bar("download", o, t, [&] { return now; });
  for (int i = 1; i <= 10; ++i) {
    bar.update(i * 1000, 10000);
    now += 1;
  }
  // t = 0 first (silent), a line at t = 5, the last at t = 9.
  const std::string s = out.str();
  EXPECT_EQ(std::count(s.begin(), s.end(), '\n'), 2) << s;
  EXPECT_NE(s.find("download 6.0 KB/10.0 KB (60%)"), std::string::npos) << s;
  EXPECT_NE(s.find("download 10.0 KB/10.0 KB (100%)"), std::string::npos) << s;
}

TEST(Progress, StartAnchorsTheRate) {
  MemFile out, err;
  Terminal t(out.f, err.f, false);
  double now = 10;
  Progress bar("round", {}, t, [&] { return now; });
  bar.start(0);
  now = 14;
  bar.update(2, 4, "reward 0.5");
  EXPECT_EQ(out.str(), "round 2/4 (50%)  2 s/step  elapsed 0:04  ETA 0:04  reward 0.5\n");
}

}  // namespace
}  // namespace meshrl::cli
