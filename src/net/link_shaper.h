// The timing model of one direction of one emulated link: given when a chunk of bytes was read
// from the sender, it says when that chunk may be handed to the receiver. Pure arithmetic on a
// nanosecond clock the caller passes in; knows nothing about sockets, threads or the topology, so
// tests can drive it with made-up times.
//
// Model, in order:
//   1. bandwidth: a token bucket on bytes (rate bandwidth_bps / 8 bytes per second, depth
//      burst_bytes). A chunk is released when the bucket holds enough tokens for it; a chunk larger
//      than the bucket drives it into debt, so the long-run rate is exact whatever the chunk size.
//   2. one-way delay and jitter: release + delay_ms + u * jitter_ms, u uniform in [-1, 1) from a
//      seeded generator, never earlier than the release itself.
//   3. no reordering: delivery = max(previous delivery, the time from step 2). A stream of chunks
//      therefore sees close to delay + jitter; an isolated message sees delay +- jitter.
#pragma once

#include <cstddef>
#include <cstdint>

namespace meshrl::net {

// One direction of a link. 0 bandwidth means unlimited.
struct DirectionSpec {
  double delay_ms = 0;       // one-way propagation delay, >= 0
  double jitter_ms = 0;      // half-width of the uniform jitter, >= 0
  double bandwidth_bps = 0;  // bits per second; 0 = no cap
};

class DirectionShaper {
 public:
  // burst_bytes: token bucket depth (how much may leave back to back after an idle spell).
  DirectionShaper(const DirectionSpec& spec, uint64_t seed, size_t burst_bytes = kDefaultBurstBytes);

  // When a chunk of n_bytes read at now_ns may be delivered (ns, same clock). Non-decreasing over
  // successive calls. n_bytes == 0 (an end-of-stream marker) takes no tokens but keeps its place.
  int64_t schedule(int64_t now_ns, size_t n_bytes);

  static constexpr size_t kDefaultBurstBytes = 16 * 1024;

 private:
  double next_unit();  // uniform in [-1, 1), deterministic in the seed

  DirectionSpec spec_;
  uint64_t rng_state_;
  double burst_bytes_;
  double tokens_;              // bytes available at bucket_time_ns_ (may be 0, never negative)
  int64_t bucket_time_ns_ = 0; // the bucket's clock: max(now, when the last chunk was released)
  int64_t last_delivery_ns_ = INT64_MIN;
};

}  // namespace meshrl::net
