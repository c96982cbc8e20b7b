// Answer extraction and comparison. See answer.h.
#include "tasks/answer.h"

#include <charconv>
#include <cmath>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

namespace meshrl::tasks {
namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_alnum(char c) { return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

// Scans a number body starting at s[i] (a digit): digits, ",ddd" groups, ".digits", "/digits".
// Returns the end position; fills the cleaned decimal text (commas removed) and the denominator.
size_t scan_number(std::string_view s, size_t i, std::string* decimal, std::string* denominator) {
  size_t j = i;
  while (j < s.size() && is_digit(s[j])) decimal->push_back(s[j++]);
  // ",ddd" counts as a thousands group only with exactly three digits after the comma.
  while (j + 3 < s.size() && s[j] == ',' && is_digit(s[j + 1]) && is_digit(s[j + 2]) && is_digit(s[j + 3]) &&
         (j + 4 >= s.size() || !is_digit(s[j + 4]))) {
    decimal->append(s.substr(j + 1, 3));
    j += 4;
  }
  if (j + 1 < s.size() && s[j] == '.' && is_digit(s[j + 1])) {
    decimal->push_back('.');
    ++j;
    while (j < s.size() && is_digit(s[j])) decimal->push_back(s[j++]);
  }
  if (j + 1 < s.size() && s[j] == '/' && is_digit(s[j + 1])) {
    size_t k = j + 1;
    std::string d;
    while (k < s.size() && is_digit(s[k])) d.push_back(s[k++]);
    // "6/0" is not a fraction: the number ends before the slash.
    if (d.find_first_not_of('0') != std::string::npos) {
      *denominator = std::move(d);
      j = k;
    }
  }
  return j;
}

std::optional<double> to_double(const std::string& text) {
  double v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);  // locale-free
  if (ec != std::errc() || end != text.data() + text.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

}  // namespace

AnswerText cut_at_stop(std::string_view completion, const std::vector<std::string>& stops) {
  size_t best = std::string_view::npos, best_len = 0;
  for (const std::string& s : stops) {
    const size_t p = completion.find(s);
    if (p < best) {
      best = p;
      best_len = s.size();
    }
  }
  if (best == std::string_view::npos) return {completion, false};
  return {completion.substr(0, best), best + best_len == completion.size()};
}

std::string_view trim(std::string_view s) {
  const char* ws = " \t\r\n\f\v";
  const size_t b = s.find_first_not_of(ws);
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(ws) - b + 1);
}

std::optional<double> parse_number(std::string_view s) {
  s = trim(s);
  bool negative = false;
  size_t i = 0;
  if (i < s.size() && (s[i] == '-' || s[i] == '+')) negative = s[i++] == '-';
  if (i < s.size() && s[i] == '$') ++i;
  if (i >= s.size() || !is_digit(s[i])) return std::nullopt;
  std::string decimal, denominator;
  size_t end = scan_number(s, i, &decimal, &denominator);
  if (end + 1 == s.size() && s[end] == '.') ++end;  // "42." at the end of a sentence
  if (end != s.size()) return std::nullopt;
  std::optional<double> v = to_double(decimal);
  if (!v) return std::nullopt;
  if (!denominator.empty()) {
    std::optional<double> d = to_double(denominator);
    if (!d || *d == 0) return std::nullopt;
    *v /= *d;
  }
  return negative ? -*v : *v;
}

std::optional<std::string_view> find_last_number(std::string_view text) {
  std::optional<std::string_view> last;
  size_t i = 0;
  while (i < text.size()) {
    // A number starts at a digit that does not continue a word or another number ("x2", "1.5").
    if (!is_digit(text[i]) || (i > 0 && (is_alnum(text[i - 1]) || text[i - 1] == '.'))) {
      ++i;
      continue;
    }
    size_t start = i;
    if (start > 0 && text[start - 1] == '-' && (start == 1 || !is_alnum(text[start - 2]))) --start;
    std::string decimal, denominator;
    const size_t end = scan_number(text, i, &decimal, &denominator);
    last = text.substr(start, end - start);
    i = end;
  }
  return last;
}

std::optional<std::string> extract_gsm8k(std::string_view text) {
  const size_t p = text.rfind("####");
  if (p == std::string_view::npos) return std::nullopt;
  std::string_view rest = text.substr(p + 4);
  rest = rest.substr(0, rest.find('\n'));
  rest = trim(rest);
  if (rest.empty()) return std::nullopt;
  return std::string(rest);
}

std::optional<std::string> extract_boxed(std::string_view text) {
  static constexpr std::string_view kOpen = "\\boxed{";
  const size_t p = text.rfind(kOpen);
  if (p == std::string_view::npos) return std::nullopt;
  int depth = 1;
  for (size_t j = p + kOpen.size(); j < text.size(); ++j) {
    if (text[j] == '{') ++depth;
    if (text[j] == '}' && --depth == 0) return std::string(text.substr(p + kOpen.size(), j - p - kOpen.size()));
  }
  return std::nullopt;  // unbalanced: the model stopped inside the box
}

bool answers_match(std::string_view got, std::string_view want, bool numeric, double tolerance) {
  if (!numeric) return trim(got) == trim(want);
  const std::optional<double> g = parse_number(got), w = parse_number(want);
  if (!g || !w) return false;
  return std::fabs(*g - *w) <= tolerance * std::max(1.0, std::fabs(*w));
}

struct AnswerExtractor::Regex {
  pcre2_code* code = nullptr;
  uint32_t n_groups = 0;
  ~Regex() { pcre2_code_free(code); }
};

Result<AnswerExtractor> AnswerExtractor::create(const std::string& rule, const std::string& pattern, const std::string& where) {
  AnswerExtractor e;
  e.rule_ = rule;
  if (rule == "last_number" || rule == "gsm8k" || rule == "boxed") return e;
  if (rule != "regex") return invalid_argument(where + ": unknown answer_rule \"" + rule + "\"");
  int err = 0;
  PCRE2_SIZE offset = 0;
  auto rx = std::make_shared<Regex>();
  rx->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), 0, &err, &offset, nullptr);
  if (!rx->code) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof msg);
    return invalid_argument(where + ": key 'jsonl.answer_regex' does not compile at offset " + std::to_string(offset) + ": " +
                            reinterpret_cast<const char*>(msg));
  }
  pcre2_pattern_info(rx->code, PCRE2_INFO_CAPTURECOUNT, &rx->n_groups);
  e.regex_ = std::move(rx);
  return e;
}

