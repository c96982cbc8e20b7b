#include "model/checkpoint.h"
#include "model/shape_str.h"

#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>

#include "core/file_io.h"
#include "model/safetensors_torch.h"

namespace meshrl::model {
namespace fs = std::filesystem;
namespace {

constexpr const char* kSingleFile = "model.safetensors";
constexpr const char* kIndexFile = "model.safetensors.index.json";
constexpr uint64_t kMaxIndexBytes = 64 << 20;

// "model.layers.N.rest" -> N, or -1 when the name is not a layer tensor or N is not a number.
int64_t layer_index(const std::string& name) {
  static const std::string kPrefix = "model.layers.";
  if (name.rfind(kPrefix, 0) != 0) return -1;
  size_t i = kPrefix.size();
  int64_t n = 0;
  size_t digits = 0;
  for (; i < name.size() && std::isdigit(static_cast<unsigned char>(name[i])) && digits < 9; ++i, ++digits)
    n = n * 10 + (name[i] - '0');
  if (digits == 0 || i >= name.size() || name[i] != '.') return -1;
  return n;
}

bool is_dropped_buffer(const std::string& name) {
  static const std::string kSuffix = "rotary_emb.inv_freq";
  return name.size() >= kSuffix.size() && name.compare(name.size() - kSuffix.size(), kSuffix.size(), kSuffix) == 0;
}

bool is_shard_name(const std::string& name) {
  static const std::regex kShard(R"(model-\d{5}-of-\d{5}\.safetensors)");
  return std::regex_match(name, kShard);
}

std::string shard_name(size_t i, size_t n) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "model-%05zu-of-%05zu.safetensors", i + 1, n);
  return buf;
}

// A shard name from an index file: a plain file name, so a hostile index cannot point outside dir.
bool is_plain_file_name(const std::string& name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos &&
         name.find('\\') == std::string::npos && name.find('\0') == std::string::npos;
}

Status refuse_pickle_or_empty(const fs::path& dir) {
  std::vector<std::string> pickles;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    std::string name = e.path().filename().string();
    std::string ext = e.path().extension().string();
    if (ext == ".bin" || ext == ".pt" || ext == ".pth" || ext == ".ckpt" || name == "pytorch_model.bin.index.json")
      pickles.push_back(name);
  }
  std::sort(pickles.begin(), pickles.end());
  if (!pickles.empty()) {
    return unimplemented("[checkpoint] " + dir.string() + " holds only pickle checkpoints (" + pickles[0] +
                         (pickles.size() > 1 ? ", ..." : "") +
                         "); meshrl never loads pickle files, since unpickling can run arbitrary code. Convert the "
                         "folder to safetensors first, e.g. in Python with transformers: "
                         "AutoModelForCausalLM.from_pretrained(dir).save_pretrained(out_dir, safe_serialization=True)");
  }
  return not_found("[checkpoint] " + dir.string() + " has no " + kSingleFile + " or " + kIndexFile);
}

Result<std::map<std::string, torch::Tensor>> load_sharded(const fs::path& dir) {
  const fs::path index_path = dir / kIndexFile;
  const std::string src = index_path.string();
  MESHRL_ASSIGN_OR_RETURN(auto text, read_file(index_path, kMaxIndexBytes));
  nlohmann::json index;
  try {
    index = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    return data_loss("[checkpoint] " + src + " is not valid JSON: " + e.what());
  }
  if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object())
    return data_loss("[checkpoint] " + src + ": field 'weight_map' must be an object of tensor name -> shard file");

  std::map<std::string, std::vector<std::string>> by_shard;  // shard file -> tensor names
  for (const auto& [name, file] : index["weight_map"].items()) {
    if (!file.is_string())
      return data_loss("[checkpoint] " + src + ": weight_map entry for '" + name + "' must be a file name string");
    const auto& f = file.get_ref<const std::string&>();
    if (!is_plain_file_name(f))
      return data_loss("[checkpoint] " + src + ": weight_map entry for '" + name + "' names '" + f +
                       "', which is not a plain file name inside the folder");
    by_shard[f].push_back(name);
  }
  if (by_shard.empty()) return data_loss("[checkpoint] " + src + ": weight_map is empty");

  std::map<std::string, torch::Tensor> out;
  for (const auto& [shard, names] : by_shard) {
    const fs::path shard_path = dir / shard;
    if (!fs::exists(shard_path))
      return not_found("[checkpoint] shard " + shard + " listed in " + src + " (for " + names[0] + ") does not exist");
    MESHRL_ASSIGN_OR_RETURN(auto tensors, read_safetensors(shard_path));
    for (const auto& name : names) {
      auto it = tensors.find(name);
      if (it == tensors.end())
        return data_loss("[checkpoint] tensor " + name + " is listed in " + src + " for shard " + shard +
                         ", but " + shard_path.string() + " does not hold it");
      out.emplace(name, std::move(it->second));
      tensors.erase(it);
    }
    if (!tensors.empty())
      return data_loss("[checkpoint] " + shard_path.string() + " holds tensor " + tensors.begin()->first +
                       ", which " + src + " does not list for it");
  }
  return out;
}

}  // namespace

