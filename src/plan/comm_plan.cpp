#include "plan/comm_plan.h"

#include <algorithm>
#include <cmath>

#include "mesh/update_format.h"
#include "model/param_specs.h"

namespace meshrl::plan {
namespace {

uint64_t update_bytes(const std::vector<model::ParamSpec>& specs, PlanCodec codec, uint32_t block_size) {
  uint64_t bytes = mesh::kUpdateHeaderBytes;
  for (const auto& s : specs) {
    const auto numel = static_cast<uint64_t>(s.numel());
    bytes += mesh::update_record_bytes(s.name.size(), s.shape.size());
    switch (codec) {
      case PlanCodec::kFp32: bytes += mesh::update_raw_payload_bytes(mesh::CodecId::kFp32, numel, 0); break;
      case PlanCodec::kBf16: bytes += numel * 2; break;
      case PlanCodec::kInt8: bytes += mesh::update_raw_payload_bytes(mesh::CodecId::kInt8, numel, block_size); break;
      case PlanCodec::kInt4: bytes += mesh::update_raw_payload_bytes(mesh::CodecId::kInt4, numel, block_size); break;
      case PlanCodec::kInt2: bytes += mesh::update_raw_payload_bytes(mesh::CodecId::kInt2, numel, block_size); break;
    }
  }
  return bytes;
}

ExchangePlan exchange_plan(const std::string& mode, const std::vector<model::ParamSpec>& exchanged, int64_t adapter_params,
                           const PlanInputs& in) {
  ExchangePlan p;
  p.mode = mode;
  p.trainable_params = model::total_numel(exchanged);
  p.exchanged_params = p.trainable_params;
  p.adapter_params = adapter_params;
  p.n_tensors = static_cast<int64_t>(exchanged.size());
  p.bytes_up_per_round = update_bytes(exchanged, in.codec, in.block_size);
  p.bytes_down_per_round = p.bytes_up_per_round;
  return p;
}

std::vector<CityPlan> city_plans(const ExchangePlan& x, const PlanInputs& in) {
  const net::Topology& topo = in.topology;
  const net::City& coord = topo.city(topo.coordinator);
  std::vector<CityPlan> out;
  for (const net::City& c : topo.cities) {
    CityPlan p;
    p.city = c.name;
    p.uplink_mbps = std::min(c.uplink_mbps, coord.downlink_mbps);
    p.downlink_mbps = std::min(coord.uplink_mbps, c.downlink_mbps);
    p.rtt_ms = topo.rtt(c.name, topo.coordinator);
    p.seconds_up = static_cast<double>(x.bytes_up_per_round) * 8.0 / (p.uplink_mbps * 1e6);
    p.seconds_down = static_cast<double>(x.bytes_down_per_round) * 8.0 / (p.downlink_mbps * 1e6);
    p.seconds_on_wire = p.seconds_up + p.seconds_down + p.rtt_ms / 1000.0;
    p.steps_to_hide = static_cast<int64_t>(std::ceil(p.seconds_on_wire / in.step_seconds));
    out.push_back(p);
  }
  return out;
}

}  // namespace

Result<PlanCodec> plan_codec_from_name(const std::string& name) {
  if (name == "fp32") return PlanCodec::kFp32;
  if (name == "bf16") return PlanCodec::kBf16;
  if (name == "int8") return PlanCodec::kInt8;
  if (name == "int4") return PlanCodec::kInt4;
  if (name == "int2") return PlanCodec::kInt2;
  return invalid_argument("[plan] --codec: unknown codec '" + name + "'; one of fp32, bf16, int8, int4");
}

std::string plan_codec_name(PlanCodec codec) {
  switch (codec) {
    case PlanCodec::kFp32: return "fp32";
    case PlanCodec::kBf16: return "bf16";
    case PlanCodec::kInt8: return "int8";
    case PlanCodec::kInt4: return "int4";
    case PlanCodec::kInt2: return "int2";
  }
  return "?";
}

ParamBreakdown count_params(const model::ModelConfig& config) {
  ParamBreakdown b;
  for (const auto& s : model::transformer_param_specs(config)) {
    switch (s.kind) {
      case model::ParamKind::kEmbedding: b.embedding += s.numel(); break;
      case model::ParamKind::kLmHead: b.lm_head += s.numel(); break;
      case model::ParamKind::kAttention: b.attention += s.numel(); break;
      case model::ParamKind::kMlp: b.mlp += s.numel(); break;
      case model::ParamKind::kNorm: b.norms += s.numel(); break;
      default: break;
    }
  }
  return b;
}

Result<Plan> make_plan(const PlanInputs& in) {
  if (!(in.step_seconds > 0) || !std::isfinite(in.step_seconds))
    return invalid_argument("[plan] --step-seconds must be a finite number > 0, got " + std::to_string(in.step_seconds));
  if ((in.codec == PlanCodec::kInt8 || in.codec == PlanCodec::kInt4 || in.codec == PlanCodec::kInt2) &&
      (in.block_size < 1 || in.block_size > mesh::kMaxUpdateBlockSize))
    return invalid_argument("[plan] block size must be 1.." + std::to_string(mesh::kMaxUpdateBlockSize));
  if (in.topology.cities.empty() || !in.topology.has_city(in.topology.coordinator))
    return invalid_argument("[plan] the topology has no cities or no coordinator city");
  Plan plan;
  plan.params = count_params(in.model);
  plan.full = exchange_plan("full", model::transformer_param_specs(in.model), 0, in);
  plan.full_cities = city_plans(plan.full, in);
  if (in.lora) {
    MESHRL_RETURN_IF_ERROR(model::check_lora_config(*in.lora, "plan"));
    const auto specs = model::lora_param_specs(in.model, *in.lora);
    std::vector<model::ParamSpec> trained;  // only B: A is frozen from the run's seed (model/lora.h)
    for (const auto& s : specs)
      if (s.kind == model::ParamKind::kLoraB) trained.push_back(s);
    plan.lora = exchange_plan("lora", trained, model::total_numel(specs), in);
    plan.lora_cities = city_plans(*plan.lora, in);
  }
  return plan;
}

}  // namespace meshrl::plan
