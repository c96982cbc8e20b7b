// The version builder: the open round and the arithmetic that closes it into the next version.
// Owns the round (round.h: when it closes), its book (round_book.h: which updates count, with what
// weight, one vote per node), the aggregator the counted updates are folded into ([mesh]
// aggregator), the outer optimizer, the broadcast's error feedback and the codecs of updates and
// broadcasts. build() is a round's close, in this order:
//   fold in the held stale updates (read back from the spool) -> aggregate -> async: scale by the
//   round's share (round.h) -> outer Nesterov step -> delta + error-feedback residual -> encode
//   (broadcast codec, rounding seed v + 1) -> decode -> residual = compensated - decoded ->
//   apply exactly the decoded delta to theta -> content hash
// It writes no file and no ledger row: the coordinator persists what build() returns
// (write_version, commit_round; coordinator.cpp close_round), then calls reopen(). Knows nothing
// about nodes, leases or the network. Not thread-safe (under the coordinator's mutex), except
// decode(), which reads only the codec and runs outside it.
//   build/tests/test_mesh --gtest_filter='VersionBuilder*'
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "mesh/aggregate.h"
#include "mesh/codec.h"
#include "mesh/error_feedback.h"
#include "mesh/mesh_config.h"
#include "mesh/named_tensors.h"
#include "mesh/outer_optimizer.h"
#include "mesh/round.h"
#include "mesh/round_book.h"
#include "store/run_store.h"

namespace meshrl::mesh {

// What a round stood for, from its book: every mean of the round's reported numbers is taken here
// (RoundBook: over the entries that carry stats; staleness over all).
struct RoundStats {
  int64_t n_updates = 0;
  double mean_staleness = 0;
  double reward_mean = 0, kl_mean = 0, entropy_mean = 0;
  int64_t samples = 0;  // completions behind the round's updates
};
RoundStats round_stats(const RoundBook& book);

// A version built by close, not yet durable.
struct BuiltVersion {
  int64_t version = 0;                // the open round's version + 1
  std::string hash;                   // content hash of theta after the delta
  std::string broadcast;              // the encoded delta the nodes apply
  std::vector<std::pair<store::UpdateKey, double>> applied;  // the round's updates and weights, counted then held
  double share = 1.0;                 // of a full round (async; 1 in sync mode)
  RoundStats stats;
};

class VersionBuilder {
 public:
  // Reads the spooled payload of an update by key.str() (the held stale ones are read at close).
  using SpoolReader = std::function<Result<std::string>(const std::string& key)>;

  // The run's codecs, aggregator and outer optimizer from [mesh]; `limits` bound every decode.
  static Result<std::unique_ptr<VersionBuilder>> make(const MeshRunConfig& config, const UpdateDecodeLimits& limits);

  const RoundRules& rules() const { return rules_; }
  const RoundBook& book() const { return book_; }
  // Opens the round on `version` (start-up, resume).
  void open(int64_t version, double now_s);
  // After a resume: the node's last applied update was on `base` (one update per base version).
  void set_last_applied_base(const std::string& node, int64_t base) { book_.set_last_applied_base(node, base); }

  // The run's codec's decode of an update payload (thread-safe).
  Result<NamedTensors> decode(const std::string& bytes, const std::string& what) const;
  BookDecision offer(const RoundEntry& e) const { return book_.offer(e); }
  // Places an entry the book accepted: a fresh one is folded into the aggregator now, a stale one
  // waits in the book for the close (its tensors are read back from the spool then). A failed
  // fold places nothing and leaves the aggregator unusable: the caller stops the run.
  Status count(const RoundEntry& e, const BookDecision& d, const NamedTensors& update);
  // Does the open round close now, with `nodes_online` nodes its quorum is judged against.
  CloseReason should_close(int64_t nodes_online, double now_s);

  // Closes the round into the next version: theta is changed in place (views into the model).
  // Fails on a spool or arithmetic error, with theta, the outer state and the residual perhaps
  // half-updated: the caller resumes from the durable version.
  Result<BuiltVersion> build(NamedTensors& theta, int64_t nodes_online, const SpoolReader& read_spooled);
  // The version is durable: the next round opens on it (book closed, aggregator reset).
  void reopen(int64_t version, double now_s);

  // Outer optimizer momentum and the broadcast's error-feedback residual, in one set (by prefix).
  store::TensorSet optimizer_state() const;
  Status restore_optimizer_state(const store::TensorSet& s);

 private:
  VersionBuilder() = default;
  RoundRules rules_;
  OpenRound open_;
  RoundBook book_;
  UpdateDecodeLimits limits_;
  std::unique_ptr<Aggregator> acc_;               // mean (O(P)) or a robust rule (O(N P))
  std::unique_ptr<OuterOptimizer> outer_;
  ErrorFeedback ef_;
  std::unique_ptr<UpdateCodec> codec_;            // the nodes' updates
  std::unique_ptr<UpdateCodec> broadcast_codec_;  // the broadcast deltas ([mesh] broadcast_codec, else codec_'s)
};

}  // namespace meshrl::mesh
