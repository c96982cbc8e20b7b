#include "model/config.h"

#include <cmath>
#include <nlohmann/json.hpp>
#include <optional>

#include "core/file_io.h"

namespace meshrl::model {
namespace {

using nlohmann::json;

// Sizes beyond these are not models this project runs; refusing them early keeps a hostile
// config.json from asking for absurd allocations later.
constexpr int64_t kMaxDim = int64_t{1} << 24;
constexpr int64_t kMaxLayers = 4096;

// Reads config.json fields with one error style: "[config] FILE: field 'x' must be ..., got ...".
class Fields {
 public:
  Fields(const json& j, const std::string& source) : j_(j), source_(source) {}

  Status error(const std::string& field, const std::string& what) const {
    return invalid_argument("[config] " + source_ + ": field '" + field + "' " + what);
  }
  bool has(const std::string& k) const { return j_.contains(k) && !j_.at(k).is_null(); }
  const json& at(const std::string& k) const { return j_.at(k); }

  // A positive integer, required or defaulted (default_value < 0 means required).
  Status positive_int(const std::string& k, int64_t default_value, int64_t max, int64_t* out) const {
    if (!has(k)) {
      if (default_value < 0) return error(k, "is required");
      *out = default_value;
      return Status::ok();
    }
    const json& v = j_.at(k);
    if (!v.is_number_integer()) return error(k, std::string("must be an integer, got ") + describe(v));
    if (v.is_number_unsigned() ? v.get<uint64_t>() > static_cast<uint64_t>(max) : v.get<int64_t>() > max)
      return error(k, "is " + v.dump() + ", over the limit of " + std::to_string(max));
    int64_t x = v.get<int64_t>();
    if (x <= 0) return error(k, "must be positive, got " + v.dump());
    *out = x;
    return Status::ok();
  }

  Status positive_number(const std::string& k, double default_value, double* out) const {
    if (!has(k)) {
      *out = default_value;
      return Status::ok();
    }
    const json& v = j_.at(k);
    if (!v.is_number()) return error(k, std::string("must be a number, got ") + describe(v));
    double x = v.get<double>();
    if (!(x > 0) || !std::isfinite(x)) return error(k, "must be a positive finite number, got " + v.dump());
    *out = x;
    return Status::ok();
  }

  Status boolean(const std::string& k, bool default_value, bool* out) const {
    if (!has(k)) {
      *out = default_value;
      return Status::ok();
    }
    if (!j_.at(k).is_boolean()) return error(k, std::string("must be true or false, got ") + describe(j_.at(k)));
    *out = j_.at(k).get<bool>();
    return Status::ok();
  }

  Status token_id(const std::string& k, const json& v, int64_t* out) const {
    if (!v.is_number_integer() || (v.is_number_integer() && !v.is_number_unsigned() && v.get<int64_t>() < 0) ||
        (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)))
      return error(k, "must be a non-negative integer token id, got " + v.dump());
    *out = v.get<int64_t>();
    return Status::ok();
  }

  static std::string describe(const json& v) {
    std::string d = v.dump();
    if (d.size() > 60) d = d.substr(0, 60) + "...";
    return std::string(v.type_name()) + " " + d;
  }

 private:
  const json& j_;
  const std::string& source_;
};

Result<Arch> arch_from(const Fields& f) {
  std::optional<Arch> from_arch, from_type;
  if (f.has("architectures")) {
    const json& a = f.at("architectures");
    if (!a.is_array() || a.empty() || !a[0].is_string())
      return f.error("architectures", "must be a non-empty list of strings, got " + Fields::describe(a));
    const auto& name = a[0].get_ref<const std::string&>();
    if (name == "LlamaForCausalLM") from_arch = Arch::kLlama;
    else if (name == "Qwen2ForCausalLM") from_arch = Arch::kQwen2;
    else
      return f.error("architectures", "names " + name + "; supported: LlamaForCausalLM, Qwen2ForCausalLM");
  }
  if (f.has("model_type")) {
    const json& t = f.at("model_type");
    if (!t.is_string()) return f.error("model_type", "must be a string, got " + Fields::describe(t));
    const auto& name = t.get_ref<const std::string&>();
    if (name == "llama") from_type = Arch::kLlama;
    else if (name == "qwen2") from_type = Arch::kQwen2;
    else if (!from_arch) return f.error("model_type", "is '" + name + "'; supported: llama, qwen2");
  }
  if (from_arch && from_type && *from_arch != *from_type)
    return f.error("model_type", "'" + f.at("model_type").get<std::string>() + "' contradicts architectures[0] '" +
                                     f.at("architectures")[0].get<std::string>() + "'");
  if (from_arch) return *from_arch;
  if (from_type) return *from_type;
  return f.error("architectures", "and model_type are both missing; cannot tell the architecture");
}

}  // namespace

