// LoRA runs over real gRPC on loopback, and their bad input:
//   - the run's parameter set is the adapters' B matrices: that is all a node downloads;
//   - the uplink the ledger records for one update is the adapter's size at the run's quantization
//     plus only the format's headers, at least 30x below the full-weight delta at the same codec;
//   - a full-weight delta sent into an adapter run, and an adapter update sent into a full-weight
//     run, are refused with a typed reason and applied nowhere;
//   - a node whose frozen base is not the run's (another folder) downloads the run's once, checks
//     its hash, caches it, and trains on it.
//   build/tests/test_rpc --gtest_filter='LoraUpdates*'
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <thread>

#include "mesh/codec.h"
#include "mesh/coordinator.h"
#include "mesh/node.h"
#include "mesh/policy_params.h"
#include "mesh/protocol.h"
#include "mesh/update_format.h"
#include "mesh/update_signature.h"
#include "rl/policy_folder.h"
#include "rollout/policy.h"
#include "rpc/coordinator_service.h"
#include "rpc/grpc_client.h"
#include "support/loopback_coordinator.h"

namespace meshrl::rpc {
namespace {

namespace fs = std::filesystem;
namespace v1 = ::meshrl::v1;

// int8 without zstd: an update's size is then fixed by its layout, so it can be checked exactly.
const char* kRun = R"(
[model]
init = "tiny"
[sft]
steps = 0
[grpo]
prompts_per_step = 2
group_size = 2
max_new_tokens = 4
[eval]
n_eval = 4
[mesh]
rounds = 2
inner_steps = 1
codec = "int8"
block_size = 256
zstd_level = 0
lease_s = 30
)";
const char* kLora = "[lora]\nrank = 8\n";

// A run of `toml` on loopback (support/loopback_coordinator.h) with paris joined: the weights
// paris downloads, and paris's updates on version 0, signed, of 4 samples each.
struct LiveRun : test_support::LoopbackRun {
  v1::JoinReply joined;
  int64_t seq = 0;

