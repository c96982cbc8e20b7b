// A node's local training state on disk. See node_state.h.
#include "mesh/node_state.h"

#include <cstdio>
#include <map>
#include <system_error>

#include <nlohmann/json.hpp>
#include <xxhash.h>

#include "core/file_io.h"
#include "mesh/content_hash.h"
#include "model/safetensors_torch.h"

namespace meshrl::mesh {

namespace {

constexpr char kFileName[] = "node-state.safetensors";
constexpr char kFormat[] = "meshrl-node-state";
constexpr char kResidual[] = "residual/";
constexpr char kExpAvg[] = "adam/exp_avg/";
constexpr char kExpAvgSq[] = "adam/exp_avg_sq/";
constexpr char kNoiseSq[] = "adam/noise_sq/";  // only with the pooled second moment (rl/optimizer.h)

std::string hex128(XXH128_hash_t h) {
  XXH128_canonical_t canon;
  XXH128_canonicalFromHash(&canon, h);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : canon.digest) {
    out.push_back(kHex[c >> 4]);
    out.push_back(kHex[c & 15]);
  }
  return out;
}

// The hash that seals a file: every metadata field but content_hash, then every tensor's bits.
std::string seal(std::map<std::string, std::string> metadata, const std::map<std::string, torch::Tensor>& tensors) {
  metadata.erase("content_hash");
  NamedTensors all;
  for (const auto& [name, t] : tensors) {
    all.names.push_back(name);
    all.tensors.push_back(t);
  }
  const std::string text = nlohmann::json(metadata).dump() + "\n" + content_hash(all);
  return hex128(XXH3_128bits(text.data(), text.size()));
}

bool starts_with(const std::string& s, const char* prefix, std::string* rest) {
  const std::string p(prefix);
  if (s.compare(0, p.size(), p) != 0) return false;
  *rest = s.substr(p.size());
  return true;
}

Result<int64_t> int_field(const std::map<std::string, std::string>& m, const std::string& key, const std::string& where) {
  auto it = m.find(key);
  if (it == m.end()) return invalid_argument(where + ": metadata field '" + key + "' is missing");
  try {
    size_t used = 0;
    const long long v = std::stoll(it->second, &used);
    if (used == it->second.size()) return static_cast<int64_t>(v);
  } catch (const std::exception&) {
  }
  return invalid_argument(where + ": metadata field '" + key + "' is not an integer: '" + it->second + "'");
}

std::string field(const std::map<std::string, std::string>& m, const std::string& key) {
  auto it = m.find(key);
  return it == m.end() ? std::string() : it->second;
}

}  // namespace

std::string param_layout_fingerprint(const std::vector<std::pair<std::string, torch::Tensor>>& params) {
  std::string text = "meshrl-param-layout-v1\n";
  for (const auto& [name, t] : params) {
    text += name + " " + c10::toString(t.scalar_type()) + (t.requires_grad() ? " trained" : " frozen");
    for (int64_t d : t.sizes()) text += " " + std::to_string(d);
    text += "\n";
  }
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(XXH3_64bits(text.data(), text.size())));
  return buf;
}

std::filesystem::path node_state_path(const std::filesystem::path& dir) { return dir / kFileName; }

Status save_node_state(const std::filesystem::path& dir, const NodeState& s) {
  const auto path = node_state_path(dir);
  if (s.param_names.size() != s.optimizer.params.size())
    return invalid_argument("[node state] " + path.string() + ": " + std::to_string(s.param_names.size()) + " parameter names for " +
                            std::to_string(s.optimizer.params.size()) + " optimizer states");
  std::map<std::string, torch::Tensor> tensors;
  for (size_t i = 0; i < s.residual.size(); ++i) tensors[kResidual + s.residual.names[i]] = s.residual.tensors[i];
  nlohmann::json adam_steps = nlohmann::json::object();
  for (size_t i = 0; i < s.param_names.size(); ++i) {
    const auto& m = s.optimizer.params[i];
    if (!m) continue;
    tensors[kExpAvg + s.param_names[i]] = m->exp_avg;
    tensors[kExpAvgSq + s.param_names[i]] = m->exp_avg_sq;
    if (m->noise_sq.defined()) tensors[kNoiseSq + s.param_names[i]] = m->noise_sq;
    adam_steps[s.param_names[i]] = m->step;
  }
  std::map<std::string, std::string> meta{{"format", kFormat},
                                          {"format_version", std::to_string(kNodeStateFormatVersion)},
                                          {"run_id", s.run_id},
                                          {"node", s.node},
                                          {"base_version", std::to_string(s.base_version)},
                                          {"base_hash", s.base_hash},
                                          {"trainer_step", std::to_string(s.trainer_step)},
                                          {"optimizer_step", std::to_string(s.optimizer.step)},
                                          {"layout", s.layout},
                                          {"adam_steps", adam_steps.dump()}};
  meta["content_hash"] = seal(meta, tensors);
  std::vector<std::pair<std::string, torch::Tensor>> list(tensors.begin(), tensors.end());
  auto bytes = model::safetensors_bytes(list, meta);
  if (!bytes.is_ok()) return invalid_argument("[node state] " + path.string() + ": " + bytes.status().message());
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return io_error("[node state] cannot create " + dir.string() + ": " + ec.message());
  return write_file_atomic(path, bytes.value());
}

