// MeshSection: the [mesh] section of a run file (rounds, inner steps, sync/async, quorum,
// staleness, outer optimizer, codec, leases), and the loader of a whole mesh run file: the run
// file's field tables (rl::run_sections) plus the [mesh] table, read from one parse, so a
// single-node run file and a mesh run file share every other key (configs/README.md).
// Unknown keys, wrong types and out-of-range values are errors, as in rl/run_config.h.
// Knows nothing about the network or tensors.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "rl/run_config.h"

namespace meshrl::mesh {

struct MeshSection {
  int64_t rounds = 10;              // versions the coordinator publishes after the initial one
  int64_t inner_steps = 4;          // H: GRPO steps a node runs between two updates
  std::string mode = "sync";        // sync: rounds close at quorum or deadline; async: every update applied on arrival
  double quorum = 1.0;              // sync: share of online nodes whose fresh update closes a round, in (0, 1]
  double round_deadline_s = 600;    // sync: close with what has arrived this long after the round opened, > 0
  int64_t max_staleness = 2;        // updates on base versions older than current - max_staleness are rejected
  double outer_lr = 0.7;            // outer Nesterov SGD (DiLoCo defaults)
  double outer_momentum = 0.9;
  bool outer_nesterov = true;
  std::string codec = "int8";       // pseudo-gradients and broadcasts: int8 | int4 | int2 | fp32
  std::string broadcast_codec;      // the broadcast's own codec when set (int8 | int4 | int2 | fp32); "" = codec
  int64_t block_size = 256;         // values per quantisation scale
  double int2_density = 0.0;        // int2: 0 = absmax ternary; (0, 1] = each block's largest share only (quantize.h)
  std::string int2_scale = "absmax";            // int2 updates: absmax | mean (least-squares scale, quantize.h)
  std::string broadcast_int2_scale = "mean";    // int2 broadcasts: mean | absmax; inert for another broadcast codec
  int64_t zstd_level = 3;           // 0 = no zstd
  double lease_s = 30;              // a node silent this long is dropped, > 0
  double heartbeat_s = 2;           // how often nodes renew their lease, > 0 and < lease_s
  int64_t eval_every_rounds = 0;    // coordinator evaluates held-out pass@1 every N versions; 0 = never
  int64_t n_eval = 0;               // problems in those evaluations; 0 = [eval] n_eval
  bool overlap = true;              // async: nodes keep training while an update is in flight
  uint64_t seed = 0;                // run seed: node seeds derive from (seed, node index)
  // Trust (robust_aggregate.h, update_guard.h):
  std::string aggregator = "mean";  // mean | trimmed_mean | median | centered_clip
  double trim_fraction = 0.125;     // trimmed_mean: share dropped at each end per coordinate, in [0, 0.5)
  double clip_tau = 0;              // centered_clip: radius; 0 = the median distance to the center
  int64_t clip_iters = 3;           // centered_clip: iterations, in [1, 100]
  // Refuse an update with norm > factor x the median of recent accepted norms; 0 = off. Off by
  // default: on the tiny test run honest norms span > 250x (an update from groups whose rewards
  // were all equal carries only weight decay), so a factor must be chosen per run (configs/README.md).
  double norm_bound_factor = 0;
  int64_t norm_window = 32;         // how many recent accepted norms that median is over, >= 1
  int64_t max_updates_per_minute = 600;  // per node; 0 = no limit
  // Reward honesty (reward_audit.h): share of updates whose claimed rewards the coordinator
  // re-scores with the task's verifier; 0 = off. Only for shared tasks (arithmetic, countdown:
  // the coordinator regenerates every prompt) unless audit_private says every node holds the
  // same jsonl/command task. Off by default: it costs the coordinator k scorings per audit.
  double audit_rate = 0;
  int64_t audit_samples = 4;        // rollouts re-scored per audit, in [1, 64]
  int64_t audit_exclude_after = 2;  // failed audits after which a node's updates are refused (the first flags it), >= 1
  double audit_tolerance = 1e-6;    // |claimed - re-scored reward| allowed, >= 0
  double audit_deadline_s = 30;     // an audit unanswered this long counts as failed, > 0
  bool audit_private = false;       // also audit jsonl/command tasks (every node must hold the same file)
};

struct MeshRunConfig {
  rl::RunConfig run;
  MeshSection mesh;
};

// As rl::parse_run_config, with a [mesh] section and "--mesh.key=value" overrides.
Result<MeshRunConfig> parse_mesh_run_config(const std::string& toml_text, const std::string& source,
                                            const std::vector<std::string>& overrides = {});
Result<MeshRunConfig> load_mesh_run_config(const std::filesystem::path& path, const std::vector<std::string>& overrides = {});

Status validate_mesh_section(const MeshSection& m, const std::string& source);

// Every key, as TOML (the whole run file, [mesh] included) and as JSON (for manifests and summaries).
std::string mesh_run_config_to_toml(const MeshRunConfig& c);
nlohmann::json mesh_section_to_json(const MeshSection& m);

}  // namespace meshrl::mesh
