#include "bench_common.h"

#include <algorithm>

namespace meshrl::bench {

Timing time_median(const std::function<void()>& fn, int reps) {
  fn();  // warm-up: first-touch allocations, OpenMP pool start-up, BLAS packing buffers
  Timing t;
  for (int i = 0; i < std::max(1, reps); ++i) {
    auto t0 = std::chrono::steady_clock::now();
    fn();
    t.all_s.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  auto sorted = t.all_s;
  std::sort(sorted.begin(), sorted.end());
  t.median_s = sorted[sorted.size() / 2];
  return t;
}

}  // namespace meshrl::bench
