#include "mesh/update_format.h"

#include <zstd.h>

#include <bit>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <memory>
#include <sstream>
#include <unordered_set>

namespace meshrl::mesh {

// Payloads are copied to and from memory as-is: the wire is little-endian, so is every host we
// build for. A big-endian port would byte-swap in put_* / Reader and in the payload copies.
static_assert(std::endian::native == std::endian::little, "update_format assumes a little-endian host");

namespace {

// --- small checked helpers -------------------------------------------------------------------

bool mul_ok(uint64_t a, uint64_t b, uint64_t* out) { return !__builtin_mul_overflow(a, b, out); }
bool add_ok(uint64_t a, uint64_t b, uint64_t* out) { return !__builtin_add_overflow(a, b, out); }

int max_level(CodecId codec) {
  return codec == CodecId::kInt4 ? kInt4MaxLevel : codec == CodecId::kInt2 ? kInt2MaxLevel : kInt8MaxLevel;
}

// Raw payload size for (codec, numel, block size); false on overflow.
bool raw_payload_bytes(CodecId codec, uint64_t numel, uint32_t block_size, uint64_t* out) {
  if (codec == CodecId::kFp32) return mul_ok(numel, 4, out);
  const uint64_t n_blocks = numel / block_size + (numel % block_size != 0 ? 1 : 0);
  uint64_t scale_bytes = 0;
  if (!mul_ok(n_blocks, 4, &scale_bytes)) return false;
  const uint64_t code_bytes = codec == CodecId::kInt8   ? numel
                              : codec == CodecId::kInt4 ? numel / 2 + numel % 2
                                                        : numel / 4 + (numel % 4 != 0 ? 1 : 0);
  return add_ok(scale_bytes, code_bytes, out);
}

template <typename T>
void put(std::string& out, T v) {
  char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));
  out.append(b, sizeof(T));
}

// Bounds-checked little-endian reader over the hostile buffer.
class Reader {
 public:
  explicit Reader(std::string_view bytes) : bytes_(bytes) {}
  uint64_t pos() const { return pos_; }
  uint64_t remaining() const { return bytes_.size() - pos_; }
  template <typename T>
  bool read(T* v) {
    if (remaining() < sizeof(T)) return false;
    std::memcpy(v, bytes_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return true;
  }
  bool read_bytes(uint64_t n, std::string_view* v) {
    if (remaining() < n) return false;
    *v = bytes_.substr(pos_, n);
    pos_ += n;
    return true;
  }

 private:
  std::string_view bytes_;
  uint64_t pos_ = 0;
};

struct ZstdCCtxFree {
  void operator()(ZSTD_CCtx* c) const { ZSTD_freeCCtx(c); }
};
struct ZstdDCtxFree {
  void operator()(ZSTD_DCtx* c) const { ZSTD_freeDCtx(c); }
};
// One context per thread, reused: creating one per tensor costs more than compressing a norm.
ZSTD_CCtx* thread_cctx() {
  thread_local std::unique_ptr<ZSTD_CCtx, ZstdCCtxFree> c(ZSTD_createCCtx());
  return c.get();
}
ZSTD_DCtx* thread_dctx() {
  thread_local std::unique_ptr<ZSTD_DCtx, ZstdDCtxFree> c(ZSTD_createDCtx());
  return c.get();
}

std::string where(std::string_view source, size_t index, std::string_view name) {
  std::ostringstream os;
  os << "[update] " << source << ": tensor " << index;
  if (!name.empty()) os << " '" << name << "'";
  return os.str();
}

}  // namespace

std::string_view codec_name(CodecId id) {
  switch (id) {
    case CodecId::kFp32: return "fp32";
    case CodecId::kInt8: return "int8";
    case CodecId::kInt4: return "int4";
    case CodecId::kInt2: return "int2";
  }
  return "unknown";
}

std::optional<CodecId> codec_from_name(std::string_view name) {
  if (name == "fp32") return CodecId::kFp32;
  if (name == "int8") return CodecId::kInt8;
  if (name == "int4") return CodecId::kInt4;
  if (name == "int2") return CodecId::kInt2;
  return std::nullopt;
}

// --- writing -----------------------------------------------------------------------------------

