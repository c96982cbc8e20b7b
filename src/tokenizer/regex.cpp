#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizer/regex.h"

#include <pcre2.h>

#include "tokenizer/utf8.h"

namespace meshrl::tokenizer {
namespace {

std::string pcre2_message(int code) {
  PCRE2_UCHAR buf[256];
  int n = pcre2_get_error_message(code, buf, sizeof(buf));
  if (n < 0) return "PCRE2 error " + std::to_string(code);
  return std::string(reinterpret_cast<const char*>(buf), static_cast<size_t>(n));
}

// One JIT stack and one match block per thread: matching is then allocation-free, and a Regex can
// be shared by threads because neither is stored in it.
struct ThreadScratch {
  pcre2_jit_stack* jit_stack = nullptr;
  pcre2_match_data* match_data = nullptr;
  ThreadScratch() {
    // 32 KiB to start, 1 MiB at most: deep enough for long whitespace runs under the limits above.
    jit_stack = pcre2_jit_stack_create(32 * 1024, 1024 * 1024, nullptr);
    match_data = pcre2_match_data_create(1, nullptr);
  }
  ~ThreadScratch() {
    if (jit_stack) pcre2_jit_stack_free(jit_stack);
    if (match_data) pcre2_match_data_free(match_data);
  }
};

ThreadScratch& thread_scratch() {
  thread_local ThreadScratch s;
  return s;
}

pcre2_jit_stack* jit_stack_callback(void*) { return thread_scratch().jit_stack; }

}  // namespace

struct Regex::Impl {
  pcre2_code* code = nullptr;
  pcre2_match_context* mctx = nullptr;
  ~Impl() {
    if (mctx) pcre2_match_context_free(mctx);
    if (code) pcre2_code_free(code);
  }
};

Result<Regex> Regex::compile(std::string_view pattern, bool literal, std::string what, const RegexLimits& limits) {
  if (pattern.size() > limits.max_pattern_bytes)
    return invalid_argument("[tokenizer] " + what + ": pattern is " + std::to_string(pattern.size()) +
                            " bytes, over the limit of " + std::to_string(limits.max_pattern_bytes));
  pcre2_compile_context* cctx = pcre2_compile_context_create(nullptr);
  if (!cctx) return Status(StatusCode::kInternal, "[tokenizer] " + what + ": out of memory");
  pcre2_set_max_pattern_length(cctx, limits.max_pattern_bytes);
  // PCRE2_LITERAL refuses the pattern-syntax options, which mean nothing for plain text anyway.
  const uint32_t options = literal ? (PCRE2_UTF | PCRE2_LITERAL) : (PCRE2_UTF | PCRE2_UCP | PCRE2_NEVER_BACKSLASH_C);
  int err = 0;
  PCRE2_SIZE err_offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), options, &err,
                                   &err_offset, cctx);
  pcre2_compile_context_free(cctx);
  if (!code)
    return invalid_argument("[tokenizer] " + what + ": regex does not compile at offset " +
                            std::to_string(err_offset) + ": " + pcre2_message(err));
  auto impl = std::make_shared<Impl>();
  impl->code = code;
  impl->mctx = pcre2_match_context_create(nullptr);
  if (!impl->mctx) return Status(StatusCode::kInternal, "[tokenizer] " + what + ": out of memory");
  pcre2_set_match_limit(impl->mctx, limits.match_limit);
  pcre2_set_depth_limit(impl->mctx, limits.depth_limit);
  pcre2_set_heap_limit(impl->mctx, limits.heap_limit_kib);
  Regex r;
  // Without JIT support (or if JIT compilation fails) PCRE2 falls back to its interpreter.
  r.jit_ = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
  if (r.jit_) pcre2_jit_stack_assign(impl->mctx, jit_stack_callback, nullptr);
  r.impl_ = std::move(impl);
  r.what_ = std::move(what);
  return r;
}

Status Regex::find_all(std::string_view subject, std::vector<std::pair<uint32_t, uint32_t>>* matches) const {
  ThreadScratch& scratch = thread_scratch();
  if (!scratch.match_data || (jit_ && !scratch.jit_stack))
    return Status(StatusCode::kInternal, "[tokenizer] " + what_ + ": cannot allocate PCRE2 match data");
  const auto* s = reinterpret_cast<PCRE2_SPTR>(subject.data());
  size_t pos = 0;
  while (pos < subject.size()) {
    // The subject was validated once by the caller, so PCRE2 need not re-check it per call.
    int rc = pcre2_match(impl_->code, s, subject.size(), pos, PCRE2_NO_UTF_CHECK, scratch.match_data, impl_->mctx);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0)
      return invalid_argument("[tokenizer] " + what_ + ": regex match failed at byte " + std::to_string(pos) +
                              " of a " + std::to_string(subject.size()) + "-byte piece: " + pcre2_message(rc));
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(scratch.match_data);
    size_t start = ov[0], end = ov[1];
    if (end > start && start >= pos) {
      matches->emplace_back(static_cast<uint32_t>(start), static_cast<uint32_t>(end));
      pos = end;
    } else {
      // An empty match (or a \K oddity): step over one character so the scan always advances.
      size_t at = start > pos ? start : pos;
      if (at >= subject.size()) break;
      utf8_decode_next(subject, &at);
      pos = at;
    }
  }
  return Status::ok();
}

}  // namespace meshrl::tokenizer
