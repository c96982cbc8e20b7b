// What the coordinator serves to nodes. See version_blobs.h.
#include "mesh/version_blobs.h"

namespace meshrl::mesh {

namespace {

std::unique_ptr<UpdateCodec> fp32_codec() {
  CodecConfig wc;
  wc.id = CodecId::kFp32;
  wc.zstd_level = 0;
  return make_codec(wc).value();  // a valid config: cannot fail
}

}  // namespace

VersionBlobs::VersionBlobs() : weights_codec_(fp32_codec()) {}

Result<VersionBlob> VersionBlobs::current_weights(const NamedTensors& theta, int64_t version, const std::string& hash) {
  if (!weights_) {
    MESHRL_ASSIGN_OR_RETURN(std::string b, weights_codec_->encode(theta));
    weights_ = std::make_shared<const std::string>(std::move(b));
  }
  return VersionBlob{weights_, version, hash};
}

Result<VersionBlob> VersionBlobs::base(const NamedTensors& base, const std::string& hash) {
  if (!base_) {
    MESHRL_ASSIGN_OR_RETURN(std::string b, weights_codec_->encode(base));
    base_ = std::make_shared<const std::string>(std::move(b));
  }
  return VersionBlob{base_, 0, hash};
}

std::optional<VersionBlob> VersionBlobs::recent_broadcast(int64_t version) const {
  auto it = broadcasts_.find(version);
  if (it == broadcasts_.end()) return std::nullopt;
  return it->second;
}

Result<VersionBlob> VersionBlobs::stored_weights(const store::RunStore& store, int64_t version) const {
  MESHRL_ASSIGN_OR_RETURN(store::VersionRecord rec, store.load_version(version));
  MESHRL_ASSIGN_OR_RETURN(std::string b, weights_codec_->encode(NamedTensors{rec.weights.names, rec.weights.tensors}));
  return VersionBlob{std::make_shared<const std::string>(std::move(b)), version, rec.hash};
}

Result<VersionBlob> VersionBlobs::stored_broadcast(const store::RunStore& store, int64_t version) const {
  MESHRL_ASSIGN_OR_RETURN(store::VersionRecord rec, store.load_version(version));
  MESHRL_ASSIGN_OR_RETURN(std::string b, store.load_broadcast(version));
  return VersionBlob{std::make_shared<const std::string>(std::move(b)), version, rec.hash};
}

void VersionBlobs::published(int64_t version, std::string broadcast, const std::string& hash) {
  weights_.reset();
  broadcasts_[version] = VersionBlob{std::make_shared<const std::string>(std::move(broadcast)), version, hash};
  while (broadcasts_.size() > kRecentBroadcasts) broadcasts_.erase(broadcasts_.begin());
}

void VersionBlobs::count_down(uint64_t n, bool full) {
  bytes_down_ += n;
  if (full) bytes_down_full_ += n;
}

}  // namespace meshrl::mesh
