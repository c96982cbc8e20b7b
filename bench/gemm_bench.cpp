// `meshrl bench gemm`: single-precision matrix-product rate at the shapes BENCH.md names, the
// yardstick every other figure is quoted against (share of the sgemm rate).
#include <torch/torch.h>

#include <cstdio>

#include "bench_common.h"
#include "model/device.h"

namespace meshrl::bench {

void run_gemm_bench(const BenchOptions& options) {
  model::set_threads(options.threads);
  torch::NoGradGuard no_grad;
  const int64_t shapes[][3] = {{8192, 256, 768}, {64, 256, 768}, {2048, 2048, 2048}};
  for (auto& s : shapes) {
    const int64_t m = s[0], k = s[1], n = s[2];
    auto a = torch::randn({m, k}), b = torch::randn({k, n}), c = torch::empty({m, n});
    const double flop = 2.0 * m * k * n;
    // Enough repetitions inside one timing for ~0.1 s of work at 80 GFLOP/s.
    const int inner = std::max<int64_t>(1, static_cast<int64_t>(8e9 / flop));
    auto t = time_median([&] { for (int i = 0; i < inner; ++i) torch::mm_out(c, a, b); }, options.reps);
    std::printf("{\"bench\":\"gemm\",\"m\":%lld,\"k\":%lld,\"n\":%lld,\"threads\":%d,\"gflops\":%.1f,\"reps\":%d}\n",
                (long long)m, (long long)k, (long long)n, options.threads, flop * inner / t.median_s / 1e9, options.reps);
    std::fflush(stdout);
  }
}

}  // namespace meshrl::bench
