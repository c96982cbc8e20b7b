// Download caps from a model's shapes. See download_caps.h.
#include "mesh/download_caps.h"

#include <zstd.h>

#include "mesh/update_format.h"

namespace meshrl::mesh {

uint64_t max_encoded_bytes(const NamedTensors& like, const CodecConfig& codec) {
  auto add = [](uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; };
  uint64_t total = kUpdateHeaderBytes;
  for (size_t i = 0; i < like.size(); ++i) {
    const torch::Tensor& t = like.tensors[i];
    const uint64_t raw = update_raw_payload_bytes(codec.id, static_cast<uint64_t>(t.numel()), codec.block_size);
    uint64_t stored = raw;
    if (codec.zstd_level != 0) {
      // zstd's single-frame worst case, plus room for the frame's checksum.
      const size_t bound = raw > SIZE_MAX ? 0 : ZSTD_compressBound(static_cast<size_t>(raw));
      stored = ZSTD_isError(bound) || bound == 0 ? UINT64_MAX : add(static_cast<uint64_t>(bound), 64);
    }
    total = add(total, add(update_record_bytes(like.names[i].size(), static_cast<size_t>(t.dim())), stored));
  }
  return total;
}

DownloadCaps download_caps(const NamedTensors& params, const CodecConfig& broadcast_codec) {
  CodecConfig fp32;  // full weights: fp32, with zstd or without (the bound covers both)
  fp32.id = CodecId::kFp32;
  fp32.zstd_level = 3;
  return {max_encoded_bytes(params, fp32), max_encoded_bytes(params, broadcast_codec)};
}

Status check_download_size(const std::string& node, uint64_t got, uint64_t cap, const std::string& what) {
  if (got <= cap) return Status::ok();
  return data_loss("[node " + node + "] the coordinator sent " + std::to_string(got) + " bytes for the " + what + ", more than the " +
                   std::to_string(cap) + " its shapes can encode to; refused");
}

}  // namespace meshrl::mesh
