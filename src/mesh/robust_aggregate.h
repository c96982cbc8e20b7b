// Robust aggregation of a round's pseudo-gradients: rules that a minority of wrong or hostile
// updates cannot drag far, chosen in the run file ([mesh] aggregator, mesh_config.h):
//
//   mean           weighted mean, streamed in O(P) (aggregate.h): the default, and the only rule
//                  that uses every sample; one bad update moves it by (its error) / N
//   trimmed_mean   per coordinate: drop the floor(trim_fraction * N) smallest and largest values,
//                  average the rest (unweighted)
//   median         per coordinate: the median (mean of the two middle values for even N)
//   centered_clip  Karimireddy, He, Jaggi, "Learning from History for Byzantine Robust
//                  Optimization" (ICML 2021): start at the coordinate-wise median v and repeat
//                  clip_iters times v <- v + sum_i w_i clip(u_i - v, tau) / sum_i w_i, where
//                  clip(z, tau) = z min(1, tau / ||z||) over the whole update; tau = clip_tau, or
//                  when 0 the median of ||u_i - v||, so most honest updates pass unclipped
//
// Memory: the robust rules need every value of a coordinate at once, so they keep the round's N
// decoded updates: O(N * P) float32 (the mean keeps O(P) float64). At the tiny model (P ~ 0.4 M)
// and N = 64 that is 100 MiB; for large models use mean, or a trimmed mean with few nodes.
// Updates with a non-finite weight, an invalid layout or a non-finite value are refused by add()
// changing nothing, as for the mean. Knows nothing about codecs, the network or the ledger.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "mesh/aggregate.h"

namespace meshrl::mesh {

struct AggregatorConfig {
  std::string rule = "mean";    // mean | trimmed_mean | median | centered_clip
  double trim_fraction = 0.125; // trimmed_mean: share dropped at each end, in [0, 0.5)
  double clip_tau = 0;          // centered_clip: clipping radius; 0 = the median distance to the center
  int64_t clip_iters = 3;       // centered_clip: iterations, >= 1
};

// Fails naming the rule when it is unknown or a parameter is out of range.
Result<std::unique_ptr<Aggregator>> make_aggregator(const AggregatorConfig& config);

// The buffered robust rules (exposed for tests and benchmarks; make_aggregator picks one).
class BufferedAggregator : public Aggregator {
 public:
  Status add(const NamedTensors& update, double weight) override;
  int64_t count() const override { return static_cast<int64_t>(updates_.size()); }
  double total_weight() const override;
  Result<NamedTensors> finish() const override;
  void reset() override { updates_.clear(), weights_.clear(); }

 protected:
  // One tensor of the result from the round's values of that tensor: stacked is [N, numel] float32.
  virtual torch::Tensor combine(const torch::Tensor& stacked, const torch::Tensor& weights) const = 0;
  // Whole-update rules (centered clipping) override this instead.
  virtual Result<NamedTensors> finish_all() const;
  std::vector<NamedTensors> updates_;  // the round's updates, contiguous float32 copies
  std::vector<double> weights_;
};

class TrimmedMeanAggregator final : public BufferedAggregator {
 public:
  explicit TrimmedMeanAggregator(double trim_fraction) : trim_(trim_fraction) {}

 protected:
  torch::Tensor combine(const torch::Tensor& stacked, const torch::Tensor& weights) const override;

 private:
  double trim_;
};

class MedianAggregator final : public BufferedAggregator {
 protected:
  torch::Tensor combine(const torch::Tensor& stacked, const torch::Tensor& weights) const override;
};

class CenteredClipAggregator final : public BufferedAggregator {
 public:
  CenteredClipAggregator(double tau, int64_t iters) : tau_(tau), iters_(iters) {}

 protected:
  torch::Tensor combine(const torch::Tensor& stacked, const torch::Tensor& weights) const override;
  Result<NamedTensors> finish_all() const override;

 private:
  double tau_;
  int64_t iters_;
};

// L2 norm of a whole update (all tensors), accumulated in float64.
double update_norm(const NamedTensors& update);

}  // namespace meshrl::mesh
