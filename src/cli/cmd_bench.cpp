// `meshrl bench WORKLOAD [--model tiny|small|DIR] [--threads N] [--reps N] [--profile]
//  [--nodes N] [--codec int8]` (the last two for aggregate): one JSON line per
// measurement (../shared/BENCH.md). Peers to compare against: bench/peer/*.py.
#include <memory>

#include "bench_common.h"
#include "cli/commands.h"

namespace meshrl::cli {

void add_bench_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("bench", "run a benchmark workload (gemm, rollout, train, compress, aggregate) and print JSON lines");
  auto opts = std::make_shared<bench::BenchOptions>();
  auto workload = std::make_shared<std::string>();
  cmd->add_option("workload", *workload, "gemm | rollout | train | compress | aggregate")->required()->check(CLI::IsMember({"gemm", "rollout", "train", "compress", "aggregate"}));
  cmd->add_option("--model", opts->model, "preset (tiny, small) or Hugging Face folder")->capture_default_str();
  cmd->add_option("--threads", opts->threads, "intra-op threads")->capture_default_str()->check(CLI::Range(1, 1024));
  cmd->add_option("--reps", opts->reps, "timed repetitions after one warm-up")->capture_default_str()->check(CLI::Range(1, 1000));
  cmd->add_option("--seed", opts->seed, "seed for weights and prompts")->capture_default_str();
  cmd->add_flag("--profile", opts->profile, "also print the median time of each phase (train, aggregate)");
  cmd->add_option("--nodes", opts->nodes, "aggregate: updates merged per round")->capture_default_str()->check(CLI::Range(1, 100000));
  cmd->add_option("--codec", opts->codec, "aggregate: update codec")->capture_default_str()->check(CLI::IsMember({"fp32", "int8", "int4", "int2"}));
  cmd->callback([opts, workload] {
    if (*workload == "gemm") bench::run_gemm_bench(*opts);
    if (*workload == "rollout") bench::run_rollout_bench(*opts);
    if (*workload == "train") bench::run_train_bench(*opts);
    if (*workload == "compress") bench::run_compress_bench(*opts);
    if (*workload == "aggregate") bench::run_aggregate_bench(*opts);
  });
}

}  // namespace meshrl::cli
