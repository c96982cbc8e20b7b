#include "net/link_shaper.h"

#include <algorithm>
#include <cmath>

namespace meshrl::net {

DirectionShaper::DirectionShaper(const DirectionSpec& spec, uint64_t seed, size_t burst_bytes)
    : spec_(spec), rng_state_(seed), burst_bytes_(static_cast<double>(std::max<size_t>(burst_bytes, 1))), tokens_(burst_bytes_) {}

double DirectionShaper::next_unit() {
  // splitmix64: tiny, seedable, and the same on every platform (std distributions are not).
  uint64_t z = (rng_state_ += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  z ^= z >> 31;
  return static_cast<double>(z >> 11) * 0x1.0p-52 - 1.0;  // 53 bits -> [0, 2) -> [-1, 1)
}

int64_t DirectionShaper::schedule(int64_t now_ns, size_t n_bytes) {
  int64_t release = now_ns;
  if (spec_.bandwidth_bps > 0) {
    const double bytes_per_ns = spec_.bandwidth_bps / 8.0 / 1e9;
    const int64_t t = std::max(now_ns, bucket_time_ns_);
    // The first call finds bucket_time_ns_ == 0: the bucket starts full, as after a long idle.
    tokens_ = std::min(burst_bytes_, tokens_ + static_cast<double>(t - bucket_time_ns_) * bytes_per_ns);
    bucket_time_ns_ = t;
    const double need = static_cast<double>(n_bytes);
    if (tokens_ >= need) {
      tokens_ -= need;
      release = t;
    } else {
      // Wait until the missing bytes have trickled in; the bucket is empty at that moment.
      const auto wait = static_cast<int64_t>(std::ceil((need - tokens_) / bytes_per_ns));
      tokens_ = 0;
      bucket_time_ns_ = t + wait;
      release = t + wait;
    }
  }
  double delay_ms = spec_.delay_ms;
  if (spec_.jitter_ms > 0) delay_ms = std::max(0.0, delay_ms + next_unit() * spec_.jitter_ms);
  const int64_t due = release + static_cast<int64_t>(std::llround(delay_ms * 1e6));
  last_delivery_ns_ = std::max(last_delivery_ns_, due);
  return last_delivery_ns_;
}

}  // namespace meshrl::net