Result<std::string> write_update(std::span<const UpdateTensorView> tensors, const UpdateEncodeOptions& options) {
  const CodecId codec = options.codec;
  if (codec != CodecId::kFp32 && codec != CodecId::kInt8 && codec != CodecId::kInt4 && codec != CodecId::kInt2)
    return invalid_argument("[update] encode: unknown codec id " + std::to_string(static_cast<int>(codec)));
  if (codec != CodecId::kFp32 && (options.block_size < 1 || options.block_size > kMaxUpdateBlockSize))
    return invalid_argument("[update] encode: block_size must be in 1.." + std::to_string(kMaxUpdateBlockSize) +
                            ", got " + std::to_string(options.block_size));
  if (options.zstd_level != 0 && (options.zstd_level < ZSTD_minCLevel() || options.zstd_level > ZSTD_maxCLevel()))
    return invalid_argument("[update] encode: zstd_level must be 0 (off) or in " + std::to_string(ZSTD_minCLevel()) +
                            ".." + std::to_string(ZSTD_maxCLevel()) + ", got " + std::to_string(options.zstd_level));
  if (!(options.int2_density >= 0.0 && options.int2_density <= 1.0) || (options.int2_density > 0.0 && codec != CodecId::kInt2))
    return invalid_argument("[update] encode: int2_density must be 0, or in (0, 1] with codec int2; got " +
                            std::to_string(options.int2_density) + " with " + std::string(codec_name(codec)));
  if (tensors.size() > UINT32_MAX) return invalid_argument("[update] encode: too many tensors");
  const uint32_t block_size = codec == CodecId::kFp32 ? 0 : options.block_size;

  std::unordered_set<std::string_view> seen;
  std::vector<std::string> payloads;
  payloads.reserve(tensors.size());
  std::vector<float> scales;
  std::vector<int8_t> codes;
  for (size_t t = 0; t < tensors.size(); ++t) {
    const auto& v = tensors[t];
    const std::string at = where("encode", t, v.name);
    if (v.name.empty() || v.name.size() > kMaxUpdateNameBytes)
      return invalid_argument(at + ": name must be 1.." + std::to_string(kMaxUpdateNameBytes) + " bytes");
    if (!seen.insert(v.name).second) return invalid_argument(at + ": duplicate name");
    if (v.shape.size() > kMaxUpdateRank) return invalid_argument(at + ": rank " + std::to_string(v.shape.size()) + " over the limit of 8");
    uint64_t numel = 1;
    for (int64_t d : v.shape)
      if (d < 0 || !mul_ok(numel, static_cast<uint64_t>(d), &numel)) return invalid_argument(at + ": bad shape");
    if (numel != v.values.size())
      return invalid_argument(at + ": shape holds " + std::to_string(numel) + " values, got " + std::to_string(v.values.size()));
    for (size_t i = 0; i < v.values.size(); ++i)
      if (!std::isfinite(v.values[i]))
        return invalid_argument(at + ": value " + std::to_string(i) + " is not finite; refusing to send it");

    std::string raw;
    if (codec == CodecId::kFp32) {
      raw.assign(reinterpret_cast<const char*>(v.values.data()), v.values.size() * sizeof(float));
    } else {
      QuantizeConfig qc;
      qc.block_size = block_size;
      qc.stochastic_rounding = options.stochastic_rounding;
      qc.seed = options.seed + 0x9e3779b97f4a7c15ULL * (t + 1);
      scales.resize(quant_n_blocks(numel, block_size));
      codes.resize(numel);
      if (options.int2_density > 0.0)
        quantize_ternary_topk(v.values, options.int2_density, block_size, scales, codes);
      else if (codec == CodecId::kInt2 && options.int2_mean_scale)
        quantize_ternary_mean_scale(v.values, block_size, scales, codes);
      else
        quantize_blockwise(v.values, max_level(codec), qc, scales, codes);
      raw.assign(reinterpret_cast<const char*>(scales.data()), scales.size() * sizeof(float));
      if (codec == CodecId::kInt8) {
        raw.append(reinterpret_cast<const char*>(codes.data()), codes.size());
      } else if (codec == CodecId::kInt4) {
        std::vector<uint8_t> packed((numel + 1) / 2);
        pack_int4(codes, packed);
        raw.append(reinterpret_cast<const char*>(packed.data()), packed.size());
      } else {
        std::vector<uint8_t> packed((numel + 3) / 4);
        pack_int2(codes, packed);
        raw.append(reinterpret_cast<const char*>(packed.data()), packed.size());
      }
    }
    if (options.zstd_level == 0) {
      payloads.push_back(std::move(raw));
      continue;
    }
    ZSTD_CCtx* cctx = thread_cctx();
    ZSTD_CCtx_reset(cctx, ZSTD_reset_session_and_parameters);
    ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, options.zstd_level);
    ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 1);     // catches corruption the hash would not localise
    ZSTD_CCtx_setParameter(cctx, ZSTD_c_contentSizeFlag, 1);  // the decoder refuses frames without it
    std::string frame(ZSTD_compressBound(raw.size()), '\0');
    const size_t n = ZSTD_compress2(cctx, frame.data(), frame.size(), raw.data(), raw.size());
    if (ZSTD_isError(n)) return invalid_argument(at + ": zstd: " + ZSTD_getErrorName(n));
    frame.resize(n);
    payloads.push_back(std::move(frame));
  }

  std::string out;
  out.append(kUpdateMagic, 4);
  put<uint16_t>(out, kUpdateFormatVersion);
  put<uint8_t>(out, static_cast<uint8_t>(codec));
  put<uint8_t>(out, static_cast<uint8_t>(options.zstd_level == 0 ? Compression::kNone : Compression::kZstd));
  put<uint32_t>(out, static_cast<uint32_t>(tensors.size()));
  for (size_t t = 0; t < tensors.size(); ++t) {
    const auto& v = tensors[t];
    put<uint16_t>(out, static_cast<uint16_t>(v.name.size()));
    out.append(v.name);
    put<uint8_t>(out, static_cast<uint8_t>(v.shape.size()));
    for (int64_t d : v.shape) put<int64_t>(out, d);
    put<uint64_t>(out, v.values.size());
    put<uint32_t>(out, block_size);
    put<uint64_t>(out, payloads[t].size());
  }
  for (auto& p : payloads) out.append(p);
  return out;
}

