// libFuzzer target for the update wire format (src/mesh/update_format.h): any bytes must give a
// decoded update or an error, never a crash, a hang or an allocation past the cap. A decoded
// update must hold only finite values, and re-encoding it must decode again (fp32: bit for bit).
//   CXX=clang++ CC=clang cmake -S . -B build-fuzz -G Ninja -DMESHRL_FUZZ=ON
//   cmake --build build-fuzz --target fuzz_update_decoder
//   build-fuzz/tests/fuzz/fuzz_update_decoder tests/fuzz/corpus/fuzz_update_decoder -max_total_time=60
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <vector>

#include "mesh/update_format.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace meshrl::mesh;
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  const UpdateDecodeLimits limits{16u << 20, 256};  // 16 MiB of floats: far below ASan's limit
  auto parsed = parse_update(bytes, limits, "fuzz");
  if (!parsed.is_ok()) return 0;
  const auto& u = parsed.value();
  // Invariants parse_update promises.
  if (u.total_numel * 4 > limits.max_decoded_bytes || u.tensors.size() > limits.max_tensors) std::abort();
  uint64_t end = 0;
  for (const auto& rec : u.tensors) {
    uint64_t product = 1;
    for (int64_t d : rec.shape) product *= static_cast<uint64_t>(d);
    if (product != rec.numel || rec.stored_offset + rec.stored_bytes > size) std::abort();
    end = rec.stored_offset + rec.stored_bytes;
  }
  if (!u.tensors.empty() && end != size) std::abort();

  std::vector<std::vector<float>> values(u.tensors.size());
  for (size_t i = 0; i < u.tensors.size(); ++i) {
    values[i].resize(u.tensors[i].numel);
    if (!decode_update_tensor(u, i, values[i], "fuzz").is_ok()) return 0;
    for (float v : values[i])
      if (!std::isfinite(v)) std::abort();
  }
  // Re-encode what was decoded with the same codec and block sizes: it must decode again, to the
  // same names and shapes; fp32 to the same bits.
  std::vector<UpdateTensorView> views;
  for (size_t i = 0; i < u.tensors.size(); ++i) views.push_back({u.tensors[i].name, u.tensors[i].shape, values[i]});
  UpdateEncodeOptions options;
  options.codec = u.codec;
  options.block_size = u.tensors.empty() || u.codec == CodecId::kFp32 ? 64 : u.tensors[0].block_size;
  options.zstd_level = u.compression == Compression::kZstd ? 1 : 0;
  auto again = write_update(views, options);
  if (!again.is_ok()) std::abort();
  auto reparsed = parse_update(again.value(), limits, "fuzz-reencoded");
  if (!reparsed.is_ok() || reparsed.value().tensors.size() != u.tensors.size()) std::abort();
  for (size_t i = 0; i < u.tensors.size(); ++i) {
    if (reparsed.value().tensors[i].name != u.tensors[i].name || reparsed.value().tensors[i].shape != u.tensors[i].shape)
      std::abort();
    std::vector<float> out(u.tensors[i].numel);
    if (!decode_update_tensor(reparsed.value(), i, out, "fuzz-reencoded").is_ok()) std::abort();
    if (u.codec == CodecId::kFp32 && !out.empty() && std::memcmp(out.data(), values[i].data(), out.size() * 4) != 0)
      std::abort();
  }
  return 0;
}
