#include "trust/signing_key.h"

#include <sodium.h>

#include <cstdlib>

#include "core/file_io.h"
#include "trust/private_file.h"

namespace meshrl::trust {

namespace {

void ensure_sodium() {
  // Thread-safe and idempotent; fails only when the system has no entropy source at all.
  static const bool ok = sodium_init() >= 0;
  if (!ok) std::abort();
}

constexpr const char* kKeyFileTag = "meshrl-ed25519-seed ";

}  // namespace

SigningKey SigningKey::from_seed(const unsigned char* seed) {
  ensure_sodium();
  SigningKey k;
  unsigned char pk[crypto_sign_PUBLICKEYBYTES];
  crypto_sign_seed_keypair(pk, k.secret_.data(), seed);
  k.public_key_.assign(reinterpret_cast<const char*>(pk), sizeof pk);
  return k;
}

SigningKey SigningKey::generate() {
  ensure_sodium();
  unsigned char seed[crypto_sign_SEEDBYTES];
  randombytes_buf(seed, sizeof seed);
  SigningKey k = from_seed(seed);
  sodium_memzero(seed, sizeof seed);
  return k;
}

Result<SigningKey> SigningKey::load_or_create(const std::filesystem::path& file) {
  ensure_sodium();
  if (!std::filesystem::exists(file)) {
    unsigned char seed[crypto_sign_SEEDBYTES];
    randombytes_buf(seed, sizeof seed);
    const std::string text = kKeyFileTag + to_hex(std::string_view(reinterpret_cast<const char*>(seed), sizeof seed)) + "\n";
    SigningKey k = from_seed(seed);
    sodium_memzero(seed, sizeof seed);
    MESHRL_RETURN_IF_ERROR(write_private_file(file, text));
    return k;
  }
  MESHRL_ASSIGN_OR_RETURN(std::string text, read_file(file, 4096));
  const std::string tag = kKeyFileTag;
  unsigned char seed[crypto_sign_SEEDBYTES];
  size_t n = 0;
  if (text.rfind(tag, 0) != 0 ||
      sodium_hex2bin(seed, sizeof seed, text.data() + tag.size(), text.size() - tag.size(), "\n", &n, nullptr) != 0 ||
      n != sizeof seed)
    return invalid_argument("[signing key] " + file.string() + " is not a meshrl Ed25519 key (expected '" + tag +
                            "<64 hex digits>'); delete it to make a new one");
  SigningKey k = from_seed(seed);
  sodium_memzero(seed, sizeof seed);
  return k;
}

std::string SigningKey::sign(std::string_view message) const {
  unsigned char sig[crypto_sign_BYTES];
  crypto_sign_detached(sig, nullptr, reinterpret_cast<const unsigned char*>(message.data()), message.size(), secret_.data());
  return std::string(reinterpret_cast<const char*>(sig), sizeof sig);
}

bool verify_signature(std::string_view public_key, std::string_view message, std::string_view signature) {
  ensure_sodium();
  if (public_key.size() != crypto_sign_PUBLICKEYBYTES || signature.size() != crypto_sign_BYTES) return false;
  return crypto_sign_verify_detached(reinterpret_cast<const unsigned char*>(signature.data()),
                                     reinterpret_cast<const unsigned char*>(message.data()), message.size(),
                                     reinterpret_cast<const unsigned char*>(public_key.data())) == 0;
}

std::string blake2b_256(std::string_view data) {
  ensure_sodium();
  unsigned char out[kDigestBytes];
  crypto_generichash(out, sizeof out, reinterpret_cast<const unsigned char*>(data.data()), data.size(), nullptr, 0);
  return std::string(reinterpret_cast<const char*>(out), sizeof out);
}

std::string to_hex(std::string_view bytes) {
  static const char* d = "0123456789abcdef";
  std::string s;
  s.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    s += d[c >> 4];
    s += d[c & 15];
  }
  return s;
}

}  // namespace meshrl::trust
