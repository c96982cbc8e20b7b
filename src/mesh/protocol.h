// Constants of the wire protocol (proto/meshrl.proto) shared by the coordinator and the node:
// its version, chunk and message size bounds, and the rule for node names. Torch-free and
// gRPC-free so both sides and the tests agree on one set of numbers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace meshrl::mesh {

// Bump when a field's meaning changes (never reuse a field number). A node of another version is
// refused at Join with both versions in the reason.
// 2: signed updates (JoinRequest.signing_key, UpdateHeader.run_id/payload_hash/signature).
// 3: reward audits (RewardStats.n_scored/scored_digest, SubmitReply.audit, AnswerAudit) and the
//    [lora] frozen-base download (DownloadRequest.base): an older node would fail every audit.
// 4: the signature covers n_samples and every RewardStats field (an admitted node can no longer
//    restate its weight or its rollout commitment), RewardStats gains the verifier failure counts.
inline constexpr uint32_t kProtocolVersion = 4;

// Weights, broadcasts and updates travel in chunks of at most this many bytes...
inline constexpr size_t kChunkBytes = size_t{1} << 20;
// ...and no single gRPC message may exceed this (set on the server and on every channel; gRPC's
// own default receive limit is 4 MiB, send unlimited).
inline constexpr int kMaxMessageBytes = 8 << 20;

// Deadlines of unary calls (Join, Heartbeat, Leave) in seconds; streams get one sized by payload.
inline constexpr double kUnaryDeadlineS = 10.0;

// A node name: 1..64 of [a-z0-9_-]. Returns an empty string when valid, else why not.
inline std::string check_node_name(std::string_view name) {
  if (name.empty() || name.size() > 64) return "node name must be 1..64 characters, got " + std::to_string(name.size());
  for (char c : name)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-'))
      return "node name '" + std::string(name) + "' may only use a-z, 0-9, '_' and '-'";
  return {};
}

}  // namespace meshrl::mesh