  explicit LiveRun(const std::string& toml) : LoopbackRun(toml) {
    joined = join("paris");
    EXPECT_TRUE(joined.accepted()) << joined.reason();
  }
  mesh::NamedTensors current_weights() { return weights(joined.session(), "paris", 0); }
  v1::SubmitReply submit(const std::string& payload) {
    v1::UpdateHeader h = header(joined, "paris", 0, ++seq, payload.size());
    h.set_n_samples(4);
    mesh::sign_update(h, coord_->run_id(), payload, key_);
    return client_->submit(h, payload).value();
  }
};

mesh::NamedTensors zeros_like(const mesh::NamedTensors& w) {
  mesh::NamedTensors z = mesh::clone_named_tensors(w);
  for (auto& t : z.tensors) t = torch::zeros_like(t);
  return z;
}

// The tiny preset's full trainable parameter set (every weight), as a full-weight run holds it.
mesh::NamedTensors full_weights() {
  auto policy = rollout::load_policy("tiny").value();
  return mesh::trainable_parameters(*policy.model);
}

std::string encode_int8(const mesh::NamedTensors& t) {
  mesh::CodecConfig cc;
  cc.id = mesh::CodecId::kInt8;
  cc.block_size = 256;
  cc.zstd_level = 0;
  return mesh::make_codec(cc).value()->encode(t).value();
}

TEST(LoraUpdates, UplinkIsTheAdapterAtItsQuantizationAndFullDeltasAreRefused) {
  LiveRun run(std::string(kRun) + kLora);
  const mesh::NamedTensors adapters = run.current_weights();
  ASSERT_FALSE(adapters.names.empty());
  for (const auto& n : adapters.names)
    EXPECT_TRUE(n.rfind("lora.", 0) == 0 && n.substr(n.size() - 2) == "_B") << n << " crossed the wire in a LoRA run";

  // The quantized adapter: one int8 code per value and one f32 scale per 256-value block; the
  // format adds a fixed header and a record per tensor (name, rank, dims, numel, block, size).
  int64_t quantized = 0, headers = static_cast<int64_t>(mesh::kUpdateHeaderBytes);
  for (size_t i = 0; i < adapters.size(); ++i) {
    const int64_t n = adapters.tensors[i].numel();
    quantized += n + 4 * ((n + 255) / 256);
    headers += 2 + static_cast<int64_t>(adapters.names[i].size()) + 1 + 8 * adapters.tensors[i].dim() + 8 + 4 + 8;
  }

  // A full-weight delta is refused with a typed reason, before anything is counted.
  const std::string full = encode_int8(zeros_like(full_weights()));
  auto refused = run.submit(full);
  EXPECT_FALSE(refused.accepted());
  EXPECT_EQ(refused.code(), "size") << refused.reason();
  EXPECT_NE(refused.reason().find("LoRA adapters only"), std::string::npos) << refused.reason();

  // The adapter update is accepted; the ledger's bytes are the adapter's quantized size + headers.
  const std::string payload = encode_int8(zeros_like(adapters));
  auto ok = run.submit(payload);
  ASSERT_TRUE(ok.accepted()) << ok.reason();
  int64_t recorded = -1;
  for (const auto& row : run.coord_->store().ledger().updates())
    if (row.state != store::UpdateState::kRejected) recorded = row.bytes;
  EXPECT_EQ(recorded, static_cast<int64_t>(payload.size()));
  EXPECT_GE(recorded, quantized);
  EXPECT_LE(recorded, quantized + quantized / 100 + headers);
  // ...and at least 30x smaller than the full-weight delta at the same quantization.
  const double ratio = static_cast<double>(full.size()) / static_cast<double>(recorded);
  EXPECT_GE(ratio, 30.0) << "full " << full.size() << " B, adapter " << recorded << " B";
  std::printf("tiny r=8 int8: adapter update %lld B (%lld quantized + %lld header), full delta %zu B, %.1fx\n",
              static_cast<long long>(recorded), static_cast<long long>(quantized), static_cast<long long>(headers),
              full.size(), ratio);

  // The refusal is in the ledger with its code and nothing of it was applied.
  int refusals = 0;
  for (const auto& row : run.coord_->store().ledger().updates())
    if (row.state == store::UpdateState::kRejected) {
      ++refusals;
      EXPECT_EQ(row.reason.rfind("size: ", 0), 0u) << row.reason;
    }
  for (const auto& e : run.coord_->store().ledger().node_events())
    if (e.event == "update_refused") ++refusals;
  EXPECT_GE(refusals, 1);
}

TEST(LoraUpdates, AnAdapterUpdateIntoAFullWeightRunIsRefused) {
  LiveRun run(kRun);
  const mesh::NamedTensors w = run.current_weights();
  for (const auto& n : w.names) EXPECT_EQ(n.find("lora_"), std::string::npos) << n;

  // B matrices of rank 8 under PEFT-like names: what a node of an adapter run would send.
  LiveRun lora(std::string(kRun) + kLora);
  auto r = run.submit(encode_int8(zeros_like(lora.current_weights())));
  EXPECT_FALSE(r.accepted());
  EXPECT_EQ(r.code(), "shape") << r.reason();
  EXPECT_EQ(run.coord_->version(), 0);
}

TEST(LoraUpdates, ANodeOnAnotherBaseDownloadsTheRunsOnceAndTrainsOnIt) {
  LiveRun run(std::string(kRun) + kLora);  // paris joins only to read the manifest's base hash
  const std::string run_base = run.joined.manifest().base_weights_hash();
  ASSERT_FALSE(run_base.empty());
  v1::LeaveRequest bye;  // paris would otherwise count towards the quorum until its lease ends
  bye.set_name("paris");
  bye.set_session(run.joined.session());
  ASSERT_TRUE(run.client_->leave(bye).is_ok());
  // The same architecture and tokenizer, other weights: config and tokenizer hashes agree, so
  // only the base-weights check can tell, and the node must fetch the run's base.
  const fs::path other = run.tmp_.path() / "other-base";
  const fs::path cache = run.tmp_.path() / "cache";
  {
    auto p = rollout::load_policy("tiny", "cpu", /*seed=*/7).value();
    ASSERT_TRUE(rl::save_policy_folder(other, p.model, *p.tokenizer, "tiny").is_ok());
  }
  mesh::NodeOptions no;
  no.name = "dublin";
  no.model = other.string();
  no.cache_dir = cache.string();
  no.give_up_s = 60;
  auto r = mesh::run_node(*run.client_, no);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(r.value().base_source, "downloaded");
  EXPECT_TRUE(fs::exists(cache / ("base-" + run_base + ".mrlu")));
  // It trained adapters on the run's base: its updates were applied and it ends on the
  // coordinator's final version and hash.
  EXPECT_EQ(r.value().final_version, 2);
  EXPECT_EQ(r.value().updates_accepted, 2);
  EXPECT_EQ(r.value().final_hash, run.coord_->store().ledger().rounds().back().hash);
}

}  // namespace
}  // namespace meshrl::rpc