uint64_t update_record_bytes(size_t name_bytes, size_t rank) {
  return sizeof(uint16_t) + name_bytes + sizeof(uint8_t) + rank * sizeof(int64_t) + sizeof(uint64_t) +
         sizeof(uint32_t) + sizeof(uint64_t);
}

uint64_t update_raw_payload_bytes(CodecId codec, uint64_t numel, uint32_t block_size) {
  uint64_t n = 0;
  return raw_payload_bytes(codec, numel, codec == CodecId::kFp32 ? 1 : block_size, &n) ? n : UINT64_MAX;
}

// --- parsing -----------------------------------------------------------------------------------

Result<ParsedUpdate> parse_update(std::string_view bytes, const UpdateDecodeLimits& limits, std::string_view source) {
  const std::string src = "[update] " + std::string(source);
  Reader r(bytes);
  ParsedUpdate u;
  u.bytes = bytes;
  std::string_view magic;
  if (!r.read_bytes(4, &magic) || magic != std::string_view(kUpdateMagic, 4))
    return data_loss(src + ": magic: expected \"MRLU\"; not an encoded meshrl update");
  if (!r.read(&u.format_version)) return data_loss(src + ": format_version: truncated header");
  if (u.format_version != kUpdateFormatVersion)
    return invalid_argument(src + ": format_version: got " + std::to_string(u.format_version) + ", this build reads " +
                            std::to_string(kUpdateFormatVersion) + "; upgrade the older peer");
  uint8_t codec = 0, compression = 0;
  uint32_t n_tensors = 0;
  if (!r.read(&codec) || !r.read(&compression) || !r.read(&n_tensors))
    return data_loss(src + ": header: truncated (need " + std::to_string(kUpdateHeaderBytes) + " bytes)");
  if (codec < 1 || codec > 4) return invalid_argument(src + ": codec: unknown codec id " + std::to_string(codec));
  u.codec = static_cast<CodecId>(codec);
  if (compression > 1) return invalid_argument(src + ": compression: unknown id " + std::to_string(compression));
  u.compression = static_cast<Compression>(compression);
  if (n_tensors > limits.max_tensors)
    return invalid_argument(src + ": n_tensors: " + std::to_string(n_tensors) + " over the caller's limit of " +
                            std::to_string(limits.max_tensors));

  // Each record takes at least 23 bytes, so the buffer bounds the reservation too.
  u.tensors.reserve(std::min<uint64_t>(n_tensors, r.remaining() / 23));
  std::unordered_set<std::string_view> seen;
  uint64_t total_numel = 0, total_stored = 0;
  for (uint32_t t = 0; t < n_tensors; ++t) {
    UpdateRecord rec;
    const auto at = [&](std::string_view field) { return where(source, t, rec.name) + ": " + std::string(field); };
    uint16_t name_len = 0;
    std::string_view name;
    if (!r.read(&name_len)) return data_loss(at("name_len: truncated"));
    if (name_len == 0 || name_len > kMaxUpdateNameBytes)
      return data_loss(at("name_len: " + std::to_string(name_len) + " not in 1..1024"));
    if (!r.read_bytes(name_len, &name))
      return data_loss(at("name: " + std::to_string(name_len) + " bytes declared, " + std::to_string(r.remaining()) + " left"));
    rec.name = std::string(name);
    if (!seen.insert(name).second) return data_loss(at("name: duplicate"));
    uint8_t rank = 0;
    if (!r.read(&rank)) return data_loss(at("rank: truncated"));
    if (rank > kMaxUpdateRank) return data_loss(at("rank: " + std::to_string(rank) + " over the limit of 8"));
    uint64_t product = 1;
    for (uint8_t d = 0; d < rank; ++d) {
      int64_t dim = 0;
      if (!r.read(&dim)) return data_loss(at("shape: truncated"));
      if (dim < 0) return data_loss(at("shape: negative dimension " + std::to_string(dim)));
      if (!mul_ok(product, static_cast<uint64_t>(dim), &product)) return data_loss(at("shape: product overflows"));
      rec.shape.push_back(dim);
    }
    if (!r.read(&rec.numel)) return data_loss(at("numel: truncated"));
    if (rec.numel != product)
      return data_loss(at("numel: " + std::to_string(rec.numel) + " but the shape holds " + std::to_string(product)));
    if (!r.read(&rec.block_size)) return data_loss(at("block_size: truncated"));
    if (u.codec == CodecId::kFp32 ? rec.block_size != 0 : (rec.block_size < 1 || rec.block_size > kMaxUpdateBlockSize))
      return data_loss(at("block_size: " + std::to_string(rec.block_size) + " invalid for codec " +
                          std::string(codec_name(u.codec))));
    if (!r.read(&rec.stored_bytes)) return data_loss(at("stored_bytes: truncated"));
    if (!add_ok(total_numel, rec.numel, &total_numel) || total_numel > limits.max_decoded_bytes / 4)
      return invalid_argument(at("numel: the update declares more than the caller's cap of " +
                                 std::to_string(limits.max_decoded_bytes) + " decoded bytes"));
    if (!raw_payload_bytes(u.codec, rec.numel, rec.block_size, &rec.raw_bytes))
      return data_loss(at("numel: payload size overflows"));
    if (!add_ok(total_stored, rec.stored_bytes, &total_stored)) return data_loss(at("stored_bytes: sum overflows"));
    u.tensors.push_back(std::move(rec));
  }
  u.total_numel = total_numel;
  if (total_stored != r.remaining())
    return data_loss(src + ": stored_bytes: the records declare " + std::to_string(total_stored) + " payload bytes, " +
                     std::to_string(r.remaining()) + " follow the header" +
                     (total_stored > r.remaining() ? " (truncated?)" : " (trailing bytes)"));

  uint64_t offset = r.pos();
  for (size_t t = 0; t < u.tensors.size(); ++t) {
    auto& rec = u.tensors[t];
    rec.stored_offset = offset;
    offset += rec.stored_bytes;
    const std::string at = where(source, t, rec.name);
    if (u.compression == Compression::kNone) {
      if (rec.stored_bytes != rec.raw_bytes)
        return data_loss(at + ": stored_bytes: " + std::to_string(rec.stored_bytes) + ", the " +
                         std::string(codec_name(u.codec)) + " payload of " + std::to_string(rec.numel) +
                         " values is " + std::to_string(rec.raw_bytes));
      continue;
    }
    const char* frame = bytes.data() + rec.stored_offset;
    const unsigned long long content = ZSTD_getFrameContentSize(frame, rec.stored_bytes);
    if (content == ZSTD_CONTENTSIZE_ERROR) return data_loss(at + ": payload: not a zstd frame");
    if (content == ZSTD_CONTENTSIZE_UNKNOWN)
      return data_loss(at + ": payload: zstd frame without a content size; refused (it could be a decompression bomb)");
    if (content != rec.raw_bytes)
      return data_loss(at + ": payload: zstd frame declares " + std::to_string(content) + " bytes, the " +
                       std::string(codec_name(u.codec)) + " payload of " + std::to_string(rec.numel) + " values is " +
                       std::to_string(rec.raw_bytes));
    const size_t frame_size = ZSTD_findFrameCompressedSize(frame, rec.stored_bytes);
    if (ZSTD_isError(frame_size) || frame_size != rec.stored_bytes)
      return data_loss(at + ": payload: zstd frame does not fill its " + std::to_string(rec.stored_bytes) +
                       " stored bytes (" + (ZSTD_isError(frame_size) ? ZSTD_getErrorName(frame_size) : "trailing bytes") + ")");
  }
  return u;
}

