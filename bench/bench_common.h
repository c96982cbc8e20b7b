// Shared helpers for `meshrl bench` workloads (../shared/BENCH.md): timing with a warm-up and the
// median of repetitions, and one JSON line per measurement. Knows nothing about the CLI.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

namespace meshrl::bench {

struct Timing {
  double median_s = 0;
  std::vector<double> all_s;
};

// Runs `fn` once to warm up, then `reps` times; returns the median wall time.
Timing time_median(const std::function<void()>& fn, int reps);

struct BenchOptions {
  std::string model = "tiny";  // preset name or HF folder
  int threads = 1;
  int reps = 3;
  uint64_t seed = 0;
  bool profile = false;  // also print one JSON line per phase (median seconds over the reps)
  int nodes = 14;                // aggregate: updates merged per round
  std::string codec = "int8";    // aggregate: fp32 | int8 | int4 (zstd level 3)
};

// Each prints one JSON object per line on stdout.
void run_gemm_bench(const BenchOptions& options);
void run_rollout_bench(const BenchOptions& options);
void run_train_bench(const BenchOptions& options);
void run_compress_bench(const BenchOptions& options);
void run_aggregate_bench(const BenchOptions& options);

}  // namespace meshrl::bench
