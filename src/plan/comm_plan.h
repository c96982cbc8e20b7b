// The communication planner behind `meshrl plan`: from a model's config alone, how many parameters
// a node trains and exchanges per round (full weights, or a LoRA adapter), how many bytes that is on
// the wire at a codec, how long each city's link takes to carry it, and how many inner steps of a
// given length hide that time. Pure arithmetic; knows nothing about tensors, training or sockets.
//
// Bytes are the exact size of the update format (mesh/update_format.h) with zstd off: the 12-byte
// header, one record per tensor (name, shape, numel, block size, stored size) and the payload
// (fp32: 4 bytes a value; int8: 1 byte a value + a float32 scale per block; int4: half a byte a
// value + a scale per block). zstd shaves a little more off int8/int4 codes in practice, so these are
// upper bounds of what a real round sends. `bf16` is a reference point only (2 bytes a value, same
// records): the mesh has no bf16 wire codec; it is what "a full bf16 delta" costs.
//
// Round-trip model, per node in city X with the coordinator in city C (net/topology.h's link model):
//   seconds_up      = bytes_up * 8 / (min(X uplink, C downlink) * 10^6)
//   seconds_down    = bytes_down * 8 / (min(C uplink, X downlink) * 10^6)
//   seconds_on_wire = seconds_up + seconds_down + rtt(X, C)      (one request/answer latency)
//   steps_to_hide   = ceil(seconds_on_wire / step_seconds)
// The broadcast (bytes_down) is the aggregated delta of the same parameter set at the same codec.
// Each link is taken alone, as the link emulator does: concurrent uploads sharing the
// coordinator's downlink would stretch seconds_up further.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "model/config.h"
#include "model/lora_config.h"
#include "net/topology.h"

namespace meshrl::plan {

enum class PlanCodec { kFp32, kBf16, kInt8, kInt4, kInt2 };
Result<PlanCodec> plan_codec_from_name(const std::string& name);  // fp32 | bf16 | int8 | int4 | int2
std::string plan_codec_name(PlanCodec codec);

struct PlanInputs {
  model::ModelConfig model;
  std::optional<model::LoraConfig> lora;  // nullopt: full weights only
  PlanCodec codec = PlanCodec::kInt8;
  uint32_t block_size = 64;  // int8 / int4: values per scale (mesh codec default)
  net::Topology topology;
  double step_seconds = 10.0;  // one inner step (rollouts + GRPO update), > 0
};

// One way of training: full weights, or an adapter.
struct ExchangePlan {
  std::string mode;              // "full" or "lora"
  int64_t trainable_params = 0;  // what the inner optimizer updates
  int64_t exchanged_params = 0;  // what a pseudo-gradient carries (== trainable: the mesh sends what is trained)
  int64_t adapter_params = 0;    // lora: A and B together, r * (in + out) per target linear; 0 for full
  int64_t n_tensors = 0;         // tensors in one update
  uint64_t bytes_up_per_round = 0;
  uint64_t bytes_down_per_round = 0;
};

struct CityPlan {
  std::string city;
  double uplink_mbps = 0, downlink_mbps = 0;  // of the link to the coordinator (min of both ends)
  double rtt_ms = 0;
  double seconds_up = 0, seconds_down = 0, seconds_on_wire = 0;
  int64_t steps_to_hide = 0;
};

struct ParamBreakdown {
  int64_t embedding = 0, lm_head = 0, attention = 0, mlp = 0, norms = 0;
  int64_t total() const { return embedding + lm_head + attention + mlp + norms; }
};

struct Plan {
  ParamBreakdown params;  // the full model
  ExchangePlan full;
  std::optional<ExchangePlan> lora;       // when inputs.lora is set
  std::vector<CityPlan> full_cities;      // topology order
  std::vector<CityPlan> lora_cities;      // empty without lora
};

ParamBreakdown count_params(const model::ModelConfig& config);
// Fails on a step time <= 0, a block size out of range, an invalid LoRA config or an empty topology.
Result<Plan> make_plan(const PlanInputs& inputs);

}  // namespace meshrl::plan
