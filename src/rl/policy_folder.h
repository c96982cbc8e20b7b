// Writing a policy (model + tokenizer) as a Hugging Face folder that rollout::load_policy reads
// back: config.json + model.safetensors, and tokenizer.json copied from where the model came from,
// or, for the built-in character tokenizer, the meshrl_tokenizer.json marker (see rollout/policy.h).
// Owns the atomic folder swap; knows nothing about training.
#pragma once

#include <filesystem>
#include <map>
#include <string>

#include "core/status.h"
#include "model/transformer.h"
#include "tokenizer/tokenizer.h"

namespace meshrl::rl {

// Writes everything into a sibling temp folder (".<name>.tmp-<pid>"), then renames it to `dir`,
// so a reader never sees a half-written folder; an existing `dir` is replaced. `tokenizer_source`
// is the folder the policy was loaded from (its tokenizer.json and tokenizer_config.json are
// copied) or a preset name; the character tokenizer always gets the marker instead. extra_files
// (file name -> contents, plain names only) are written into the folder before the rename.
Status save_policy_folder(const std::filesystem::path& dir, const model::Transformer& model,
                          const tokenizer::Tokenizer& tok, const std::string& tokenizer_source,
                          const std::map<std::string, std::string>& extra_files = {});

}  // namespace meshrl::rl
