// Following the coordinator's versions. See version_follower.h.
#include "mesh/version_follower.h"

#include "mesh/content_hash.h"

namespace meshrl::mesh {

VersionFollower::VersionFollower(NodeSession& session, NodeTally& tally, NamedTensors params,
                                 std::unique_ptr<UpdateCodec> broadcast_codec, const UpdateDecodeLimits& limits,
                                 const DownloadCaps& caps)
    : session_(session),
      tally_(tally),
      params_(std::move(params)),
      broadcast_codec_(std::move(broadcast_codec)),
      limits_(limits),
      caps_(caps) {}

Result<FetchedVersion> VersionFollower::full_download(int64_t version, const std::string& expect_hash) {
  const std::string& name = session_.name();
  MESHRL_ASSIGN_OR_RETURN(Download d, session_.with_retry("download", [&] {
    return session_.client().download_weights(name, session_.session(), version, caps_.weights);
  }));
  MESHRL_RETURN_IF_ERROR(check_download_size(name, d.bytes.size(), caps_.weights, "weights of version " + std::to_string(version)));
  tally_.add_full_download(d.bytes.size());
  MESHRL_ASSIGN_OR_RETURN(NamedTensors w, decode_update(d.bytes, limits_, "weights v" + std::to_string(version)));
  MESHRL_RETURN_IF_ERROR(check_same_layout(w, clone_named_tensors(params_), "downloaded weights"));  // CPU copies
  const std::string h = content_hash(w);
  if (h != d.hash || (!expect_hash.empty() && h != expect_hash))
    return data_loss("[node " + name + "] downloaded weights of version " + std::to_string(version) + " hash to " + h +
                     ", the coordinator announced " + (expect_hash.empty() ? d.hash : expect_hash));
  session_.log("downloaded version " + std::to_string(version) + " (" + std::to_string(d.bytes.size() >> 10) + " KiB), hash ok");
  return FetchedVersion{std::move(w), version, h};
}

Result<FetchedVersion> VersionFollower::fetch(NamedTensors next, int64_t from, int64_t version, const std::string& hash) {
  bool ok = version - from <= 16;  // far behind: one full download beats many deltas
  std::string why = ok ? "" : "too far behind";
  for (int64_t v = from + 1; ok && v <= version; ++v) {
    auto d = session_.with_retry("broadcast", [&]() -> Result<Download> {
      MESHRL_ASSIGN_OR_RETURN(Download x, session_.client().get_broadcast(session_.name(), session_.session(), v, caps_.broadcast));
      MESHRL_RETURN_IF_ERROR(check_download_size(session_.name(), x.bytes.size(), caps_.broadcast, "broadcast " + std::to_string(v)));
      return x;
    });
    if (!d.is_ok()) {
      ok = false;
      why = d.status().message();
      break;
    }
    auto delta = broadcast_codec_->decode(d.value().bytes, limits_, "broadcast v" + std::to_string(v));
    if (!delta.is_ok() || !apply_delta(next, delta.value()).is_ok()) {
      ok = false;
      why = delta.is_ok() ? "layout mismatch" : delta.status().message();
      break;
    }
    const std::string h = content_hash(next);
    const std::string& want = v == version ? hash : d.value().hash;
    if (!want.empty() && h != want) {
      ok = false;
      why = "hash " + h + " after applying broadcast " + std::to_string(v) + ", expected " + want;
      break;
    }
    tally_.add_broadcast(d.value().bytes.size());
  }
  if (ok) return FetchedVersion{std::move(next), version, hash};
  session_.log("broadcast path failed (" + why + "); downloading full weights of version " + std::to_string(version));
  return full_download(version, hash);
}

void VersionFollower::rebase(FetchedVersion f, bool first) {
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < params_.size(); ++i) {
    if (first) params_.tensors[i].copy_(f.theta.tensors[i]);
    else params_.tensors[i].copy_(f.theta.tensors[i] + (params_.tensors[i].to(torch::kCPU) - cut_.tensors[i]));  // model may be on a device
  }
  base_ = std::move(f.theta);
  cut_ = clone_named_tensors(base_);
  held_ = f.version;
  held_hash_ = f.hash;
  tally_.set_held(held_, held_hash_);
  // The fault-injection tests match every version a node held against the ledger's hash.
  session_.log("holding version " + std::to_string(held_) + " hash " + held_hash_);
}

Status VersionFollower::sync_to(int64_t version, const std::string& hash) {
  if (version <= held_) return Status::ok();
  MESHRL_ASSIGN_OR_RETURN(FetchedVersion f, fetch(clone_named_tensors(base_), held_, version, hash));
  rebase(std::move(f), false);
  return Status::ok();
}

Result<NamedTensors> VersionFollower::take_unsent_progress() {
  NamedTensors local = clone_named_tensors(params_);
  MESHRL_ASSIGN_OR_RETURN(NamedTensors delta, subtract_named_tensors(cut_, local));
  cut_ = std::move(local);
  return delta;
}

}  // namespace meshrl::mesh
