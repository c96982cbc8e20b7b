#include "mesh/codec.h"

#include <zstd.h>

namespace meshrl::mesh {
namespace {

Result<NamedTensors> decode_parsed(const ParsedUpdate& parsed, std::string_view source) {
  NamedTensors out;
  out.names.reserve(parsed.tensors.size());
  out.tensors.reserve(parsed.tensors.size());
  for (size_t i = 0; i < parsed.tensors.size(); ++i) {
    const auto& rec = parsed.tensors[i];
    auto t = torch::empty(rec.shape, torch::kFloat32);  // numel under the cap: checked by parse_update
    MESHRL_RETURN_IF_ERROR(
        decode_update_tensor(parsed, i, std::span<float>(t.data_ptr<float>(), static_cast<size_t>(rec.numel)), source));
    out.names.push_back(rec.name);
    out.tensors.push_back(std::move(t));
  }
  return out;
}

// One implementation serves fp32, int8, int4 and int2: they differ only in the codec id the wire
// format is written with. The interface is there for codecs that differ more (top-k, low rank).
class WireCodec final : public UpdateCodec {
 public:
  explicit WireCodec(const CodecConfig& config) : config_(config) {}
  CodecId id() const override { return config_.id; }
  const CodecConfig& config() const override { return config_; }

  Result<std::string> encode(const NamedTensors& update, uint64_t rounding_seed) const override {
    MESHRL_RETURN_IF_ERROR(check_named_tensors(update, "encode"));
    std::vector<torch::Tensor> contiguous;  // keeps the spans below alive
    std::vector<std::vector<int64_t>> shapes;
    std::vector<UpdateTensorView> views;
    contiguous.reserve(update.size());
    shapes.reserve(update.size());
    for (size_t i = 0; i < update.size(); ++i) {
      contiguous.push_back(update.tensors[i].detach().contiguous());
      const auto& t = contiguous.back();
      shapes.emplace_back(t.sizes().begin(), t.sizes().end());
      views.push_back({update.names[i], shapes.back(),
                       std::span<const float>(t.data_ptr<float>(), static_cast<size_t>(t.numel()))});
    }
    UpdateEncodeOptions options;
    options.codec = config_.id;
    options.block_size = config_.block_size;
    options.zstd_level = config_.zstd_level;
    options.stochastic_rounding = config_.stochastic_rounding;
    options.int2_density = config_.int2_density;
    options.int2_mean_scale = config_.int2_mean_scale;
    options.seed = rounding_seed;
    return write_update(views, options);
  }

  Result<NamedTensors> decode(std::string_view bytes, const UpdateDecodeLimits& limits,
                              std::string_view source) const override {
    MESHRL_ASSIGN_OR_RETURN(auto parsed, parse_update(bytes, limits, source));
    if (parsed.codec != config_.id)
      return invalid_argument("[update] " + std::string(source) + ": codec: got " + std::string(codec_name(parsed.codec)) +
                              ", this run uses " + std::string(codec_name(config_.id)));
    return decode_parsed(parsed, source);
  }

 private:
  CodecConfig config_;
};

}  // namespace

Result<std::unique_ptr<UpdateCodec>> make_codec(const CodecConfig& config) {
  if (codec_name(config.id) == "unknown")
    return invalid_argument("[codec] unknown codec id " + std::to_string(static_cast<int>(config.id)));
  if (config.id != CodecId::kFp32 && (config.block_size < 1 || config.block_size > kMaxUpdateBlockSize))
    return invalid_argument("[codec] block_size must be in 1.." + std::to_string(kMaxUpdateBlockSize) + ", got " +
                            std::to_string(config.block_size));
  if (config.zstd_level != 0 && (config.zstd_level < ZSTD_minCLevel() || config.zstd_level > ZSTD_maxCLevel()))
    return invalid_argument("[codec] zstd_level must be 0 (off) or in " + std::to_string(ZSTD_minCLevel()) + ".." +
                            std::to_string(ZSTD_maxCLevel()) + ", got " + std::to_string(config.zstd_level));
  if (!(config.int2_density >= 0.0 && config.int2_density <= 1.0) || (config.int2_density > 0.0 && config.id != CodecId::kInt2))
    return invalid_argument("[codec] int2_density must be 0, or in (0, 1] with codec int2; got " +
                            std::to_string(config.int2_density) + " with " + std::string(codec_name(config.id)));
  return std::unique_ptr<UpdateCodec>(std::make_unique<WireCodec>(config));
}

Result<CodecConfig> codec_config(const MeshSection& m) {
  CodecConfig c;
  auto id = codec_from_name(m.codec);
  if (!id) return invalid_argument("[mesh] codec '" + m.codec + "' unknown");
  c.id = *id;
  c.block_size = static_cast<uint32_t>(m.block_size);
  c.zstd_level = static_cast<int>(m.zstd_level);
  c.int2_density = m.int2_density;
  c.int2_mean_scale = m.int2_scale == "mean";  // inert unless the id is int2
  return c;
}

Result<CodecConfig> broadcast_codec_config(const MeshSection& m) {
  MESHRL_ASSIGN_OR_RETURN(CodecConfig c, codec_config(m));
  c.int2_mean_scale = m.broadcast_int2_scale == "mean";  // inert unless the broadcast is int2
  if (m.broadcast_codec.empty()) return c;
  auto id = codec_from_name(m.broadcast_codec);
  if (!id) return invalid_argument("[mesh] broadcast_codec '" + m.broadcast_codec + "' unknown");
  if (*id != c.id) c.int2_density = 0.0;  // the sparse ternary is the updates' option
  c.id = *id;
  return c;
}

Result<NamedTensors> decode_update(std::string_view bytes, const UpdateDecodeLimits& limits, std::string_view source) {
  MESHRL_ASSIGN_OR_RETURN(auto parsed, parse_update(bytes, limits, source));
  return decode_parsed(parsed, source);
}

}  // namespace meshrl::mesh
