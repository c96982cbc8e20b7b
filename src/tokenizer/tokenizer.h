// Tokenizer: text <-> token ids for the model, behind one interface with two implementations:
// byte-level BPE read from a Hugging Face tokenizer.json (bpe_tokenizer.h) and the built-in
// character (byte) tokenizer of the tiny/small presets (char_tokenizer.h).
// Knows nothing about tensors, models, tasks or the network.
//
// Contract shared by every implementation:
//   - encode() takes UTF-8 text; invalid UTF-8 is an error naming the byte offset. Special and
//     other added tokens written in the text ("<|im_end|>") are cut out first and map to their ids.
//     No BOS is ever added.
//   - decode() concatenates the raw bytes of each id; ids cut in the middle of a character give
//     bytes that are not valid UTF-8 on their own (streaming callers join bytes across steps).
//     An id outside [0, n_vocab) or with no token is an error naming the id.
//   - All methods are const and safe to call from several threads at once.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace meshrl::tokenizer {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  virtual Result<std::vector<int32_t>> encode(std::string_view text) const = 0;

  // Default: the concatenation of token_bytes(id) for each id.
  virtual Result<std::string> decode(const std::vector<int32_t>& ids) const;

  // The raw bytes of one token (added tokens: their content). The view lives as long as the
  // tokenizer. Used for stop strings while streaming.
  virtual Result<std::string_view> token_bytes(int32_t id) const = 0;

  // One past the largest id; the model's embedding needs at least this many rows.
  virtual int32_t n_vocab() const = 0;

  // Id of an added token by its content ("<|im_end|>"), else of a vocab entry as tokenizer.json
  // spells it (byte-level form: "Ġhello" for " hello").
  virtual std::optional<int32_t> token_to_id(std::string_view token) const = 0;

  // True for added tokens marked special (chat markers, end of text).
  virtual bool is_special(int32_t id) const = 0;

  // Best guesses from the special tokens present; the model config may override them.
  // eos prefers end-of-turn markers (<|im_end|>, <|eot_id|>) since meshrl prompts are chat
  // formatted, then end-of-text ones (<|endoftext|>, <|end_of_text|>, </s>, <|eos|>).
  std::optional<int32_t> eos_id() const { return eos_id_; }
  std::optional<int32_t> bos_id() const { return bos_id_; }

 protected:
  // Implementations call this once their tables are built.
  void guess_special_ids();

 private:
  std::optional<int32_t> eos_id_;
  std::optional<int32_t> bos_id_;
};

// Reads a Hugging Face tokenizer.json (byte-level BPE: GPT-2, Qwen2, Llama-3 style). Errors name
// the file and the field (model.merges[12], pre_tokenizer.pretokenizers[0].pattern, ...).
Result<std::unique_ptr<Tokenizer>> load_tokenizer(const std::filesystem::path& tokenizer_json);

// Same from the JSON text; `source` names it in errors (a path, or "<memory>").
Result<std::unique_ptr<Tokenizer>> load_tokenizer_from_string(std::string_view json, std::string source);

// Largest tokenizer.json load_tokenizer reads (real ones are under 20 MiB).
inline constexpr uint64_t kMaxTokenizerJsonBytes = uint64_t{256} << 20;
// Largest input encode() accepts (64 MiB): bounds the BPE scratch memory a hostile prompt can claim.
inline constexpr size_t kMaxEncodeBytes = size_t{64} << 20;

}  // namespace meshrl::tokenizer
