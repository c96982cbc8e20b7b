// Node: one machine of the mesh. Joins the coordinator, downloads the current version and checks
// its hash, then loops: H inner GRPO steps on its own slice of the task (its data never leaves
// it) -> pseudo-gradient (weights at the last cut minus local weights) + error feedback ->
// encode -> SubmitUpdate -> the next version's broadcast -> apply -> verify the hash (full
// re-download on mismatch) -> rebase local progress onto it. Reconnects and rejoins by itself
// with backoff; a retried update keeps its key (name, base_version, seq), so the coordinator
// applies it once. Transport-free: talks through CoordinatorClient.
//
// Trust: the node trains on the manifest's run config, but takes the programs it runs and the
// paths on its own disk only from its own options (node_local_config.h), and caps every download
// at what its own model's shapes can encode to (download_caps below), whatever the coordinator
// declares.
//
// Rebase: with `cut` the local weights when the last update was cut (or the version's weights
// after a rebase), a new version theta' turns local into theta' + (local - cut) and cut into
// theta'. The next update is then cut - local: only progress not yet sent, never sent twice.
// In sync mode (and async without overlap) the node waits for the next version after each
// upload, so local == cut at the rebase; in async mode with overlap it keeps training while the
// upload and the next version are in flight, and rebases between two inner steps.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "mesh/codec.h"
#include "mesh/coordinator_client.h"
#include "mesh/named_tensors.h"
#include "mesh/node_metrics.h"
#include "trust/signing_key.h"

namespace meshrl::mesh {

struct NodeOptions {
  std::string name;
  std::string device = "cpu";
  int threads = 1;
  uint64_t shard_index = 0;            // this node's slice of the training problems...
  uint64_t shard_count = 1;            // ...of this many (1 = the whole training split)
  // Architecture + tokenizer: a model folder on this machine. Empty = the manifest's model_spec
  // when that is a preset name; a folder the manifest names is refused (node_local_config.h).
  std::string model;
  std::string cache_dir = "runs/cache";  // [lora] runs: the downloaded frozen base is kept here
  // Local training state (error-feedback residual, inner AdamW moments, trainer step) is saved here
  // after each acknowledged update and restored at start when it fits (node_state.h). Empty = not
  // kept: a restarted node starts its residual and moments from zero.
  std::string state_dir;
  // "--task.key=value" / "--grpo.key=value" on the run's config; the only source of the node-local
  // keys (kNodeLocalKeys: --task.command.argv, --task.jsonl.path, --lora.adapter).
  std::vector<std::string> overrides;
  double max_backoff_s = 5;            // reconnect backoff doubles from 0.2 s up to this
  double give_up_s = 300;              // stop after this long without reaching the coordinator
  std::shared_ptr<const trust::SigningKey> signing_key;  // signs updates; null = a fresh key for this process
  std::function<void(const std::string&)> log;
  // Test-only misbehaviour (the hidden `meshrl node --test-misbehave`), so the tests can show the
  // coordinator's defences bite: "" (honest), "inflate_rewards" (claims verifier reward + 1 for
  // every rollout: reward audits), "sign_flip_x10" (sends -10 x its real pseudo-gradient, properly
  // signed: robust aggregation), "sign_flip_x10_repeat" (the same, first claiming 10^9 times its
  // samples, then repeated four times under new seqs: bounded claims and one vote per round).
  std::string test_misbehave;
  std::shared_ptr<NodeMetrics> metrics;  // counters for /metrics (`meshrl node --http`); null = not kept
};

struct NodeReport {
  int64_t final_version = -1;
  std::string final_hash;              // this node's own content hash of its final version
  int64_t inner_steps = 0;
  int64_t updates_sent = 0;
  int64_t updates_accepted = 0;
  int64_t full_downloads = 0;
  int64_t broadcasts_applied = 0;
  uint64_t bytes_up = 0, bytes_down = 0;
  double compute_seconds = 0;          // in inner steps
  double wall_seconds = 0;
  std::string base_source;             // [lora] runs: "held", "cache" or "downloaded" (base_weights.h)
  nlohmann::json to_json() const;
};

// The most bytes an encoding of a parameter set shaped like `like` can take with `codec`: the
// format's header and records plus each payload's raw size, or zstd's worst-case bound on it when
// the codec compresses (update_format.h). Saturates at UINT64_MAX.
uint64_t max_encoded_bytes(const NamedTensors& like, const CodecConfig& codec);

// What a node takes from one download, from its own model's shapes (pinned by the manifest's
// config hash and parameter count): full weights and a [lora] run's base as fp32 (compressed or
// not), a broadcast as the run's broadcast codec.
struct DownloadCaps {
  uint64_t weights = 0;
  uint64_t broadcast = 0;
};
DownloadCaps download_caps(const NamedTensors& params, const CodecConfig& broadcast_codec);

// Runs until the coordinator announces the run finished (then leaves with its final hash) or
// stop becomes true. Fails on a refusal that retrying cannot fix (another protocol, run or
// model; a duplicate name for longer than give_up_s) or on losing the coordinator for give_up_s.
Result<NodeReport> run_node(CoordinatorClient& client, const NodeOptions& options, const std::atomic<bool>* stop = nullptr);

}  // namespace meshrl::mesh