std::optional<std::string> AnswerExtractor::extract(std::string_view text) const {
  if (rule_ == "last_number") {
    auto n = find_last_number(text);
    if (!n) return std::nullopt;
    return std::string(*n);
  }
  if (rule_ == "gsm8k") return extract_gsm8k(text);
  if (rule_ == "boxed") return extract_boxed(text);

  // regex: a match context per call keeps this thread-safe; the limits stop catastrophic patterns.
  std::unique_ptr<pcre2_match_context, decltype(&pcre2_match_context_free)> ctx(pcre2_match_context_create(nullptr),
                                                                               pcre2_match_context_free);
  std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> md(
      pcre2_match_data_create_from_pattern(regex_->code, nullptr), pcre2_match_data_free);
  if (!ctx || !md) return std::nullopt;
  pcre2_set_match_limit(ctx.get(), 1000000);
  pcre2_set_depth_limit(ctx.get(), 10000);
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  std::optional<std::string> last;
  size_t offset = 0;
  while (offset <= text.size()) {
    const int rc = pcre2_match(regex_->code, subject, text.size(), offset, 0, md.get(), ctx.get());
    if (rc < 0) break;  // no further match, or a limit hit: keep what was found so far
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md.get());
    size_t b = ov[0], e = ov[1];
    if (regex_->n_groups >= 1 && rc >= 2 && ov[2] != PCRE2_UNSET) {
      b = ov[2];
      e = ov[3];
    }
    last = std::string(text.substr(b, e - b));
    offset = ov[1] > ov[0] ? ov[1] : ov[1] + 1;  // step past an empty match
  }
  return last;
}

}  // namespace meshrl::tasks
