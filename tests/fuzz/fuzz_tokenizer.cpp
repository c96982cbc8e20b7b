// libFuzzer target: bytes -> tokenizer.json text -> load_tokenizer_from_string; when it loads,
// encode and decode a short fixed string. Any crash, hang or sanitizer report is a bug: every
// malformed file must come back as a Status.
//   CXX=clang++ CC=clang cmake -S . -B build-fuzz -G Ninja -DMESHRL_FUZZ=ON
//   cmake --build build-fuzz --target fuzz_tokenizer
//   ./build-fuzz/tests/fuzz/fuzz_tokenizer -max_total_time=60 tests/fuzz/corpus/fuzz_tokenizer
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace meshrl::tokenizer;
  std::string_view json(reinterpret_cast<const char*>(data), size);
  auto tok = load_tokenizer_from_string(json, "<fuzz>");
  if (!tok.is_ok()) return 0;
  static constexpr std::string_view kText = "Hello, wörld! 2024 <|im_end|>\n\t中文 😀 it's  ok";
  auto ids = tok.value()->encode(kText);
  if (!ids.is_ok()) return 0;  // e.g. a regex over its match limit, or a byte with no token
  auto back = tok.value()->decode(ids.value());
  // Every id encode() produced must decode.
  if (!back.is_ok()) std::abort();
  (void)tok.value()->eos_id();
  (void)tok.value()->token_to_id("<|im_end|>");
  return 0;
}
