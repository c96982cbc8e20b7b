// What a node signs for each update and how the coordinator checks it (trust/signing_key.h for
// the primitives). The signed bytes bind the update to one run, one node, one base version and
// one sequence number, and to the payload through its BLAKE2b-256 hash:
//
//   "meshrl-update-v1" | u32 len | run_id | u32 len | node | i64 base_version | i64 seq | hash[32]
//
// (integers little-endian). A captured update is therefore useless for another run (wrong_run /
// bad_signature), another node (bad_signature) or a second application (replay: the coordinator
// keeps the highest seq per node in its ledger). The session id is not signed, so a retry after a
// rejoin resends the same signed header.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "meshrl.pb.h"
#include "trust/signing_key.h"

namespace meshrl::mesh {

std::string update_signing_message(std::string_view run_id, std::string_view node, int64_t base_version, int64_t seq,
                                   std::string_view payload_hash);

// Fills run_id, payload_hash and signature of `h` (name, base_version and seq must be set).
void sign_update(::meshrl::v1::UpdateHeader& h, const std::string& run_id, std::string_view payload, const trust::SigningKey& key);

// Empty when `h` is signed by `public_key` for `run_id` over a payload whose BLAKE2b-256 is
// `payload_hash` (computed by the caller from the bytes that arrived); else why not.
std::string check_update_signature(const ::meshrl::v1::UpdateHeader& h, std::string_view payload_hash, std::string_view public_key,
                                   std::string_view run_id);

}  // namespace meshrl::mesh
