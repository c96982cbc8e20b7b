// Atomic HF folder writes. See policy_folder.h.
#include "rl/policy_folder.h"

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "core/file_io.h"
#include "model/model_io.h"
#include "rollout/policy.h"
#include "tokenizer/char_tokenizer.h"

namespace meshrl::rl {

namespace fs = std::filesystem;

Status save_policy_folder(const fs::path& dir, const model::Transformer& model, const tokenizer::Tokenizer& tok,
                          const std::string& tokenizer_source, const std::map<std::string, std::string>& extra_files) {
  const fs::path parent = dir.has_parent_path() ? dir.parent_path() : fs::path(".");
  std::error_code ec;
  fs::create_directories(parent, ec);
  if (ec) return io_error("[checkpoint] cannot create " + parent.string() + ": " + ec.message());
  const fs::path tmp = parent / ("." + dir.filename().string() + ".tmp-" + std::to_string(::getpid()));
  fs::remove_all(tmp, ec);
  MESHRL_RETURN_IF_ERROR(model::save_transformer(tmp, model));

  if (dynamic_cast<const tokenizer::CharTokenizer*>(&tok)) {
    const nlohmann::json marker = {{"type", "char"}, {"n_vocab", tok.n_vocab()}};
    MESHRL_RETURN_IF_ERROR(write_file_atomic(tmp / rollout::kCharTokenizerMarker, marker.dump() + "\n"));
  } else {
    const fs::path src(tokenizer_source);
    if (!fs::is_directory(src) || !fs::exists(src / "tokenizer.json"))
      return invalid_argument("[checkpoint] the policy's tokenizer.json cannot be found in '" + tokenizer_source +
                              "' to copy beside the weights");
    for (const char* name : {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "generation_config.json"}) {
      if (!fs::exists(src / name)) continue;
      fs::copy_file(src / name, tmp / name, fs::copy_options::overwrite_existing, ec);
      if (ec) return io_error("[checkpoint] cannot copy " + (src / name).string() + ": " + ec.message());
    }
  }

  for (const auto& [name, text] : extra_files) {
    if (name.empty() || name.find('/') != std::string::npos || name == "." || name == "..")
      return invalid_argument("[checkpoint] extra file name '" + name + "' must be a plain file name");
    MESHRL_RETURN_IF_ERROR(write_file_atomic(tmp / name, text));
  }

  // Replace an existing folder: move it aside first (rename cannot overwrite a non-empty folder).
  if (fs::exists(dir)) {
    const fs::path old = parent / ("." + dir.filename().string() + ".old-" + std::to_string(::getpid()));
    fs::remove_all(old, ec);
    fs::rename(dir, old, ec);
    if (ec) return io_error("[checkpoint] cannot move the old " + dir.string() + " aside: " + ec.message());
    fs::rename(tmp, dir, ec);
    if (ec) return io_error("[checkpoint] cannot rename " + tmp.string() + " to " + dir.string() + ": " + ec.message());
    fs::remove_all(old, ec);
    return Status::ok();
  }
  fs::rename(tmp, dir, ec);
  if (ec) return io_error("[checkpoint] cannot rename " + tmp.string() + " to " + dir.string() + ": " + ec.message());
  return Status::ok();
}

}  // namespace meshrl::rl
