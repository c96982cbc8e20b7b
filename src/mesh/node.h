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
// at what its own model's shapes can encode to (download_caps.h), whatever the coordinator
// declares.
//
// Its rooms, each with its own contract and tests; node.cpp builds them from the manifest and
// runs the sync or the overlap loop over them:
//   node_session.h       join, rejoin on "not joined", retries with backoff, leave
//   node_watch.h         heartbeats and the watch on version announcements
//   version_follower.h   downloads, broadcasts, the rebase of local progress onto a new version
//   inner_loop.h         the H inner steps between two updates (both loops train in it)
//   update_sender.h      cut, sign and send updates (and the test-only attacks)
//   node_state_keeper.h  the local training state across restarts (--state-dir)
//   audit_answer.h       answering the coordinator's reward audits
//   node_tally.h         the report, /metrics counters and heartbeat progress
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "mesh/coordinator_client.h"
#include "mesh/download_caps.h"
#include "mesh/node_metrics.h"
#include "mesh/node_tally.h"
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

// Runs until the coordinator announces the run finished (then leaves with its final hash) or
// stop becomes true. Fails on a refusal that retrying cannot fix (another protocol, run or
// model; a duplicate name for longer than give_up_s) or on losing the coordinator for give_up_s.
Result<NodeReport> run_node(CoordinatorClient& client, const NodeOptions& options, const std::atomic<bool>* stop = nullptr);

}  // namespace meshrl::mesh
