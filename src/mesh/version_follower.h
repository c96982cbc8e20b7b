// VersionFollower: keeps a node on the coordinator's versions. Owns the three weight sets of the
// rebase (below): the trainer's parameters (views), the held version's weights, and `cut`, the
// local weights when the last update was cut. Gets a version by its broadcasts (each one applied
// bit-exactly and its hash checked) or, when far behind or on any mismatch, by a full download;
// every download is capped by the node's own shapes (download_caps.h) whatever the coordinator
// declares.
//
// Rebase: with `cut` the local weights when the last update was cut (or the version's weights
// after a rebase), a new version theta' turns local into theta' + (local - cut) and cut into
// theta'. The next update is then cut - local (take_unsent_progress): only progress not yet sent,
// never sent twice. In sync mode (and async without overlap) the node waits for the next version
// after each upload, so local == cut at the rebase; in async mode with overlap it keeps training
// while the upload and the next version are in flight, and rebases between two inner steps.
//
// Threads: full_download and fetch touch nothing but the tally, so they may run beside the
// trainer (overlap mode); everything else belongs to the trainer's thread.
// Knows nothing about the trainer, the update codec or the signing key.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "core/status.h"
#include "mesh/codec.h"
#include "mesh/download_caps.h"
#include "mesh/named_tensors.h"
#include "mesh/node_session.h"
#include "mesh/node_tally.h"

namespace meshrl::mesh {

// A verified version, ready to rebase onto.
struct FetchedVersion {
  NamedTensors theta;      // the version's weights, bit-exact, CPU
  int64_t version = -1;
  std::string hash;        // content_hash(theta)
};

class VersionFollower {
 public:
  // params: views into the trainer's model (the set the run exchanges). broadcast_codec: the
  // run's ([mesh] broadcast_codec). limits and caps follow from params' shapes.
  VersionFollower(NodeSession& session, NodeTally& tally, NamedTensors params, std::unique_ptr<UpdateCodec> broadcast_codec,
                  const UpdateDecodeLimits& limits, const DownloadCaps& caps);

  // The weights of `version`, checked against the download's hash and expect_hash (when not
  // empty). Fails (kDataLoss) on a download over its cap or a hash mismatch.
  Result<FetchedVersion> full_download(int64_t version, const std::string& expect_hash);
  // Applies broadcasts from+1 .. version to `next` (a copy of the weights of `from`), checking
  // each version's hash; falls back to a full download when more than 16 versions behind, or on
  // any failure or mismatch.
  Result<FetchedVersion> fetch(NamedTensors next, int64_t from, int64_t version, const std::string& hash);
  // first: local <- theta (the join); else local <- theta + (local - cut). Then cut, base <- theta.
  void rebase(FetchedVersion f, bool first);
  // fetch + rebase when `version` is newer than the one held.
  Status sync_to(int64_t version, const std::string& hash);

  // cut - local, the progress not sent yet; cut <- local.
  Result<NamedTensors> take_unsent_progress();

  int64_t held() const { return held_; }
  const std::string& held_hash() const { return held_hash_; }
  NamedTensors held_weights() const { return clone_named_tensors(base_); }  // a copy, for fetch
  const NamedTensors& params() const { return params_; }

 private:
  NodeSession& session_;
  NodeTally& tally_;
  NamedTensors params_;   // views into the trainer's model
  NamedTensors base_;     // the held version's weights, bit-exact
  NamedTensors cut_;      // local weights when the last update was cut (or base after a rebase)
  int64_t held_ = -1;
  std::string held_hash_;
  const std::unique_ptr<UpdateCodec> broadcast_codec_;
  const UpdateDecodeLimits limits_;
  const DownloadCaps caps_;
};

}  // namespace meshrl::mesh