Result<ModelConfig> parse_hf_config(const std::string& json_text, const std::string& source) {
  json j;
  try {
    j = json::parse(json_text);
  } catch (const json::exception& e) {
    return invalid_argument("[config] " + source + " is not valid JSON: " + e.what());
  }
  if (!j.is_object()) return invalid_argument("[config] " + source + " must hold a JSON object");
  Fields f(j, source);
  ModelConfig c;
  MESHRL_ASSIGN_OR_RETURN(c.arch, arch_from(f));

  MESHRL_RETURN_IF_ERROR(f.positive_int("vocab_size", -1, kMaxDim, &c.n_vocab));
  MESHRL_RETURN_IF_ERROR(f.positive_int("hidden_size", -1, kMaxDim, &c.n_embd));
  MESHRL_RETURN_IF_ERROR(f.positive_int("num_hidden_layers", -1, kMaxLayers, &c.n_layers));
  MESHRL_RETURN_IF_ERROR(f.positive_int("num_attention_heads", -1, kMaxDim, &c.n_heads));
  MESHRL_RETURN_IF_ERROR(f.positive_int("intermediate_size", -1, kMaxDim, &c.n_ff));
  // Hugging Face's default for a missing num_key_value_heads is plain multi-head attention.
  MESHRL_RETURN_IF_ERROR(f.positive_int("num_key_value_heads", c.n_heads, kMaxDim, &c.n_kv_heads));
  MESHRL_RETURN_IF_ERROR(f.positive_int("max_position_embeddings", 2048, kMaxDim, &c.max_positions));
  MESHRL_RETURN_IF_ERROR(f.positive_number("rope_theta", 10000.0, &c.rope_theta));
  // LlamaConfig and Qwen2Config both default to 1e-6 and to untied embeddings when the key is absent.
  MESHRL_RETURN_IF_ERROR(f.positive_number("rms_norm_eps", 1e-6, &c.rms_norm_eps));
  MESHRL_RETURN_IF_ERROR(f.boolean("tie_word_embeddings", false, &c.tie_word_embeddings));
  // Qwen2 always has q/k/v biases (its config has no such key); Llama has them only when asked.
  MESHRL_RETURN_IF_ERROR(f.boolean("attention_bias", c.arch == Arch::kQwen2, &c.attention_bias));

  if (c.n_embd % c.n_heads != 0)
    return f.error("hidden_size", std::to_string(c.n_embd) + " is not divisible by num_attention_heads " +
                                      std::to_string(c.n_heads));
  if (c.n_heads % c.n_kv_heads != 0)
    return f.error("num_key_value_heads", std::to_string(c.n_kv_heads) + " does not divide num_attention_heads " +
                                              std::to_string(c.n_heads));
  if (c.head_dim() % 2 != 0)
    return f.error("hidden_size", "gives an odd head dimension " + std::to_string(c.head_dim()) +
                                      "; rotary embeddings need an even one");

  // Features this implementation does not have: refuse rather than compute something else.
  if (f.has("rope_scaling"))
    return f.error("rope_scaling", "is " + Fields::describe(f.at("rope_scaling")) +
                                       "; rope scaling is not supported (only plain RoPE)");
  if (f.has("hidden_act")) {
    const json& a = f.at("hidden_act");
    if (!a.is_string() || a.get<std::string>() != "silu")
      return f.error("hidden_act", "is " + Fields::describe(a) + "; only \"silu\" is supported");
  }
  if (f.has("head_dim")) {
    int64_t hd = 0;
    MESHRL_RETURN_IF_ERROR(f.positive_int("head_dim", -1, kMaxDim, &hd));
    if (hd != c.head_dim())
      return f.error("head_dim", "is " + std::to_string(hd) + " but hidden_size / num_attention_heads is " +
                                     std::to_string(c.head_dim()) + "; a separate head_dim is not supported");
  }
  bool flag = false;
  MESHRL_RETURN_IF_ERROR(f.boolean("mlp_bias", false, &flag));
  if (flag) return f.error("mlp_bias", "is true; MLP biases are not supported");
  MESHRL_RETURN_IF_ERROR(f.boolean("use_sliding_window", false, &flag));
  if (flag) return f.error("use_sliding_window", "is true; sliding-window attention is not supported");

  if (f.has("bos_token_id")) MESHRL_RETURN_IF_ERROR(f.token_id("bos_token_id", f.at("bos_token_id"), &c.bos_token_id));
  if (f.has("eos_token_id")) {
    const json& e = f.at("eos_token_id");
    if (e.is_array()) {
      for (const auto& x : e) {
        int64_t id = 0;
        MESHRL_RETURN_IF_ERROR(f.token_id("eos_token_id", x, &id));
        c.eos_token_ids.push_back(id);
      }
    } else {
      int64_t id = 0;
      MESHRL_RETURN_IF_ERROR(f.token_id("eos_token_id", e, &id));
      c.eos_token_ids.push_back(id);
    }
  }
  // Newer transformers write "dtype", older "torch_dtype".
  for (const char* k : {"torch_dtype", "dtype"}) {
    if (!f.has(k)) continue;
    if (!f.at(k).is_string()) return f.error(k, "must be a string, got " + Fields::describe(f.at(k)));
    c.torch_dtype = f.at(k).get<std::string>();
    break;
  }
  return c;
}

