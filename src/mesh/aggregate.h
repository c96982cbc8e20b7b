// Aggregation of the nodes' pseudo-gradients on the coordinator, and the weight of a stale update.
// Knows nothing about codecs, the network, the ledger or the outer optimizer.
//
// The coordinator decodes one update at a time and folds it in (add), so memory is O(P) whatever
// the number of nodes N: it never holds N decoded updates.
//   MeanAccumulator acc;
//   for (each update u_i of the round) { auto d = codec->decode(bytes_i, limits); acc.add(d, w_i); }
//   auto g = acc.finish();   // sum_i w_i u_i / sum_i w_i
//
// Robust rules (trimmed mean, median, centered clipping: robust_aggregate.h) implement Aggregator
// with the same add/finish contract; they need every value of a coordinate, so they keep the
// round's N updates in memory (O(N * P)). make_aggregator picks the rule of the run file.
#pragma once

#include <cstdint>

#include "core/status.h"
#include "mesh/named_tensors.h"

namespace meshrl::mesh {

class Aggregator {
 public:
  virtual ~Aggregator() = default;
  // Folds one decoded update in. Fails (kInvalidArgument) changing nothing when `weight` is not a
  // finite number > 0, the set is invalid (check_named_tensors), its layout differs from the first
  // update's (names, order, shapes), or a value is not finite.
  virtual Status add(const NamedTensors& update, double weight) = 0;
  virtual int64_t count() const = 0;        // updates added
  virtual double total_weight() const = 0;  // sum of their weights
  // The aggregate as new contiguous float32 tensors in the updates' layout; fails when empty.
  virtual Result<NamedTensors> finish() const = 0;
  virtual void reset() = 0;  // back to empty, for the next round
};

// Weighted mean, streamed: the running sum sum_i w_i u_i is kept in float64 (8 bytes per
// parameter), so the result does not depend on arrival order beyond float64 rounding and no
// precision is lost over many updates; finish() divides by sum_i w_i and rounds once to float32.
class MeanAccumulator final : public Aggregator {
 public:
  Status add(const NamedTensors& update, double weight) override;
  int64_t count() const override { return count_; }
  double total_weight() const override { return total_weight_; }
  Result<NamedTensors> finish() const override;
  void reset() override;

 private:
  std::vector<std::string> names_;
  std::vector<torch::Tensor> sums_;  // [P] float64 each, shapes of the first update
  int64_t count_ = 0;
  double total_weight_ = 0;
};

// Weight of an update computed on a version `staleness` versions behind the current one (0 =
// fresh): 1 / sqrt(1 + staleness) while staleness <= max_staleness, and 0 beyond it or when
// staleness < 0 (an update claiming a future base version is invalid).
//
// Why this shape: a stale update is a step computed at an older point, so the further behind it is
// the less it is worth, but discarding it throws away the work of the slowest nodes (toronto in the
// demo), which is what async mode exists for. Staleness-aware async SGD (Zhang, Gupta, Lian, Liu,
// "Staleness-Aware Async-SGD for Distributed Deep Learning", IJCAI 2016) divides the learning rate
// by the staleness; FedAsync (Xie, Koyejo, Gupta, "Asynchronous Federated Optimization", 2019)
// generalises this to a polynomial mixing weight (1 + staleness)^-a. We use a = 1/2: gentler than
// 1/staleness (one version behind keeps 0.71 of its weight, three behind 0.5, eight behind 0.33),
// and max_staleness bounds the error that stale directions can add.
double staleness_weight(int64_t staleness, int64_t max_staleness);

}  // namespace meshrl::mesh
