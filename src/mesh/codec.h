// The pseudo-gradient codec: NamedTensors <-> bytes on the wire, behind one interface so the
// coordinator and nodes pick a codec from the run config and never see its inside. Codecs: fp32
// (raw, the baseline), int8 and int4 (blockwise, quantize.h), each followed by zstd unless the
// level is 0. The bytes follow update_format.h (versioned, self-describing, hostile-safe).
// Knows nothing about models, optimisers, error feedback (error_feedback.h) or the network.
//
// Typical node round:
//   auto delta = ef.compensate(pseudo_gradient);         // error_feedback.h
//   auto bytes = codec->encode(delta, seed).value();
//   auto sent  = codec->decode(bytes, limits).value();    // exactly what the receiver will see
//   ef.update(delta, sent);
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "core/status.h"
#include "mesh/mesh_config.h"
#include "mesh/named_tensors.h"
#include "mesh/update_format.h"

namespace meshrl::mesh {

struct CodecConfig {
  CodecId id = CodecId::kInt8;
  uint32_t block_size = kDefaultBlockSize;  // int8 / int4: values per scale, 1..65536
  int zstd_level = 3;                       // 0 = no zstd; 1..19 usual (3 is zstd's default)
  bool stochastic_rounding = false;         // see quantize.h; off by default
  double int2_density = 0.0;                // int2 only: 0 = absmax ternary; (0, 1] = sparse (quantize.h)
  bool int2_mean_scale = false;             // int2 only: absmax codes, least-squares scales (quantize.h)
};

class UpdateCodec {
 public:
  virtual ~UpdateCodec() = default;
  virtual CodecId id() const = 0;
  virtual const CodecConfig& config() const = 0;

  // Encodes the set in its order. Fails (kInvalidArgument, naming the tensor) on an invalid set
  // (check_named_tensors) or a non-finite value. `rounding_seed` matters only with stochastic
  // rounding: derive it from (run, version, node) so a round is reproducible.
  virtual Result<std::string> encode(const NamedTensors& update, uint64_t rounding_seed = 0) const = 0;

  // Decodes bytes this codec wrote: as decode_update, and also refuses another codec's bytes
  // (a peer configured differently).
  virtual Result<NamedTensors> decode(std::string_view bytes, const UpdateDecodeLimits& limits,
                                      std::string_view source = "update") const = 0;
};

// Fails (kInvalidArgument) on an unknown codec id, block size or zstd level out of range.
Result<std::unique_ptr<UpdateCodec>> make_codec(const CodecConfig& config);

// The run's codec as [mesh] sets it, the one place the coordinator and the nodes read it from.
// Fails (kInvalidArgument) on an unknown codec name.
Result<CodecConfig> codec_config(const MeshSection& mesh);
// The broadcast's: codec_config with [mesh] broadcast_codec's id when that is set.
Result<CodecConfig> broadcast_codec_config(const MeshSection& mesh);

// Decodes any codec's bytes into new contiguous float32 CPU tensors with the encoded names and
// shapes. All failures of parse_update / decode_update_tensor (update_format.h); nothing larger
// than limits.max_decoded_bytes (plus one tensor's raw payload) is allocated.
Result<NamedTensors> decode_update(std::string_view bytes, const UpdateDecodeLimits& limits,
                                   std::string_view source = "update");

}  // namespace meshrl::mesh
