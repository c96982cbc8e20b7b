// Seeded randomness and the train/eval split for tasks. Header-only, torch-free.
// Owns the seeded draws every task uses (built on core/splitmix64.h: the same stream on every
// platform, unlike std::uniform_int_distribution whose output differs between libstdc++ and libc++) and the rule
// that puts a problem in the held-out split: a hash of its canonical text, mixed with split_seed,
// below eval_fraction. Knows nothing about prompts or verifiers.
#pragma once

#include <cstdint>
#include <string_view>

#include "core/splitmix64.h"

namespace meshrl::tasks {

// Combines two 64-bit values into one well-mixed seed (order matters).
inline uint64_t mix_seed(uint64_t a, uint64_t b) { return splitmix64(splitmix64(a) ^ (b + 0x632BE59BD9B4E019ull)); }

// FNV-1a over bytes, then splitmix64 so short strings still spread over all 64 bits.
inline uint64_t hash_text(std::string_view s) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001B3ull;
  return splitmix64(h);
}

// Uniform in [0, 1) from the top 53 bits.
inline double unit_interval(uint64_t x) { return static_cast<double>(x >> 11) * 0x1.0p-53; }

// True when the problem whose canonical text is `key` belongs to the held-out eval split.
inline bool in_eval_split(std::string_view key, uint64_t split_seed, double eval_fraction) {
  return unit_interval(mix_seed(hash_text(key), split_seed)) < eval_fraction;
}

class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t next_u64() { return splitmix64(state_++); }
  // Uniform integer in [lo, hi] (inclusive), unbiased by rejection. Requires lo <= hi.
  int64_t uniform_int(int64_t lo, int64_t hi) {
    const uint64_t span = static_cast<uint64_t>(hi) - static_cast<uint64_t>(lo);
    if (span == UINT64_MAX) return static_cast<int64_t>(next_u64());
    const uint64_t n = span + 1;
    const uint64_t limit = UINT64_MAX - (UINT64_MAX % n);  // reject the uneven tail
    uint64_t x;
    do x = next_u64();
    while (x >= limit);
    return static_cast<int64_t>(static_cast<uint64_t>(lo) + x % n);
  }

 private:
  uint64_t state_;
};

}  // namespace meshrl::tasks
