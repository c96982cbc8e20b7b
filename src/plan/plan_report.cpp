#include "plan/plan_report.h"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>

namespace meshrl::plan {
namespace {

std::string with_commas(int64_t n) {  // counts are never negative
  const std::string digits = std::to_string(n);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

std::string fixed(double x, int digits) {
  char b[64];
  std::snprintf(b, sizeof b, "%.*f", digits, x);
  return b;
}

std::string megabytes(uint64_t bytes) { return fixed(static_cast<double>(bytes) / 1e6, bytes < 10'000'000 ? 2 : 1) + " MB"; }

std::string pad(const std::string& s, size_t width) { return s.size() >= width ? s : s + std::string(width - s.size(), ' '); }
std::string lpad(const std::string& s, size_t width) { return s.size() >= width ? s : std::string(width - s.size(), ' ') + s; }

std::string targets_text(const model::LoraConfig& lora) {
  std::string s;
  for (auto t : lora.targets) s += (s.empty() ? "" : " ") + std::string(model::lora_target_name(t));
  return s;
}

const CityPlan& slowest(const std::vector<CityPlan>& cities) {
  return *std::max_element(cities.begin(), cities.end(),
                           [](const CityPlan& a, const CityPlan& b) { return a.seconds_on_wire < b.seconds_on_wire; });
}

nlohmann::json exchange_json(const ExchangePlan& x, const std::vector<CityPlan>& cities) {
  nlohmann::json j = {{"mode", x.mode},
                      {"trainable_params", x.trainable_params},
                      {"exchanged_params", x.exchanged_params},
                      {"n_tensors", x.n_tensors},
                      {"bytes_up_per_round", x.bytes_up_per_round},
                      {"bytes_down_per_round", x.bytes_down_per_round}};
  if (x.mode == "lora") j["adapter_params"] = x.adapter_params;
  j["cities"] = nlohmann::json::array();
  for (const auto& c : cities)
    j["cities"].push_back({{"city", c.city},
                           {"uplink_mbps", c.uplink_mbps},
                           {"downlink_mbps", c.downlink_mbps},
                           {"rtt_ms", c.rtt_ms},
                           {"seconds_up", c.seconds_up},
                           {"seconds_down", c.seconds_down},
                           {"seconds_on_wire", c.seconds_on_wire},
                           {"steps_to_hide", c.steps_to_hide}});
  return j;
}

}  // namespace

std::string plan_table(const PlanModel& m, const PlanInputs& in, const Plan& plan) {
  const auto& c = m.config;
  std::ostringstream o;
  o << m.name << " (" << (c.arch == model::Arch::kQwen2 ? "qwen2" : "llama") << ", " << c.n_layers << " layers, hidden "
    << c.n_embd << ", " << (c.tie_word_embeddings ? "tied" : "untied") << " lm_head): " << with_commas(plan.params.total())
    << " parameters\n";
  o << "  embedding " << with_commas(plan.params.embedding) << ", lm_head " << with_commas(plan.params.lm_head)
    << ", attention " << with_commas(plan.params.attention) << ", mlp " << with_commas(plan.params.mlp) << ", norms "
    << with_commas(plan.params.norms) << "\n";
  o << "codec " << plan_codec_name(in.codec);
  if (in.codec == PlanCodec::kInt8 || in.codec == PlanCodec::kInt4 || in.codec == PlanCodec::kInt2) o << " (block " << in.block_size << ")";
  o << ", sizes before zstd; coordinator in " << in.topology.coordinator << "; inner step " << fixed(in.step_seconds, 1)
    << " s\n";
  for (const auto& n : m.notes) o << "note: " << n << "\n";
  o << "\n";

  const bool lora = plan.lora.has_value();
  const size_t w0 = 22, w = 20;
  std::string lora_head = lora ? "LoRA r=" + std::to_string(in.lora->rank) : "";
  o << pad("", w0) << lpad("full weights", w) << (lora ? lpad(lora_head, w) : "") << "\n";
  auto row = [&](const std::string& label, const std::string& a, const std::string& b) {
    o << pad(label, w0) << lpad(a, w) << (lora ? lpad(b, w) : "") << "\n";
  };
  row("trainable params", with_commas(plan.full.trainable_params), lora ? with_commas(plan.lora->trainable_params) : "");
  row("exchanged params", with_commas(plan.full.exchanged_params), lora ? with_commas(plan.lora->exchanged_params) : "");
  row("bytes up / round", megabytes(plan.full.bytes_up_per_round), lora ? megabytes(plan.lora->bytes_up_per_round) : "");
  row("bytes down / round", megabytes(plan.full.bytes_down_per_round), lora ? megabytes(plan.lora->bytes_down_per_round) : "");
  if (lora) {
    o << "LoRA: targets " << targets_text(*in.lora) << ", alpha " << fixed(in.lora->alpha, 1) << "; adapter "
      << with_commas(plan.lora->adapter_params) << " params (A frozen from the run's seed, only B trained and sent)\n";
  }
  o << "\n";

  // Per city: seconds up, down and on the wire, and the inner steps that hide them.
  const size_t wc = 10, wl = 11, ws = 9;
  o << pad("city", wc) << lpad("up/down", wl) << lpad("rtt", 6) << " | " << lpad("full up s", ws + 1) << lpad("down s", ws)
    << lpad("steps", 7);
  if (lora) o << " | " << lpad("lora up s", ws + 1) << lpad("down s", ws) << lpad("steps", 7);
  o << "\n";
  for (size_t i = 0; i < plan.full_cities.size(); ++i) {
    const auto& f = plan.full_cities[i];
    o << pad(f.city, wc) << lpad(fixed(f.uplink_mbps, 0) + "/" + fixed(f.downlink_mbps, 0), wl)
      << lpad(fixed(f.rtt_ms, 0), 6) << " | " << lpad(fixed(f.seconds_up, 1), ws + 1) << lpad(fixed(f.seconds_down, 1), ws)
      << lpad(std::to_string(f.steps_to_hide), 7);
    if (lora) {
      const auto& l = plan.lora_cities[i];
      o << " | " << lpad(fixed(l.seconds_up, 2), ws + 1) << lpad(fixed(l.seconds_down, 2), ws)
        << lpad(std::to_string(l.steps_to_hide), 7);
    }
    o << "\n";
  }
  o << "(Mbit/s of the link to the coordinator; steps = inner steps that hide up + down + rtt)\n";
  return o.str();
}

std::string plan_json(const PlanModel& m, const PlanInputs& in, const Plan& plan) {
  const bool lora = plan.lora.has_value();
  const ExchangePlan& asked = lora ? *plan.lora : plan.full;
  const CityPlan& slow = slowest(lora ? plan.lora_cities : plan.full_cities);
  nlohmann::json j;
  j["model"] = m.name;
  j["mode"] = asked.mode;
  j["codec"] = plan_codec_name(in.codec);
  j["step_seconds"] = in.step_seconds;
  j["full_params"] = plan.params.total();
  j["trainable_params"] = asked.trainable_params;
  j["exchanged_params"] = asked.exchanged_params;
  j["bytes_up_per_round"] = asked.bytes_up_per_round;
  j["bytes_down_per_round"] = asked.bytes_down_per_round;
  j["slowest_city"] = slow.city;
  j["seconds_up"] = slow.seconds_up;
  j["seconds_on_wire"] = slow.seconds_on_wire;
  j["steps_to_hide"] = slow.steps_to_hide;
  j["params"] = {{"embedding", plan.params.embedding},
                 {"lm_head", plan.params.lm_head},
                 {"attention", plan.params.attention},
                 {"mlp", plan.params.mlp},
                 {"norms", plan.params.norms}};
  j["full"] = exchange_json(plan.full, plan.full_cities);
  if (lora) {
    j["lora"] = exchange_json(*plan.lora, plan.lora_cities);
    j["lora"]["rank"] = in.lora->rank;
    j["lora"]["alpha"] = in.lora->alpha;
    std::vector<std::string> t;
    for (auto x : in.lora->targets) t.emplace_back(model::lora_target_name(x));
    j["lora"]["targets"] = t;
  }
  j["notes"] = m.notes;
  return j.dump() + "\n";
}

}  // namespace meshrl::plan
