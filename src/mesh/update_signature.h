// What a node signs for each update and how the coordinator checks it (trust/signing_key.h for
// the primitives). The signed bytes bind the update to one run, one node, one base version and
// one sequence number, to the payload through its BLAKE2b-256 hash, and to every claim the
// coordinator weighs or records: the samples behind it (its aggregation weight), the reward
// statistics and the rollout commitment that an audit holds the node to.
//
//   "meshrl-update-v2" | u32 len | run_id | u32 len | node | i64 base_version | i64 seq
//     | i64 n_samples | hash[32]
//     | f64 reward_mean | f64 reward_std | f64 correct_rate | i64 inner_steps | f64 kl | f64 entropy
//     | i64 n_scored | u32 len | scored_digest
//     | i64 verifier_timeouts | i64 verifier_crashes | i64 verifier_garbage
//
// (integers little-endian, doubles as their IEEE-754 bits). A captured update is therefore useless
// for another run (wrong_run / bad_signature), another node (bad_signature) or a second
// application (replay: the coordinator keeps the highest accepted seq per node in its ledger),
// and no field of it can be restated without the node's key. The session id is not signed, so a
// retry after a rejoin resends the same signed header.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "meshrl.pb.h"
#include "trust/signing_key.h"

namespace meshrl::mesh {

// The bytes signed for header `h` (its signature, session and protocol fields are not read).
std::string update_signing_message(const ::meshrl::v1::UpdateHeader& h, std::string_view payload_hash);

// Fills run_id, payload_hash and signature of `h`. Call it last: every other field (name,
// base_version, seq, n_samples, stats) must already hold what is sent.
void sign_update(::meshrl::v1::UpdateHeader& h, const std::string& run_id, std::string_view payload, const trust::SigningKey& key);

// Empty when `h` is signed by `public_key` for `run_id` over a payload whose BLAKE2b-256 is
// `payload_hash` (computed by the caller from the bytes that arrived); else why not.
std::string check_update_signature(const ::meshrl::v1::UpdateHeader& h, std::string_view payload_hash, std::string_view public_key,
                                   std::string_view run_id);

}  // namespace meshrl::mesh
