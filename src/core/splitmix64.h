// splitmix64 (Steele, Lea, Flood 2014): the one 64-bit mixer every seeded stream in meshrl uses
// (task draws, sampling, stochastic rounding, LoRA's A). Tiny and the same on every platform,
// unlike std's distributions, whose outputs differ between libstdc++ and libc++.
#pragma once

#include <cstdint>

namespace meshrl {

inline uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

}  // namespace meshrl
