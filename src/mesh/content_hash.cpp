#include "mesh/content_hash.h"

#include <xxhash.h>

#include <bit>
#include <memory>

#include "core/check.h"

namespace meshrl::mesh {

static_assert(std::endian::native == std::endian::little, "content_hash hashes little-endian bytes as they lie");

namespace {

struct StateFree {
  void operator()(XXH3_state_t* s) const { XXH3_freeState(s); }
};

// Stable names (the content hash must not change with a libtorch upgrade's spelling).
std::string dtype_tag(torch::ScalarType t) {
  switch (t) {
    case torch::kFloat32: return "F32";
    case torch::kFloat64: return "F64";
    case torch::kFloat16: return "F16";
    case torch::kBFloat16: return "BF16";
    case torch::kInt64: return "I64";
    case torch::kInt32: return "I32";
    case torch::kInt16: return "I16";
    case torch::kInt8: return "I8";
    case torch::kUInt8: return "U8";
    case torch::kBool: return "BOOL";
    default: return std::string("torch:") + c10::toString(t);
  }
}

void put_u64(XXH3_state_t* s, uint64_t v) { XXH3_128bits_update(s, &v, sizeof v); }
void put_str(XXH3_state_t* s, const std::string& v) {
  put_u64(s, v.size());
  XXH3_128bits_update(s, v.data(), v.size());
}

}  // namespace

std::string content_hash(const NamedTensors& params) {
  MESHRL_CHECK(params.names.size() == params.tensors.size(),
               "[content_hash] " << params.names.size() << " names for " << params.tensors.size() << " tensors");
  std::unique_ptr<XXH3_state_t, StateFree> state(XXH3_createState());
  MESHRL_CHECK(state != nullptr, "[content_hash] out of memory");
  XXH3_state_t* s = state.get();
  XXH3_128bits_reset(s);
  static constexpr char kDomain[] = "meshrl-params-v1";
  XXH3_128bits_update(s, kDomain, sizeof kDomain - 1);
  put_u64(s, params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    MESHRL_CHECK(params.tensors[i].defined(), "[content_hash] tensor '" << params.names[i] << "' is undefined");
    const auto t = params.tensors[i].detach().cpu().contiguous();
    put_str(s, params.names[i]);
    put_str(s, dtype_tag(t.scalar_type()));
    put_u64(s, static_cast<uint64_t>(t.dim()));
    for (int64_t d : t.sizes()) put_u64(s, static_cast<uint64_t>(d));
    XXH3_128bits_update(s, t.data_ptr(), static_cast<size_t>(t.numel()) * t.element_size());
  }
  XXH128_canonical_t canon;
  XXH128_canonicalFromHash(&canon, XXH3_128bits_digest(s));
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(32);
  for (unsigned char c : canon.digest) {
    hex.push_back(kHex[c >> 4]);
    hex.push_back(kHex[c & 15]);
  }
  return hex;
}

}  // namespace meshrl::mesh
