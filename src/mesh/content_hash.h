// Content hash of a parameter set: the identity of a policy version that every node verifies
// after applying a broadcast (equal hashes <=> the same bits, up to xxh3's 128-bit collisions).
// Not a cryptographic hash: it detects corruption and divergence, not a forger (signing is
// separate). Knows nothing about models, codecs or the network.
//
// XXH3-128 (seed 0) over, in order:
//   "meshrl-params-v1"                      domain and version of this layout
//   u64 n_tensors
//   per tensor: u64 name length, name bytes, u64 dtype-name length, dtype name ("F32", "BF16", ...),
//               u64 rank, rank x i64 dims, the values' raw bytes (row-major, little-endian)
// so names, order, shapes, dtypes and every bit of every value count.
#pragma once

#include <string>

#include "mesh/named_tensors.h"

namespace meshrl::mesh {

// 32 lowercase hex characters (XXH128's canonical big-endian form: high 64 bits first).
// Tensors may be of any dtype and layout (hashed as their contiguous CPU bytes); the set's names
// and tensors must have equal counts (MESHRL_CHECK).
std::string content_hash(const NamedTensors& params);

}  // namespace meshrl::mesh
