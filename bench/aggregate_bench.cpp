// `meshrl bench aggregate --model tiny|small [--nodes 14] [--codec int8]`: BENCH.md's aggregate
// workload. One coordinator round over N encoded pseudo-gradients of the preset's size:
//   per node: decode -> validate (finite, layout) -> fold into the streaming weighted mean
//   then:     finish the mean -> outer Nesterov step -> encode the broadcast delta -> decode it
//             (the coordinator applies exactly what it sends) -> apply_delta -> content hash
// One JSON line: seconds per round (median of --reps after a warm-up) and peak RSS growth during a
// round, which stays flat in N because updates are folded in one at a time (O(P) memory).
//
// The pseudo-gradients are seeded normal noise (std 1e-4, about an AdamW step's size); decoding
// cost does not depend on the values, so min(N, 4) distinct payloads are cycled over the N nodes,
// which keeps the bench's own input memory from growing with N. With --profile, one more line
// gives the median seconds of each phase.
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>

#include "bench_common.h"
#include "mesh/aggregate.h"
#include "mesh/codec.h"
#include "mesh/content_hash.h"
#include "mesh/named_tensors.h"
#include "mesh/outer_optimizer.h"
#include "model/device.h"
#include "model/model_io.h"

namespace meshrl::bench {
namespace {

// A line of /proc/self/status in kB ("VmRSS", "VmHWM"); -1 when unavailable (not Linux).
int64_t proc_status_kb(const std::string& key) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(key + ":", 0) == 0) return std::stoll(line.substr(key.size() + 1));
  return -1;
}

// Resets VmHWM to the current RSS (Linux >= 4.0), so a round's own peak can be read.
bool reset_peak_rss() {
  std::ofstream f("/proc/self/clear_refs");
  f << "5";
  f.flush();
  return static_cast<bool>(f);
}

struct Phases {
  double decode = 0, add = 0, finish = 0, outer = 0, encode = 0, decode_broadcast = 0, apply = 0, hash = 0;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

}  // namespace

