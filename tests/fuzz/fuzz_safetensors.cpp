// libFuzzer target for the safetensors header parser (src/model/safetensors.h): any bytes must give
// a header or an error, never a crash, a hang or a huge allocation. A parsed header must also
// survive a write/parse round trip unchanged.
//   CXX=clang++ CC=clang cmake -S . -B build-fuzz -G Ninja -DMESHRL_FUZZ=ON
//   cmake --build build-fuzz --target fuzz_safetensors
//   build-fuzz/tests/fuzz/fuzz_safetensors tests/fuzz/corpus/fuzz_safetensors -max_total_time=60
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "model/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace meshrl::model;
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto parsed = parse_safetensors(bytes, "fuzz");
  if (!parsed.is_ok()) return 0;
  const auto& h = parsed.value();
  // Invariants the parser promises.
  uint64_t prev_end = 0;
  for (const auto& t : h.tensors) {
    if (t.begin > t.end || t.end > size - h.data_offset || t.begin < prev_end) std::abort();
    if (static_cast<uint64_t>(t.numel()) * dtype_size(t.dtype) != t.n_bytes()) std::abort();
    prev_end = t.end;
  }
  // Re-serialising the header in front of the same data section parses to the same entries.
  std::string again = serialize_safetensors_header(h.tensors, h.metadata);
  again.append(bytes.substr(h.data_offset));
  auto reparsed = parse_safetensors(again, "fuzz-rewritten");
  if (!reparsed.is_ok() || reparsed.value().tensors.size() != h.tensors.size() ||
      reparsed.value().metadata != h.metadata)
    std::abort();
  for (size_t i = 0; i < h.tensors.size(); ++i) {
    const auto& a = h.tensors[i];
    const auto& b = reparsed.value().tensors[i];
    if (a.name != b.name || a.dtype != b.dtype || a.shape != b.shape || a.begin != b.begin || a.end != b.end)
      std::abort();
  }
  return 0;
}
