// The frozen base of a [lora] run on a node. Only adapters cross the wire each round, so every
// node must hold the exact base the coordinator trains on (the manifest's base_weights_hash). A
// node whose model does not (it built the architecture from a preset, or was given another
// folder) downloads the base once, checks its hash, and keeps it in its cache for later runs and
// restarts. Knows nothing of gRPC: the download is a callback.
#pragma once

#include <filesystem>
#include <functional>
#include <string>

#include "core/status.h"
#include "model/transformer.h"

namespace meshrl::mesh {

enum class BaseSource { kHeld, kCache, kDownloaded };
const char* base_source_name(BaseSource s);  // "held", "cache", "downloaded"

// Makes the model's trainable parameters (the base, before LoRA is set up) hash to want_hash:
// unchanged when they already do; else from cache_dir/base-<want_hash>.mrlu when that file holds
// exactly that base; else from download() (an encoded weight set, as DownloadWeights sends),
// written to the cache atomically once its hash checks. Fails, naming the hashes, when the
// download does not hash to want_hash or does not fit the model's layout. A cache file that
// does not check (truncated, tampered) is reported through log and replaced.
Result<BaseSource> ensure_base_weights(model::TransformerImpl& model, const std::string& want_hash, const std::filesystem::path& cache_dir,
                                       const std::function<Result<std::string>()>& download,
                                       const std::function<void(const std::string&)>& log);

}  // namespace meshrl::mesh