void run_aggregate_bench(const BenchOptions& options) {
  using clock = std::chrono::steady_clock;
  auto secs = [](clock::time_point a, clock::time_point b) { return std::chrono::duration<double>(b - a).count(); };
  model::set_threads(options.threads);

  mesh::NamedTensors theta;  // theta_v: the coordinator's weights, standalone contiguous tensors
  {
    auto m = model::load_transformer(options.model, "cpu", options.seed).value();
    mesh::NamedTensors views;
    for (auto& [name, t] : m->hf_tensors()) {
      views.names.push_back(name);
      views.tensors.push_back(t);
    }
    theta = mesh::clone_named_tensors(views);
  }
  const int64_t n_params = theta.numel();
  auto codec_id = mesh::codec_from_name(options.codec);
  if (!codec_id) throw std::runtime_error("[bench aggregate] unknown codec '" + options.codec + "' (fp32, int8, int4, int2)");
  mesh::CodecConfig cfg;
  cfg.id = *codec_id;
  auto codec = mesh::make_codec(cfg).value();
  const mesh::UpdateDecodeLimits limits{static_cast<uint64_t>(4 * n_params) + (1u << 20), 1u << 16};

  const int n_nodes = options.nodes;
  const int n_distinct = std::min(n_nodes, 4);
  std::vector<std::string> payloads;
  for (int k = 0; k < n_distinct; ++k) {
    auto gen = at::detail::createCPUGenerator(options.seed + 1000 + k);
    mesh::NamedTensors g;
    g.names = theta.names;
    for (const auto& t : theta.tensors) g.tensors.push_back(torch::randn(t.sizes(), gen) * 1e-4);
    payloads.push_back(codec->encode(g).value());
  }

  mesh::OuterOptimizer outer({});
  std::vector<Phases> phases;
  int64_t peak_growth_kb = 0;
  const bool can_reset_peak = reset_peak_rss();
  const int64_t rss_before_kb = proc_status_kb("VmRSS");
  size_t broadcast_bytes = 0;
  std::string hash;
  auto round = [&] {
    if (can_reset_peak) reset_peak_rss();
    const int64_t rss0 = proc_status_kb("VmRSS");
    Phases p;
    mesh::NamedTensors mean;
    {
      mesh::MeanAccumulator acc;
      for (int i = 0; i < n_nodes; ++i) {
        auto t0 = clock::now();
        auto update = codec->decode(payloads[i % n_distinct], limits).value();
        auto t1 = clock::now();
        // Weights as a sync round with a few late nodes would give them (staleness 0..2).
        auto st = acc.add(update, mesh::staleness_weight(i % 3, 4));
        if (!st.is_ok()) throw StatusError(st);
        p.decode += secs(t0, t1);
        p.add += secs(t1, clock::now());
      }
      auto t0 = clock::now();
      mean = acc.finish().value();
      p.finish = secs(t0, clock::now());
    }
    auto t0 = clock::now();
    auto delta = outer.step(mean).value();
    mean = {};
    auto t1 = clock::now();
    auto bytes = codec->encode(delta).value();
    delta = {};
    auto t2 = clock::now();
    auto sent = codec->decode(bytes, limits).value();
    auto t3 = clock::now();
    auto st = mesh::apply_delta(theta, sent);
    if (!st.is_ok()) throw StatusError(st);
    auto t4 = clock::now();
    hash = mesh::content_hash(theta);
    auto t5 = clock::now();
    p.outer = secs(t0, t1);
    p.encode = secs(t1, t2);
    p.decode_broadcast = secs(t2, t3);
    p.apply = secs(t3, t4);
    p.hash = secs(t4, t5);
    broadcast_bytes = bytes.size();
    phases.push_back(p);
    const int64_t hwm = proc_status_kb("VmHWM");
    peak_growth_kb = std::max(peak_growth_kb, hwm - (can_reset_peak ? rss0 : rss_before_kb));
  };
  auto timing = time_median(round, options.reps);

  const double theta_mb = 4.0 * static_cast<double>(n_params) / 1e6;
  std::printf(
      "{\"bench\":\"aggregate\",\"model\":\"%s\",\"codec\":\"%s\",\"nodes\":%d,\"threads\":%d,\"n_params\":%lld,"
      "\"update_bytes\":%zu,\"broadcast_bytes\":%zu,\"seconds_per_round\":%.4f,\"seconds_per_update\":%.5f,"
      "\"peak_rss_growth_mb\":%.1f,\"peak_rss_growth_per_param_bytes\":%.2f,\"theta_mb\":%.1f,\"peak_rss_mb\":%.1f,"
      "\"rss_method\":\"%s\",\"distinct_payloads\":%d,\"reps\":%d}\n",
      options.model.c_str(), options.codec.c_str(), n_nodes, options.threads, static_cast<long long>(n_params),
      payloads[0].size(), broadcast_bytes, timing.median_s, timing.median_s / n_nodes, peak_growth_kb / 1024.0,
      peak_growth_kb * 1024.0 / static_cast<double>(n_params), theta_mb, proc_status_kb("VmHWM") / 1024.0,
      can_reset_peak ? "per-round VmHWM after clear_refs" : "process VmHWM - RSS before rounds", n_distinct, options.reps);
  if (options.profile) {
    auto med = [&](double Phases::*f) {
      std::vector<double> v;
      for (size_t i = 1; i < phases.size(); ++i) v.push_back(phases[i].*f);  // skip the warm-up
      return median(v);
    };
    std::printf(
        "{\"bench\":\"aggregate_phases\",\"model\":\"%s\",\"codec\":\"%s\",\"nodes\":%d,\"decode_s\":%.4f,\"add_s\":%.4f,"
        "\"finish_s\":%.4f,\"outer_s\":%.4f,\"encode_s\":%.4f,\"decode_broadcast_s\":%.4f,\"apply_s\":%.4f,\"hash_s\":%.4f}\n",
        options.model.c_str(), options.codec.c_str(), n_nodes, med(&Phases::decode), med(&Phases::add), med(&Phases::finish),
        med(&Phases::outer), med(&Phases::encode), med(&Phases::decode_broadcast), med(&Phases::apply), med(&Phases::hash));
  }
  std::fflush(stdout);
}

}  // namespace meshrl::bench
