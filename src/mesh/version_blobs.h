// Version blobs: the bytes the coordinator serves to nodes, and the counters of what went each way.
// Keeps the current version's weights encoded once (lazily, dropped when a version is published),
// the broadcast deltas of the last kRecentBroadcasts versions, and a [lora] run's frozen base
// encoded once; older weights and broadcasts are read back from the run directory (stored_*,
// outside the coordinator's lock). Weights travel as fp32 without zstd, so a node applies exactly
// the coordinator's values. Knows nothing about sessions, rounds or the ledger. Not thread-safe
// (under the coordinator's mutex), except the const stored_* reads.
//   build/tests/test_mesh --gtest_filter='VersionBlobs*'
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "core/status.h"
#include "mesh/codec.h"
#include "mesh/named_tensors.h"
#include "store/run_store.h"

namespace meshrl::mesh {

// An encoded blob (weights of a version, or the delta version-1 -> version) and the content hash
// of the weights at that version.
struct VersionBlob {
  std::shared_ptr<const std::string> bytes;
  int64_t version = 0;
  std::string hash;
};

class VersionBlobs {
 public:
  static constexpr size_t kRecentBroadcasts = 8;

  VersionBlobs();

  // theta at `version` (the current one), encoded on first use.
  Result<VersionBlob> current_weights(const NamedTensors& theta, int64_t version, const std::string& hash);
  // A [lora] run's frozen base, encoded on first use (the base never changes during a run).
  Result<VersionBlob> base(const NamedTensors& base, const std::string& hash);
  // The broadcast that led to `version`, when it is among the recent ones.
  std::optional<VersionBlob> recent_broadcast(int64_t version) const;
  // A version's weights or broadcast from the run directory (thread-safe: the store reads concurrently).
  Result<VersionBlob> stored_weights(const store::RunStore& store, int64_t version) const;
  Result<VersionBlob> stored_broadcast(const store::RunStore& store, int64_t version) const;

  // `version` is published with this broadcast: the cached weights are stale, the broadcast is kept.
  void published(int64_t version, std::string broadcast, const std::string& hash);

  void count_up(uint64_t n) { bytes_up_ += n; }
  void count_down(uint64_t n, bool full);
  uint64_t bytes_up() const { return bytes_up_; }
  uint64_t bytes_down() const { return bytes_down_; }
  uint64_t bytes_down_full() const { return bytes_down_full_; }

 private:
  std::unique_ptr<UpdateCodec> weights_codec_;    // fp32, no zstd
  std::shared_ptr<const std::string> weights_;   // the current version's (lazy)
  std::shared_ptr<const std::string> base_;      // [lora] base (lazy)
  std::map<int64_t, VersionBlob> broadcasts_;    // the recent ones, by the version they lead to
  uint64_t bytes_up_ = 0;         // update payload bytes received
  uint64_t bytes_down_ = 0;       // weights + broadcast bytes sent
  uint64_t bytes_down_full_ = 0;  // the part of bytes_down that was full weights (joins, re-syncs)
};

}  // namespace meshrl::mesh