// --- decoding one tensor -------------------------------------------------------------------------

Status decode_update_tensor(const ParsedUpdate& update, size_t index, std::span<float> out, std::string_view source) {
  if (index >= update.tensors.size())
    return invalid_argument("[update] " + std::string(source) + ": tensor index " + std::to_string(index) + " out of range");
  const UpdateRecord& rec = update.tensors[index];
  const std::string at = where(source, index, rec.name);
  if (out.size() != rec.numel)
    return invalid_argument(at + ": output holds " + std::to_string(out.size()) + " values, the update " + std::to_string(rec.numel));
  if (rec.numel == 0) return Status::ok();  // parse_update checked its (empty) payload already
  const std::string_view stored = update.bytes.substr(rec.stored_offset, rec.stored_bytes);

  // The raw payload: the stored bytes themselves, or a frame decompressed into `scratch` (or
  // straight into `out` for fp32). Its size was checked against raw_bytes by parse_update.
  std::vector<uint8_t> scratch;
  const uint8_t* raw = reinterpret_cast<const uint8_t*>(stored.data());
  if (update.compression == Compression::kZstd) {
    void* dst = out.data();
    if (update.codec != CodecId::kFp32) {
      scratch.resize(rec.raw_bytes);
      dst = scratch.data();
      raw = scratch.data();
    }
    const size_t n = ZSTD_decompressDCtx(thread_dctx(), dst, rec.raw_bytes, stored.data(), stored.size());
    if (ZSTD_isError(n)) return data_loss(at + ": payload: zstd: " + ZSTD_getErrorName(n));
    if (n != rec.raw_bytes)
      return data_loss(at + ": payload: zstd gave " + std::to_string(n) + " bytes, expected " + std::to_string(rec.raw_bytes));
    if (update.codec == CodecId::kFp32) raw = reinterpret_cast<const uint8_t*>(out.data());
  }

  if (update.codec == CodecId::kFp32) {
    if (raw != reinterpret_cast<const uint8_t*>(out.data())) std::memcpy(out.data(), raw, rec.raw_bytes);
    for (size_t i = 0; i < out.size(); ++i)
      if (!std::isfinite(out[i])) return data_loss(at + ": value " + std::to_string(i) + " is not finite");
    return Status::ok();
  }

  const size_t n_blocks = quant_n_blocks(rec.numel, rec.block_size);
  const int level = max_level(update.codec);
  std::vector<float> scales(n_blocks);
  std::memcpy(scales.data(), raw, n_blocks * sizeof(float));
  for (size_t b = 0; b < n_blocks; ++b) {
    const float s = scales[b];
    // Finite, non-negative (no -0 either: one canonical encoding), and code * scale stays finite.
    if (!std::isfinite(s) || std::signbit(s) || static_cast<double>(s) * level > FLT_MAX)
      return data_loss(at + ": scale of block " + std::to_string(b) + " is " + std::to_string(s) +
                       "; scales must be finite, >= 0 and <= FLT_MAX / " + std::to_string(level));
  }
  const uint8_t* code_bytes = raw + n_blocks * sizeof(float);
  std::vector<int8_t> unpacked;
  std::span<const int8_t> codes;
  if (update.codec == CodecId::kInt8) {
    codes = std::span<const int8_t>(reinterpret_cast<const int8_t*>(code_bytes), rec.numel);
  } else if (update.codec == CodecId::kInt4) {
    const size_t packed_bytes = rec.numel / 2 + rec.numel % 2;
    if (rec.numel % 2 != 0 && (code_bytes[packed_bytes - 1] >> 4) != 0)
      return data_loss(at + ": codes: padding nibble of an odd-length int4 payload must be 0");
    unpacked.resize(rec.numel);
    unpack_int4(std::span<const uint8_t>(code_bytes, packed_bytes), unpacked);
    codes = unpacked;
  } else {
    const size_t packed_bytes = rec.numel / 4 + (rec.numel % 4 != 0 ? 1 : 0);
    if (rec.numel % 4 != 0 && (code_bytes[packed_bytes - 1] >> (2 * (rec.numel % 4))) != 0)
      return data_loss(at + ": codes: padding bits of an int2 payload whose length is not a multiple of 4 must be 0");
    unpacked.resize(rec.numel);
    unpack_int2(std::span<const uint8_t>(code_bytes, packed_bytes), unpacked);
    codes = unpacked;
  }
  for (size_t i = 0; i < codes.size(); ++i)
    if (codes[i] < -level || codes[i] > level)
      return data_loss(at + ": codes: value " + std::to_string(i) + " is " + std::to_string(codes[i]) + ", outside -" +
                       std::to_string(level) + ".." + std::to_string(level));
  dequantize_blockwise(scales, codes, rec.block_size, out);
  return Status::ok();
}

}  // namespace meshrl::mesh
