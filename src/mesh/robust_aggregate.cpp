// Robust aggregation rules. See robust_aggregate.h.
#include "mesh/robust_aggregate.h"

#include <algorithm>
#include <cmath>

namespace meshrl::mesh {

double update_norm(const NamedTensors& update) {
  double s = 0;
  for (const auto& t : update.tensors) s += t.to(torch::kFloat64).pow(2).sum().item<double>();
  return std::sqrt(s);
}

Status BufferedAggregator::add(const NamedTensors& update, double weight) {
  // The streaming mean already checks weight, layout against the first update and finiteness;
  // reuse it on a scratch accumulator seeded with the first update's layout so the rules agree.
  MeanAccumulator check;
  if (!updates_.empty()) MESHRL_RETURN_IF_ERROR(check.add(updates_.front(), 1.0));
  MESHRL_RETURN_IF_ERROR(check.add(update, weight));
  NamedTensors copy;
  copy.names = update.names;
  for (const auto& t : update.tensors) copy.tensors.push_back(t.detach().to(torch::kFloat32).contiguous().clone());
  updates_.push_back(std::move(copy));
  weights_.push_back(weight);
  return Status::ok();
}

double BufferedAggregator::total_weight() const {
  double s = 0;
  for (double w : weights_) s += w;
  return s;
}

Result<NamedTensors> BufferedAggregator::finish() const {
  if (updates_.empty()) return invalid_argument("[aggregate] no update was added: nothing to aggregate");
  return finish_all();
}

Result<NamedTensors> BufferedAggregator::finish_all() const {
  const torch::Tensor w = torch::tensor(weights_, torch::kFloat64);
  NamedTensors out;
  out.names = updates_.front().names;
  for (size_t i = 0; i < out.names.size(); ++i) {
    std::vector<torch::Tensor> rows;
    rows.reserve(updates_.size());
    for (const auto& u : updates_) rows.push_back(u.tensors[i].reshape({-1}));
    const torch::Tensor stacked = torch::stack(rows);  // [N, numel]
    out.tensors.push_back(combine(stacked, w).to(torch::kFloat32).reshape(updates_.front().tensors[i].sizes()).contiguous());
  }
  return out;
}

torch::Tensor TrimmedMeanAggregator::combine(const torch::Tensor& stacked, const torch::Tensor&) const {
  const int64_t n = stacked.size(0);
  const int64_t k = std::min<int64_t>(static_cast<int64_t>(std::floor(trim_ * static_cast<double>(n))), (n - 1) / 2);
  const torch::Tensor sorted = std::get<0>(stacked.to(torch::kFloat64).sort(0));
  return sorted.narrow(0, k, n - 2 * k).mean(0);
}

torch::Tensor MedianAggregator::combine(const torch::Tensor& stacked, const torch::Tensor&) const {
  const int64_t n = stacked.size(0);
  const torch::Tensor sorted = std::get<0>(stacked.to(torch::kFloat64).sort(0));
  return (sorted[(n - 1) / 2] + sorted[n / 2]) / 2;
}

torch::Tensor CenteredClipAggregator::combine(const torch::Tensor& stacked, const torch::Tensor&) const {
  const int64_t n = stacked.size(0);
  const torch::Tensor sorted = std::get<0>(stacked.to(torch::kFloat64).sort(0));
  return (sorted[(n - 1) / 2] + sorted[n / 2]) / 2;  // the starting center
}

Result<NamedTensors> CenteredClipAggregator::finish_all() const {
  // Work on one flat [N, P] float64 matrix: the clipping norm is over the whole update.
  const size_t n_t = updates_.front().size();
  std::vector<torch::Tensor> rows;
  for (const auto& u : updates_) {
    std::vector<torch::Tensor> parts;
    for (const auto& t : u.tensors) parts.push_back(t.reshape({-1}));
    rows.push_back(torch::cat(parts).to(torch::kFloat64));
  }
  const torch::Tensor x = torch::stack(rows);                                           // [N, P]
  const torch::Tensor w = torch::tensor(weights_, torch::kFloat64);                      // [N]
  const torch::Tensor wn = w / w.sum();
  torch::Tensor v = combine(x, w);                                                       // [P] median start
  for (int64_t it = 0; it < iters_; ++it) {
    const torch::Tensor diff = x - v.unsqueeze(0);                                       // [N, P]
    const torch::Tensor dist = diff.norm(2, {1});                                        // [N]
    const double tau = tau_ > 0 ? tau_ : std::get<0>(dist.sort()).index({(dist.size(0) - 1) / 2}).item<double>();
    if (!(tau > 0)) break;  // every update sits on the center
    const torch::Tensor scale = torch::clamp_max(tau / dist.clamp_min(1e-30), 1.0);     // [N]
    v = v + ((wn * scale).unsqueeze(1) * diff).sum(0);
  }
  NamedTensors out;
  out.names = updates_.front().names;
  int64_t off = 0;
  for (size_t i = 0; i < n_t; ++i) {
    const auto& like = updates_.front().tensors[i];
    out.tensors.push_back(v.narrow(0, off, like.numel()).to(torch::kFloat32).reshape(like.sizes()).contiguous());
    off += like.numel();
  }
  return out;
}

Result<std::unique_ptr<Aggregator>> make_aggregator(const AggregatorConfig& c) {
  if (c.rule == "mean") return std::unique_ptr<Aggregator>(new MeanAccumulator());
  if (c.rule == "trimmed_mean") {
    if (!(c.trim_fraction >= 0 && c.trim_fraction < 0.5))
      return invalid_argument("[mesh] trim_fraction must be in [0, 0.5), got " + std::to_string(c.trim_fraction));
    return std::unique_ptr<Aggregator>(new TrimmedMeanAggregator(c.trim_fraction));
  }
  if (c.rule == "median") return std::unique_ptr<Aggregator>(new MedianAggregator());
  if (c.rule == "centered_clip") {
    if (!(c.clip_tau >= 0) || !std::isfinite(c.clip_tau)) return invalid_argument("[mesh] clip_tau must be >= 0, got " + std::to_string(c.clip_tau));
    if (c.clip_iters < 1 || c.clip_iters > 100) return invalid_argument("[mesh] clip_iters must be in [1, 100], got " + std::to_string(c.clip_iters));
    return std::unique_ptr<Aggregator>(new CenteredClipAggregator(c.clip_tau, c.clip_iters));
  }
  return invalid_argument("[mesh] aggregator must be mean, trimmed_mean, median or centered_clip, got \"" + c.rule + "\"");
}

}  // namespace meshrl::mesh
