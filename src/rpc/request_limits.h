// Bounds on what one request may carry: the length of every string and bytes field, the count of
// every repeated field, and the bytes of fields this build does not know. The service
// (coordinator_service.cpp) checks each request here before it reaches the Coordinator, so nothing
// a node sends can grow the ledger, the log or the dashboard's state by more than these bounds per
// row. Pure functions over the protocol's messages: no gRPC, no Coordinator, no state.
//
// Fields are looked up by their short name, the same in every request message (a node's `name`
// is 64 bytes wherever it appears). A string or bytes field not in the table gets
// kMaxOtherFieldBytes, a repeated field not in the table kMaxOtherRepeated: a field added to the
// protocol later is bounded before anyone remembers to list it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace google::protobuf {
class Message;
}

namespace meshrl::rpc {

inline constexpr size_t kMaxNameBytes = 64;              // node names: [a-z0-9_-]{1,64} (mesh/protocol.h)
inline constexpr size_t kMaxDeviceBytes = 32;            // "cpu", "cuda:0", "mps"
inline constexpr size_t kMaxRunIdBytes = 64;             // run ids are 16 hex digits
inline constexpr size_t kMaxHashTextBytes = 128;         // hex content and config hashes (32 or 64 digits)
inline constexpr size_t kMaxBinaryBytes = 64;            // raw keys, digests and signatures (32 or 64 bytes)
inline constexpr size_t kMaxCompletionBytes = 16 << 10;  // one audited completion's text (proto: <= 16 KiB)
inline constexpr size_t kMaxOtherFieldBytes = 256;       // any other string or bytes field
inline constexpr int64_t kMaxOtherRepeated = 64;         // any other repeated field, elements
inline constexpr size_t kMaxUnknownFieldBytes = 256;     // serialized fields this build does not know

struct RequestLimits {
  // Elements of AuditAnswer.rollouts: the rollouts one update can commit to, which the service
  // sets to the run's inner_steps x prompts_per_step x group_size (mesh::samples_per_update_bound).
  int64_t max_audit_rollouts = 4096;
};

// The byte bound of a string or bytes field by its short name ("device", "completion", ...).
size_t field_byte_limit(std::string_view field_name);

// "" when every field of `request` (nested messages and repeated elements included) is within its
// bound, else the first that is not, its limit and what arrived:
//   "JoinRequest.device is 3145728 bytes, the limit is 32"
//   "AuditAnswer.rollouts has 9000 elements, the limit is 4096"
//   "AuditAnswer.rollouts[3].completion is 20000 bytes, the limit is 16384"
std::string check_request(const google::protobuf::Message& request, const RequestLimits& limits = {});

}  // namespace meshrl::rpc
