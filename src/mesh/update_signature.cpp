#include "mesh/update_signature.h"

#include <cstring>

namespace meshrl::mesh {

namespace {

void put_u32(std::string& s, uint32_t x) {
  for (int i = 0; i < 4; ++i) s += static_cast<char>((x >> (8 * i)) & 0xff);
}
void put_u64(std::string& s, uint64_t x) {
  for (int i = 0; i < 8; ++i) s += static_cast<char>((x >> (8 * i)) & 0xff);
}
void put_i64(std::string& s, int64_t v) { put_u64(s, static_cast<uint64_t>(v)); }
void put_f64(std::string& s, double d) {
  uint64_t x;
  std::memcpy(&x, &d, sizeof x);
  put_u64(s, x);
}
void put_bytes(std::string& s, std::string_view b) {
  put_u32(s, static_cast<uint32_t>(b.size()));
  s.append(b);
}

}  // namespace

std::string update_signing_message(const ::meshrl::v1::UpdateHeader& h, std::string_view payload_hash) {
  std::string m = "meshrl-update-v2";
  put_bytes(m, h.run_id());
  put_bytes(m, h.name());
  put_i64(m, h.base_version());
  put_i64(m, h.seq());
  put_i64(m, h.n_samples());
  m.append(payload_hash);
  const auto& st = h.stats();
  put_f64(m, st.reward_mean());
  put_f64(m, st.reward_std());
  put_f64(m, st.correct_rate());
  put_i64(m, st.inner_steps());
  put_f64(m, st.kl());
  put_f64(m, st.entropy());
  put_i64(m, st.n_scored());
  put_bytes(m, st.scored_digest());
  put_i64(m, st.verifier_timeouts());
  put_i64(m, st.verifier_crashes());
  put_i64(m, st.verifier_garbage());
  return m;
}

void sign_update(::meshrl::v1::UpdateHeader& h, const std::string& run_id, std::string_view payload, const trust::SigningKey& key) {
  const std::string digest = trust::blake2b_256(payload);
  h.set_run_id(run_id);
  h.set_payload_hash(digest);
  h.set_signature(key.sign(update_signing_message(h, digest)));
}

std::string check_update_signature(const ::meshrl::v1::UpdateHeader& h, std::string_view payload_hash, std::string_view public_key,
                                   std::string_view run_id) {
  if (public_key.size() != trust::kPublicKeyBytes) return "no Ed25519 key registered for node '" + h.name() + "'; join again";
  if (h.payload_hash() != payload_hash) return "the payload's BLAKE2b-256 differs from the signed payload_hash";
  if (h.run_id() != run_id) return "the update is signed for run '" + h.run_id().substr(0, 64) + "', not " + std::string(run_id);
  if (!trust::verify_signature(public_key, update_signing_message(h, payload_hash), h.signature()))
    return "the signature does not verify with the key node '" + h.name() + "' registered at join (a field was changed after signing, "
           "or another key signed it)";
  return {};
}

}  // namespace meshrl::mesh
