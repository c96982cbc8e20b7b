#include "mesh/base_weights.h"

#include "core/file_io.h"
#include "mesh/codec.h"
#include "mesh/content_hash.h"
#include "mesh/policy_params.h"

namespace meshrl::mesh {

namespace fs = std::filesystem;

const char* base_source_name(BaseSource s) {
  switch (s) {
    case BaseSource::kHeld: return "held";
    case BaseSource::kCache: return "cache";
    case BaseSource::kDownloaded: return "downloaded";
  }
  return "?";
}

namespace {

// Decodes `bytes` into the model's parameters; ok only when the result hashes to want_hash. On a
// mismatch the parameters are left holding the rejected values: the caller fails or retries.
Status load_checked(const std::string& bytes, NamedTensors& params, const std::string& want_hash, const std::string& what) {
  UpdateDecodeLimits limits;
  limits.max_decoded_bytes = static_cast<uint64_t>(params.numel()) * 4;
  limits.max_tensors = static_cast<uint32_t>(params.size());
  MESHRL_ASSIGN_OR_RETURN(NamedTensors got, decode_update(bytes, limits));
  MESHRL_RETURN_IF_ERROR(copy_parameters(got, params, what));
  const std::string h = content_hash(params);
  if (h != want_hash) return invalid_argument(what + " hashes to " + h + ", not the run's base " + want_hash);
  return Status::ok();
}

}  // namespace

Result<BaseSource> ensure_base_weights(model::TransformerImpl& model, const std::string& want_hash, const fs::path& cache_dir,
                                       const std::function<Result<std::string>()>& download,
                                       const std::function<void(const std::string&)>& log) {
  NamedTensors params = trainable_parameters(model);
  if (content_hash(params) == want_hash) return BaseSource::kHeld;
  const fs::path cached = cache_dir / ("base-" + want_hash + ".mrlu");
  std::error_code ec;
  if (fs::exists(cached, ec)) {
    auto bytes = read_file(cached);
    Status st = bytes.is_ok() ? load_checked(bytes.value(), params, want_hash, "cached base " + cached.string()) : bytes.status();
    if (st.is_ok()) return BaseSource::kCache;
    log(st.message() + "; downloading it again");
  }
  MESHRL_ASSIGN_OR_RETURN(std::string bytes, download());
  MESHRL_RETURN_IF_ERROR(load_checked(bytes, params, want_hash, "the downloaded base"));
  fs::create_directories(cache_dir, ec);
  // A cache that cannot be written costs a download next time, not this run.
  if (Status st = write_file_atomic(cached, bytes); !st.is_ok()) log("cannot cache the base: " + st.message());
  return BaseSource::kDownloaded;
}

}  // namespace meshrl::mesh