std::vector<std::pair<std::string, std::vector<int64_t>>> expected_hf_tensor_shapes(const ModelConfig& c) {
  const int64_t V = c.n_vocab, E = c.n_embd, D = c.head_dim(), H = c.n_heads, KV = c.n_kv_heads, F = c.n_ff;
  std::vector<std::pair<std::string, std::vector<int64_t>>> out;
  out.push_back({"model.embed_tokens.weight", {V, E}});
  for (int64_t l = 0; l < c.n_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    out.push_back({p + "input_layernorm.weight", {E}});
    out.push_back({p + "self_attn.q_proj.weight", {H * D, E}});
    out.push_back({p + "self_attn.k_proj.weight", {KV * D, E}});
    out.push_back({p + "self_attn.v_proj.weight", {KV * D, E}});
    if (c.attention_bias) {
      out.push_back({p + "self_attn.q_proj.bias", {H * D}});
      out.push_back({p + "self_attn.k_proj.bias", {KV * D}});
      out.push_back({p + "self_attn.v_proj.bias", {KV * D}});
    }
    out.push_back({p + "self_attn.o_proj.weight", {E, H * D}});
    out.push_back({p + "post_attention_layernorm.weight", {E}});
    out.push_back({p + "mlp.gate_proj.weight", {F, E}});
    out.push_back({p + "mlp.up_proj.weight", {F, E}});
    out.push_back({p + "mlp.down_proj.weight", {E, F}});
  }
  out.push_back({"model.norm.weight", {E}});
  if (!c.tie_word_embeddings) out.push_back({"lm_head.weight", {V, E}});
  return out;
}

Status check_weights_match_config(const ModelConfig& c, const std::map<std::string, torch::Tensor>& tensors) {
  // The layer count first: a wrong folder shows up as dozens of missing or unexpected names.
  int64_t max_layer = -1;
  std::string max_name;
  for (const auto& [name, t] : tensors) {
    int64_t l = layer_index(name);
    if (l > max_layer) max_layer = l, max_name = name;
  }
  if (max_layer + 1 != c.n_layers) {
    std::string which = max_layer + 1 > c.n_layers ? "model.layers." + std::to_string(max_layer) + ".*"
                                                   : "no model.layers." + std::to_string(max_layer + 1) + ".*";
    return invalid_argument("[checkpoint] config.json says " + std::to_string(c.n_layers) + " layers, weights have " +
                            std::to_string(max_layer + 1) + " (" + which + "); is this the right folder?");
  }
  std::set<std::string> expected;
  for (const auto& [name, shape] : expected_hf_tensor_shapes(c)) {
    expected.insert(name);
    auto it = tensors.find(name);
    if (it == tensors.end()) return not_found("[checkpoint] missing tensor " + name);
    const auto& t = it->second;
    if (!t.defined()) return invalid_argument("[checkpoint] tensor " + name + " is undefined");
    if (t.sizes() != c10::IntArrayRef(shape))
      return invalid_argument("[checkpoint] shape of " + name + " is " + shape_str(t.sizes()) +
                              ", config.json implies " + shape_str(shape));
    if (!t.is_floating_point())
      return invalid_argument("[checkpoint] tensor " + name + " has dtype " + std::string(c10::toString(t.scalar_type())) +
                              "; weights must be F32, F16, BF16 or F64");
  }
  for (const auto& [name, t] : tensors) {
    if (expected.count(name)) continue;
    // Tied models sometimes still carry lm_head.weight; it is ignored when its shape fits.
    if (name == "lm_head.weight" && c.tie_word_embeddings && t.defined() &&
        t.sizes() == c10::IntArrayRef({c.n_vocab, c.n_embd}))
      continue;
    return invalid_argument("[checkpoint] unexpected tensor " + name + " (shape " + shape_str(t.sizes()) +
                            ") for a " + (c.arch == Arch::kQwen2 ? "Qwen2" : "Llama") + " config");
  }
  return Status::ok();
}

