// Answer extraction and comparison for free-text tasks (jsonl): where the answer sits in a
// completion (rule), how it is read as a number, and when two answers agree. Knows nothing about
// files, prompts or rewards.
//
// Rules (each picks the LAST candidate, since models restate the question before answering):
//   last_number  the last number in the text: "-1,234.5", "3/4", "42" ("1,234" reads as 1234)
//   gsm8k        the text after the last "####", up to the end of that line
//   boxed        the contents of the last \boxed{...}, nested braces allowed ("\boxed{{1}}" -> "{1}")
//   regex        the last match of a user PCRE2 pattern: capture group 1 if the pattern has one,
//                else the whole match. PCRE2 rather than std::regex because libstdc++'s std::regex
//                recurses per character (a long completion can overflow the stack) and has no
//                match limit; PCRE2 runs with a match limit and in byte mode, so invalid UTF-8
//                from a byte-level model is just bytes.
// Numbers: optional sign, optional '$', digits with optional ",ddd" groups, optional ".digits",
// optional "/digits" (a fraction), optional trailing '.' (end of sentence).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace meshrl::tasks {

// The part of a completion that holds the answer: everything before the first stop string.
struct AnswerText {
  std::string_view body;
  bool ended_with_stop = false;  // a stop string occurs and ends the completion exactly
};
AnswerText cut_at_stop(std::string_view completion, const std::vector<std::string>& stops);

std::string_view trim(std::string_view s);

// The whole (trimmed) string as a number, or nullopt.
std::optional<double> parse_number(std::string_view s);

// The last number in free text (as written, sign included), or nullopt.
std::optional<std::string_view> find_last_number(std::string_view text);

std::optional<std::string> extract_gsm8k(std::string_view text);
std::optional<std::string> extract_boxed(std::string_view text);

// numeric: both sides parse as numbers and |got - want| <= tolerance * max(1, |want|).
// exact:   the trimmed strings are equal.
bool answers_match(std::string_view got, std::string_view want, bool numeric, double tolerance);

class AnswerExtractor {
 public:
  // rule is one of last_number | gsm8k | boxed | regex; a bad pattern fails naming `where`.
  static Result<AnswerExtractor> create(const std::string& rule, const std::string& pattern, const std::string& where);
  std::optional<std::string> extract(std::string_view text) const;
  const std::string& rule() const { return rule_; }

 private:
  struct Regex;
  std::string rule_;
  std::shared_ptr<const Regex> regex_;  // immutable after create(), shared by copies and threads
};

}  // namespace meshrl::tasks