Result<NodeState> load_node_state(const std::filesystem::path& dir, const NodeStateExpectation& expect) {
  const auto path = node_state_path(dir);
  const std::string where = "[node state] " + path.string();
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return not_found(where + ": no saved state");
  auto read = model::read_safetensors_with_metadata(path);
  if (!read.is_ok()) return data_loss(where + ": corrupt or truncated: " + read.status().message());
  const auto& meta = read.value().metadata;
  const auto& tensors = read.value().tensors;
  if (field(meta, "format") != kFormat) return invalid_argument(where + ": not a node-state file (format '" + field(meta, "format") + "')");
  if (field(meta, "format_version") != std::to_string(kNodeStateFormatVersion))
    return invalid_argument(where + ": format_version " + field(meta, "format_version") + ", this build reads " +
                            std::to_string(kNodeStateFormatVersion));
  if (field(meta, "content_hash") != seal(meta, tensors))
    return data_loss(where + ": corrupt: content hash " + field(meta, "content_hash") + " does not match the contents");
  NodeState s;
  s.run_id = field(meta, "run_id");
  s.node = field(meta, "node");
  s.base_hash = field(meta, "base_hash");
  s.layout = field(meta, "layout");
  if (s.run_id != expect.run_id) return invalid_argument(where + ": saved for run " + s.run_id + ", this run is " + expect.run_id);
  if (s.node != expect.node) return invalid_argument(where + ": saved by node '" + s.node + "', this node is '" + expect.node + "'");
  if (s.layout != expect.layout)
    return invalid_argument(where + ": saved for parameter layout " + s.layout + ", this model's is " + expect.layout);
  MESHRL_ASSIGN_OR_RETURN(s.base_version, int_field(meta, "base_version", where));
  MESHRL_ASSIGN_OR_RETURN(s.trainer_step, int_field(meta, "trainer_step", where));
  MESHRL_ASSIGN_OR_RETURN(s.optimizer.step, int_field(meta, "optimizer_step", where));
  nlohmann::json adam_steps = nlohmann::json::parse(field(meta, "adam_steps"), nullptr, /*allow_exceptions=*/false);
  if (!adam_steps.is_object()) return invalid_argument(where + ": metadata field 'adam_steps' is not a JSON object");
  std::map<std::string, rl::AdamMoments> moments;
  for (const auto& [name, t] : tensors) {
    std::string rest;
    if (starts_with(name, kResidual, &rest)) {
      s.residual.names.push_back(rest);
      s.residual.tensors.push_back(t);
    } else if (starts_with(name, kExpAvgSq, &rest)) {
      moments[rest].exp_avg_sq = t;
    } else if (starts_with(name, kExpAvg, &rest)) {
      moments[rest].exp_avg = t;
    } else if (starts_with(name, kNoiseSq, &rest)) {
      moments[rest].noise_sq = t;
    } else {
      return invalid_argument(where + ": unexpected tensor '" + name + "'");
    }
  }
  // The optimizer's order is the model's; the caller maps names to its own parameters.
  for (auto& [name, m] : moments) {
    if (!m.exp_avg.defined() || !m.exp_avg_sq.defined())
      return invalid_argument(where + ": parameter '" + name + "' lacks an AdamW moment (exp_avg and exp_avg_sq are both needed)");
    if (!adam_steps.contains(name) || !adam_steps[name].is_number_integer())
      return invalid_argument(where + ": adam_steps has no integer step for '" + name + "'");
    m.step = adam_steps[name].get<int64_t>();
    s.param_names.push_back(name);
    s.optimizer.params.emplace_back(std::move(m));
  }
  return s;
}

Result<rl::OptimizerState> fit_node_state(const NodeState& s, const std::vector<std::pair<std::string, torch::Tensor>>& model_params,
                                          const NamedTensors& exchanged, const std::filesystem::path& dir) {
  const std::string where = "[node state] " + node_state_path(dir).string();
  auto misfit = [&](const std::string& what, const torch::Tensor& saved, const torch::Tensor* mine) {
    return invalid_argument(where + ": " + what + " is " + c10::str(saved.sizes()) + ", this model's " +
                            (mine ? c10::str(mine->sizes()) : std::string("does not exist")));
  };
  std::map<std::string, const torch::Tensor*> ex;
  for (size_t i = 0; i < exchanged.size(); ++i) ex[exchanged.names[i]] = &exchanged.tensors[i];
  for (size_t i = 0; i < s.residual.size(); ++i) {
    auto it = ex.find(s.residual.names[i]);
    const torch::Tensor& r = s.residual.tensors[i];
    if (it == ex.end() || r.sizes() != it->second->sizes() || r.scalar_type() != torch::kFloat32)
      return misfit("residual '" + s.residual.names[i] + "'", r, it == ex.end() ? nullptr : it->second);
  }
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < model_params.size(); ++i) index[model_params[i].first] = i;
  rl::OptimizerState out;
  out.step = s.optimizer.step;
  out.params.resize(model_params.size());
  for (size_t i = 0; i < s.param_names.size(); ++i) {
    const auto& m = s.optimizer.params[i];
    if (!m) continue;
    auto it = index.find(s.param_names[i]);
    const torch::Tensor* mine = it == index.end() ? nullptr : &model_params[it->second].second;
    if (!mine || m->exp_avg.sizes() != mine->sizes() || m->exp_avg_sq.sizes() != mine->sizes())
      return misfit("AdamW moment of '" + s.param_names[i] + "'", m->exp_avg, mine);
    if (m->noise_sq.defined() && m->noise_sq.sizes() != mine->sizes())
      return misfit("noise EMA of '" + s.param_names[i] + "'", m->noise_sq, mine);
    out.params[it->second] = m;
  }
  return out;
}

}  // namespace meshrl::mesh