Result<Checkpoint> load_checkpoint(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return not_found("[checkpoint] " + dir.string() + " is not a folder");
  Checkpoint ckpt;
  const fs::path config_path = dir / "config.json";
  if (!fs::exists(config_path, ec))
    return not_found("[checkpoint] " + dir.string() + " has no config.json; is this a Hugging Face model folder?");
  MESHRL_ASSIGN_OR_RETURN(ckpt.config, load_hf_config(config_path));

  const bool has_single = fs::exists(dir / kSingleFile, ec);
  const bool has_index = fs::exists(dir / kIndexFile, ec);
  if (has_single && has_index)
    return data_loss("[checkpoint] " + dir.string() + " holds both " + kSingleFile + " and " + kIndexFile +
                     "; one is a leftover of an interrupted save, remove it");
  if (has_single) {
    MESHRL_ASSIGN_OR_RETURN(ckpt.tensors, read_safetensors(dir / kSingleFile));
  } else if (has_index) {
    MESHRL_ASSIGN_OR_RETURN(ckpt.tensors, load_sharded(dir));
  } else {
    return refuse_pickle_or_empty(dir);
  }

  for (auto it = ckpt.tensors.begin(); it != ckpt.tensors.end();) {
    it = is_dropped_buffer(it->first) ? ckpt.tensors.erase(it) : std::next(it);
  }
  auto st = check_weights_match_config(ckpt.config, ckpt.tensors);
  if (!st.is_ok()) return Status(st.code(), st.message() + " [folder " + dir.string() + "]");
  if (ckpt.config.tie_word_embeddings) ckpt.tensors.erase("lm_head.weight");
  return ckpt;
}

Status save_checkpoint(const fs::path& dir, const ModelConfig& config,
                       const std::vector<std::pair<std::string, torch::Tensor>>& tensors, int64_t max_shard_bytes) {
  if (max_shard_bytes < 0) return invalid_argument("[checkpoint] max_shard_bytes must be >= 0");
  std::map<std::string, torch::Tensor> by_name;
  for (const auto& [name, t] : tensors)
    if (!by_name.emplace(name, t).second) return invalid_argument("[checkpoint] duplicate tensor " + name);
  MESHRL_RETURN_IF_ERROR(check_weights_match_config(config, by_name));

  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return io_error("[checkpoint] cannot create " + dir.string() + ": " + ec.message());
  MESHRL_RETURN_IF_ERROR(write_file_atomic(dir / "config.json", to_hf_config_json(config)));

  // Pack in the given order; a shard closes when the next tensor would overflow it.
  std::vector<std::vector<std::pair<std::string, torch::Tensor>>> shards(1);
  int64_t shard_bytes = 0, total_bytes = 0;
  for (const auto& [name, t] : tensors) {
    int64_t n = t.numel() * static_cast<int64_t>(t.element_size());
    if (max_shard_bytes > 0 && !shards.back().empty() && shard_bytes + n > max_shard_bytes) {
      shards.emplace_back();
      shard_bytes = 0;
    }
    shards.back().emplace_back(name, t);
    shard_bytes += n;
    total_bytes += n;
  }
  const std::map<std::string, std::string> metadata = {{"format", "pt"}};

  std::set<std::string> written;
  if (shards.size() == 1) {
    MESHRL_RETURN_IF_ERROR(write_safetensors(dir / kSingleFile, tensors, metadata));
    written.insert(kSingleFile);
  } else {
    nlohmann::json weight_map = nlohmann::json::object();
    for (size_t i = 0; i < shards.size(); ++i) {
      const std::string name = shard_name(i, shards.size());
      MESHRL_RETURN_IF_ERROR(write_safetensors(dir / name, shards[i], metadata));
      written.insert(name);
      for (const auto& [tname, t] : shards[i]) weight_map[tname] = name;
    }
    nlohmann::json index = {{"metadata", {{"total_size", total_bytes}}}, {"weight_map", weight_map}};
    // The index goes last: until it exists, a reader sees the old layout (or a loud conflict).
    MESHRL_RETURN_IF_ERROR(write_file_atomic(dir / kIndexFile, index.dump(2) + "\n"));
    written.insert(kIndexFile);
  }
  // Remove the weight files of an earlier save in the other layout, so that loading is unambiguous.
  std::vector<fs::path> stale;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (!written.count(name) && (name == kSingleFile || name == kIndexFile || is_shard_name(name)))
      stale.push_back(e.path());
  }
  for (const auto& p : stale) {
    fs::remove(p, ec);
    if (ec) return io_error("[checkpoint] cannot remove stale " + p.string() + ": " + ec.message());
  }
  return Status::ok();
}

}  // namespace meshrl::model
