// Builders for small tokenizer.json texts used by the tokenizer unit tests.
// Vocab: the 256 byte symbols with id = byte value, then one id per merge (256, 257, ...), then
// the added tokens. Merges are given in raw bytes and written in the byte-level spelling.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <utility>
#include <vector>

#include "tokenizer/byte_level.h"
#include "tokenizer/pre_tokenizer.h"

namespace meshrl::tokenizer::testing {

using json = nlohmann::json;

inline constexpr const char* kQwen2Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

inline json byte_level_pre(bool add_prefix_space, bool use_regex) {
  return {{"type", "ByteLevel"}, {"add_prefix_space", add_prefix_space}, {"trim_offsets", true}, {"use_regex", use_regex}};
}

inline json qwen2_pre(const std::string& pattern = kQwen2Pattern, const std::string& behavior = "Isolated") {
  return {{"type", "Sequence"},
          {"pretokenizers",
           json::array({{{"type", "Split"}, {"pattern", {{"Regex", pattern}}}, {"behavior", behavior}, {"invert", false}},
                        byte_level_pre(false, false)})}};
}

// pair_merges: write merges as ["a", "b"] (Qwen2/Llama-3 files) instead of "a b" (GPT-2 files).
inline json make_tokenizer_json(const std::vector<std::pair<std::string, std::string>>& merges, json pre_tokenizer,
                                const std::vector<std::string>& specials = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"},
                                bool pair_merges = false) {
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[bytes_to_byte_level(std::string(1, static_cast<char>(b)))] = b;
  json jm = json::array();
  int next = 256;
  for (const auto& [a, b] : merges) {
    std::string sa = bytes_to_byte_level(a), sb = bytes_to_byte_level(b);
    if (!vocab.contains(sa + sb)) vocab[sa + sb] = next++;
    if (pair_merges) jm.push_back(json::array({sa, sb}));
    else jm.push_back(sa + " " + sb);
  }
  json added = json::array();
  for (const auto& s : specials)
    added.push_back({{"id", next++}, {"content", s}, {"single_word", false}, {"lstrip", false}, {"rstrip", false},
                     {"normalized", false}, {"special", true}});
  return {{"version", "1.0"},
          {"truncation", nullptr},
          {"padding", nullptr},
          {"added_tokens", added},
          {"normalizer", nullptr},
          {"pre_tokenizer", std::move(pre_tokenizer)},
          {"post_processor", {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", false}, {"use_regex", true}}},
          {"decoder", {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true}, {"use_regex", true}}},
          {"model",
           {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr}, {"continuing_subword_prefix", ""},
            {"end_of_word_suffix", ""}, {"fuse_unk", false}, {"byte_fallback", false}, {"vocab", vocab}, {"merges", jm}}}};
}

// A small merge list with hand-checkable results (ids in comments).
inline std::vector<std::pair<std::string, std::string>> hand_merges() {
  return {
      {"h", "e"},      // 256 "he"
      {"l", "l"},      // 257 "ll"
      {"he", "ll"},    // 258 "hell"
      {"hell", "o"},   // 259 "hello"
      {" ", "w"},      // 260 " w"
      {" w", "o"},     // 261 " wo"
      {"o", "r"},      // 262 "or"  (ranked after " wo": " wor" becomes " wo" + "r")
      {"a", "a"},      // 263 "aa"
      {"2", "0"},      // 264 "20"
      {"20", "2"},     // 265 "202"
      {"\xC3", "\xA9"},  // 266 "é" (two bytes)
      {"c", "a"},      // 267 "ca"
      {"ca", "f"},     // 268 "caf"
      {"caf", "\xC3\xA9"},  // 269 "café"
      {"'", "S"},      // 270 "'S"
      {".", "\n"},     // 271 ".\n"
  };  // added tokens follow: 272 <|endoftext|>, 273 <|im_start|>, 274 <|im_end|>
}

}  // namespace meshrl::tokenizer::testing
