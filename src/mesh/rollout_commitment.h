// Rollout commitment: what a node binds itself to about the rollouts it scored between two
// updates, so that the coordinator's audit (reward_audit.h) can spot-check claims the node
// cannot change afterwards.
//
// Each scored rollout is a leaf BLAKE2b-256(prompt_id | completion_hash | claimed_reward) (fixed
// little-endian layout, below); the digest is BLAKE2b-256 over the leaves in order. The update's
// header carries (n_scored, digest) before the coordinator draws which rollouts to audit, so a
// node cannot pick which claims get checked, and the audit answer must reproduce every leaf
// (48 bytes each: prompt id, completion hash, reward) plus the full text of the drawn ones.
//
// ScoredRolloutBook is the node's side: it collects the rollouts of the current update (bounded
// by kMaxScoredRollouts; later ones are not committed and cannot be audited), seals them into a
// commitment when the update is cut, and keeps the last few sealed sets to answer an audit.
// Thread-safe (the trainer adds on the main thread, an overlapped upload answers audits).
// Torch-free; knows nothing about the network or tasks.
#pragma once

#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace meshrl::mesh {

// Bounds: a commitment covers at most this many rollouts (an audit answer is then <= ~200 KiB of
// summaries), and a completion sent in an audit answer is at most this long.
inline constexpr int64_t kMaxScoredRollouts = 4096;
inline constexpr size_t kMaxAuditCompletionBytes = 16 << 10;

struct ScoredRollout {
  uint64_t prompt_id = 0;       // the task seed: task.sample(prompt_id) regenerates the problem
  std::string completion;       // the text the verifier saw (stop string included)
  double claimed_reward = 0;
};

// BLAKE2b-256 of the completion text (32 raw bytes).
std::string completion_hash(const std::string& completion);
// BLAKE2b-256 over prompt_id (8 bytes LE) | completion_hash (32 bytes) | claimed_reward (IEEE-754 bits, 8 bytes LE).
std::string rollout_leaf(uint64_t prompt_id, const std::string& completion_hash, double claimed_reward);
// BLAKE2b-256 over the concatenated leaves, in order (the empty list has a digest too).
std::string leaves_digest(const std::vector<std::string>& leaves);

struct RolloutCommitment {
  int64_t n = 0;
  std::string digest;           // 32 raw bytes
  double claimed_mean = 0;      // mean claimed reward (0 when n == 0)
};

class ScoredRolloutBook {
 public:
  explicit ScoredRolloutBook(size_t keep_sealed = 4) : keep_sealed_(keep_sealed) {}
  void add(ScoredRollout r);
  // Commits to everything added since the last seal, under the update key (base_version, seq).
  RolloutCommitment seal(int64_t base_version, int64_t seq);
  // The rollouts sealed under that key, or nullopt once forgotten (only the last few are kept).
  std::optional<std::vector<ScoredRollout>> sealed(int64_t base_version, int64_t seq) const;

 private:
  struct Sealed {
    int64_t base_version, seq;
    std::vector<ScoredRollout> rollouts;
  };
  mutable std::mutex mu_;
  size_t keep_sealed_;
  std::vector<ScoredRollout> open_;
  std::deque<Sealed> sealed_;
};

}  // namespace meshrl::mesh
