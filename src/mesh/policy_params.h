// The bridge between a policy (model + tokenizer) and the mesh: which tensors a node exchanges
// (the trainable parameters, as views, so nothing here hard-wires "all weights": a LoRA trainer
// would mark only its adapters trainable), loading a version's weights into a model, and the
// fingerprints a node's model and tokenizer must match at Join. Knows nothing about the network.
#pragma once

#include <string>

#include "core/status.h"
#include "mesh/named_tensors.h"
#include "model/transformer.h"
#include "tokenizer/tokenizer.h"

namespace meshrl::mesh {

// The model's trainable parameters (requires_grad), in registration order, as views sharing
// storage with the model: apply_delta on them updates the model.
NamedTensors trainable_parameters(model::TransformerImpl& model);

// Copies `src` into `dst` (views into a model) under no-grad. Fails before copying anything when
// the layouts differ (names, order, shapes), naming `what`.
Status copy_parameters(const NamedTensors& src, NamedTensors& dst, std::string_view what);

// 16 hex digits of xxh3 over the model's config.json text: equal configs, equal architectures.
std::string model_config_hash(const model::ModelConfig& config);

// 16 hex digits of xxh3 over n_vocab and every id's bytes and special flag: two tokenizers with
// the same fingerprint turn the same text into the same ids.
std::string tokenizer_hash(const tokenizer::Tokenizer& tok);

}  // namespace meshrl::mesh
