// Ed25519 signatures and BLAKE2b digests (libsodium): a node signs every update it sends, the
// coordinator checks it against the public key the node registered when it joined over its
// authenticated connection. Byte strings are raw (not hex) unless a name says otherwise.
// Knows nothing about what is signed (see mesh/update_signature.h).
#pragma once

#include <array>
#include <cstddef>
#include <filesystem>
#include <string>
#include <string_view>

#include "core/status.h"

namespace meshrl::trust {

inline constexpr size_t kPublicKeyBytes = 32;
inline constexpr size_t kSignatureBytes = 64;
inline constexpr size_t kDigestBytes = 32;

class SigningKey {
 public:
  // A fresh random key (kept in memory only: a node without a key file gets a new one each start,
  // which is fine because it registers its public key again at every join).
  static SigningKey generate();
  // The key in `file` (a hex seed written by this function), creating it owner-only when missing.
  // A file that is not a key fails naming the file.
  static Result<SigningKey> load_or_create(const std::filesystem::path& file);

  const std::string& public_key() const { return public_key_; }  // kPublicKeyBytes
  std::string sign(std::string_view message) const;              // kSignatureBytes, detached

 private:
  SigningKey() = default;
  static SigningKey from_seed(const unsigned char* seed);
  std::array<unsigned char, 64> secret_{};
  std::string public_key_;
};

// False for a wrong signature, and for a key or signature of the wrong length.
bool verify_signature(std::string_view public_key, std::string_view message, std::string_view signature);

// BLAKE2b-256 of `data` (kDigestBytes raw bytes).
std::string blake2b_256(std::string_view data);

std::string to_hex(std::string_view bytes);

}  // namespace meshrl::trust
