#include "mesh/aggregate.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <sstream>

namespace meshrl::mesh {

Status MeanAccumulator::add(const NamedTensors& update, double weight) {
  if (!(weight > 0) || !std::isfinite(weight))
    return invalid_argument("[aggregate] update weight must be a finite number > 0, got " + std::to_string(weight));
  MESHRL_RETURN_IF_ERROR(check_named_tensors(update, "aggregate update"));
  if (count_ > 0) {
    if (update.size() != names_.size())
      return invalid_argument("[aggregate] update has " + std::to_string(update.size()) + " tensors, the round's first had " +
                              std::to_string(names_.size()));
    for (size_t i = 0; i < update.size(); ++i) {
      if (update.names[i] != names_[i])
        return invalid_argument("[aggregate] tensor " + std::to_string(i) + " is '" + update.names[i] + "', the round's first update has '" +
                                names_[i] + "'");
      if (update.tensors[i].sizes() != sums_[i].sizes()) {
        std::ostringstream os;
        os << "[aggregate] tensor '" << names_[i] << "' has shape " << update.tensors[i].sizes() << ", the round's first update has "
           << sums_[i].sizes();
        return invalid_argument(os.str());
      }
    }
  }
  // Contiguous views (copies only for strided inputs), checked finite before anything is added so
  // that a bad update leaves the sum untouched.
  std::vector<torch::Tensor> values;
  values.reserve(update.size());
  for (size_t i = 0; i < update.size(); ++i) {
    auto v = update.tensors[i].detach().contiguous();
    // Non-finite <=> all exponent bits set; an integer OR over the bits vectorises, isfinite does not.
    const float* p = v.data_ptr<float>();
    const int64_t n = v.numel();
    uint32_t bad = 0;
    for (int64_t j = 0; j < n; ++j) {
      uint32_t b;
      std::memcpy(&b, p + j, sizeof b);  // a plain load; the compiler emits no call
      bad |= static_cast<uint32_t>((b & 0x7f800000u) == 0x7f800000u);
    }
    if (bad) return invalid_argument("[aggregate] tensor '" + update.names[i] + "' has a non-finite value");
    values.push_back(std::move(v));
  }
  if (count_ == 0) {
    names_ = update.names;
    sums_.clear();
    for (const auto& v : values) sums_.push_back(torch::zeros(v.sizes(), torch::kFloat64));
  }
  for (size_t i = 0; i < values.size(); ++i) {
    const float* u = values[i].data_ptr<float>();
    double* s = sums_[i].data_ptr<double>();
    const int64_t n = values[i].numel();
    for (int64_t j = 0; j < n; ++j) s[j] += weight * static_cast<double>(u[j]);
  }
  ++count_;
  total_weight_ += weight;
  return Status::ok();
}

Result<NamedTensors> MeanAccumulator::finish() const {
  if (count_ == 0) return invalid_argument("[aggregate] no update was added: nothing to average");
  NamedTensors out;
  out.names = names_;
  out.tensors.reserve(sums_.size());
  for (const auto& s : sums_) {
    auto t = torch::empty(s.sizes(), torch::kFloat32);
    const double* src = s.data_ptr<double>();
    float* dst = t.data_ptr<float>();
    const int64_t n = s.numel();
    for (int64_t j = 0; j < n; ++j) dst[j] = static_cast<float>(src[j] / total_weight_);
    out.tensors.push_back(std::move(t));
  }
  return out;
}

void MeanAccumulator::reset() {
  names_.clear();
  sums_.clear();
  count_ = 0;
  total_weight_ = 0;
}

double staleness_weight(int64_t staleness, int64_t max_staleness) {
  if (staleness < 0 || staleness > max_staleness) return 0.0;
  return 1.0 / std::sqrt(1.0 + static_cast<double>(staleness));
}

}  // namespace meshrl::mesh