Result<ModelConfig> load_hf_config(const std::filesystem::path& config_json) {
  MESHRL_ASSIGN_OR_RETURN(auto text, read_file(config_json, /*max_bytes=*/16 << 20));
  return parse_hf_config(text, config_json.string());
}

std::string to_hf_config_json(const ModelConfig& c) {
  const bool qwen = c.arch == Arch::kQwen2;
  json j = json::object();  // keys come out sorted, as transformers writes them
  j["architectures"] = {qwen ? "Qwen2ForCausalLM" : "LlamaForCausalLM"};
  j["model_type"] = qwen ? "qwen2" : "llama";
  j["attention_bias"] = c.attention_bias;
  j["attention_dropout"] = 0.0;
  j["bos_token_id"] = c.bos_token_id >= 0 ? json(c.bos_token_id) : json(nullptr);
  if (c.eos_token_ids.empty()) j["eos_token_id"] = nullptr;
  else if (c.eos_token_ids.size() == 1) j["eos_token_id"] = c.eos_token_ids[0];
  else j["eos_token_id"] = c.eos_token_ids;
  j["head_dim"] = c.head_dim();
  j["hidden_act"] = "silu";
  j["hidden_size"] = c.n_embd;
  j["initializer_range"] = 0.02;
  j["intermediate_size"] = c.n_ff;
  j["max_position_embeddings"] = c.max_positions;
  j["num_attention_heads"] = c.n_heads;
  j["num_hidden_layers"] = c.n_layers;
  j["num_key_value_heads"] = c.n_kv_heads;
  j["rms_norm_eps"] = c.rms_norm_eps;
  j["rope_scaling"] = nullptr;
  j["rope_theta"] = c.rope_theta;
  j["tie_word_embeddings"] = c.tie_word_embeddings;
  j["torch_dtype"] = c.torch_dtype;
  j["use_cache"] = true;
  j["vocab_size"] = c.n_vocab;
  if (qwen) j["use_sliding_window"] = false;
  else j["mlp_bias"] = false;
  return j.dump(2) + "\n";
}

bool is_preset_name(const std::string& name) { return name == "tiny" || name == "small"; }

Result<ModelConfig> preset_config(const std::string& name) {
  ModelConfig c;  // struct defaults: Llama, tied, rope_theta 1e4, rms_norm_eps 1e-5
  if (name == "tiny") {
    c.n_vocab = 512, c.n_embd = 256, c.n_layers = 4, c.n_heads = 8, c.n_kv_heads = 4, c.n_ff = 768;
  } else if (name == "small") {
    c.n_vocab = 8192, c.n_embd = 512, c.n_layers = 8, c.n_heads = 8, c.n_kv_heads = 4, c.n_ff = 1536;
  } else {
    return invalid_argument("[config] unknown model preset '" + name + "'; presets: tiny, small");
  }
  c.arch = Arch::kLlama;
  c.tie_word_embeddings = true;
  c.attention_bias = false;
  return c;
}

}  // namespace meshrl::model
