// Regex: a compiled PCRE2 pattern used by the pre-tokenizers to cut text into pieces.
// Owns the compiled code and its match context; knows nothing about vocabularies.
//
// Patterns compile with PCRE2_UTF | PCRE2_UCP (so \s, \p{L}, \p{N} are Unicode-aware, as in the
// Hugging Face tokenizers) and are JIT-compiled when the library supports it. Every match runs
// under a match limit, a depth limit and a heap limit: a hostile pattern (catastrophic
// backtracking) makes find_all return an error quickly instead of hanging the process.
// A Regex is immutable after compile and safe to use from several threads at once.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"

namespace meshrl::tokenizer {

struct RegexLimits {
  uint32_t match_limit = 2'000'000;   // backtracking steps per match attempt
  uint32_t depth_limit = 100'000;     // nested backtracking frames (interpreter only)
  uint32_t heap_limit_kib = 65'536;   // heap for backtracking frames (interpreter only)
  uint32_t max_pattern_bytes = 65'536;
};

class Regex {
 public:
  // `literal`: match `pattern` as plain text (Split's {"String": ...} form).
  // `what` names the pattern in errors, e.g. "tokenizer.json: pre_tokenizer.pattern.Regex".
  static Result<Regex> compile(std::string_view pattern, bool literal, std::string what,
                               const RegexLimits& limits = {});

  // Appends the [start, end) byte ranges of the successive non-empty matches in `subject`
  // (which must be valid UTF-8; not re-checked). Empty matches are skipped.
  // Fails when a match limit is exceeded or PCRE2 reports any other error.
  Status find_all(std::string_view subject, std::vector<std::pair<uint32_t, uint32_t>>* matches) const;

  bool jit() const { return jit_; }
  const std::string& what() const { return what_; }

 private:
  struct Impl;
  std::shared_ptr<const Impl> impl_;
  bool jit_ = false;
  std::string what_;
};

}  // namespace meshrl::tokenizer
