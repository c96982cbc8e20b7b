// Download caps: the most bytes a node takes from one download, computed from its own model's
// shapes (pinned by the manifest's config hash and parameter count), whatever the coordinator
// declares. A stream declaring more is refused at its first chunk (coordinator_client.h).
// Knows nothing about the network or the node loop.
#pragma once

#include <cstdint>
#include <string>

#include "core/status.h"
#include "mesh/codec.h"
#include "mesh/named_tensors.h"

namespace meshrl::mesh {

// The most bytes an encoding of a parameter set shaped like `like` can take with `codec`: the
// format's header and records plus each payload's raw size, or zstd's worst-case bound on it when
// the codec compresses (update_format.h). Saturates at UINT64_MAX.
uint64_t max_encoded_bytes(const NamedTensors& like, const CodecConfig& codec);

// What a node takes from one download: full weights and a [lora] run's base as fp32 (compressed
// or not), a broadcast as the run's broadcast codec.
struct DownloadCaps {
  uint64_t weights = 0;
  uint64_t broadcast = 0;
};
DownloadCaps download_caps(const NamedTensors& params, const CodecConfig& broadcast_codec);

// The transport refuses a stream declaring more than the cap before holding it; this catches a
// transport that does not. Fails (kDataLoss) when `got` bytes of `what` exceed `cap`, naming the node.
Status check_download_size(const std::string& node, uint64_t got, uint64_t cap, const std::string& what);

}  // namespace meshrl::mesh
