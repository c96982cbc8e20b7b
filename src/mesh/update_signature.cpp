#include "mesh/update_signature.h"

namespace meshrl::mesh {

namespace {

void put_u32(std::string& s, uint32_t x) {
  for (int i = 0; i < 4; ++i) s += static_cast<char>((x >> (8 * i)) & 0xff);
}
void put_i64(std::string& s, int64_t v) {
  const uint64_t x = static_cast<uint64_t>(v);
  for (int i = 0; i < 8; ++i) s += static_cast<char>((x >> (8 * i)) & 0xff);
}
void put_bytes(std::string& s, std::string_view b) {
  put_u32(s, static_cast<uint32_t>(b.size()));
  s.append(b);
}

}  // namespace

std::string update_signing_message(std::string_view run_id, std::string_view node, int64_t base_version, int64_t seq,
                                   std::string_view payload_hash) {
  std::string m = "meshrl-update-v1";
  put_bytes(m, run_id);
  put_bytes(m, node);
  put_i64(m, base_version);
  put_i64(m, seq);
  m.append(payload_hash);
  return m;
}

void sign_update(::meshrl::v1::UpdateHeader& h, const std::string& run_id, std::string_view payload, const trust::SigningKey& key) {
  const std::string digest = trust::blake2b_256(payload);
  h.set_run_id(run_id);
  h.set_payload_hash(digest);
  h.set_signature(key.sign(update_signing_message(run_id, h.name(), h.base_version(), h.seq(), digest)));
}

std::string check_update_signature(const ::meshrl::v1::UpdateHeader& h, std::string_view payload_hash, std::string_view public_key,
                                   std::string_view run_id) {
  if (public_key.size() != trust::kPublicKeyBytes) return "no Ed25519 key registered for node '" + h.name() + "'; join again";
  if (h.payload_hash() != payload_hash) return "the payload's BLAKE2b-256 differs from the signed payload_hash";
  if (!trust::verify_signature(public_key, update_signing_message(run_id, h.name(), h.base_version(), h.seq(), payload_hash), h.signature()))
    return "the signature does not verify with the key node '" + h.name() + "' registered at join";
  return {};
}

}  // namespace meshrl::mesh
