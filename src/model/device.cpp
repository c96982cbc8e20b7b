#include "model/device.h"

#include <torch/torch.h>

namespace meshrl::model {

static bool mps_available() {
#if defined(__APPLE__) && (TORCH_VERSION_MAJOR >= 2)
  return torch::mps::is_available();
#else
  return false;
#endif
}

Result<std::string> resolve_device(const std::string& requested) {
  if (requested == "auto") {
    if (torch::cuda::is_available()) return std::string("cuda");
    if (mps_available()) return std::string("mps");
    return std::string("cpu");
  }
  if (requested == "cpu") return std::string("cpu");
  if (requested == "cuda") {
    if (!torch::cuda::is_available())
      return invalid_argument("[device] --device cuda asked, but this libtorch build or machine has no CUDA device");
    return std::string("cuda");
  }
  if (requested == "mps") {
    if (!mps_available())
      return invalid_argument("[device] --device mps asked, but this libtorch build has no Apple MPS support");
    return std::string("mps");
  }
  return invalid_argument("[device] unknown device '" + requested + "' (expected auto, cpu, cuda or mps)");
}

void set_threads(int n_threads) {
  if (n_threads < 1) n_threads = 1;
  torch::set_num_threads(n_threads);
}

}  // namespace meshrl::model
