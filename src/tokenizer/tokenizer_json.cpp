// Reads a Hugging Face tokenizer.json into a BpeSpec and builds the BpeTokenizer.
// What is accepted (anything else is refused with an error naming the field):
//   model: BPE with vocab and merges ("a b" strings or ["a", "b"] pairs); dropout null/0, no
//          subword prefix/suffix; ignore_merges honoured; unk_token, fuse_unk, byte_fallback ignored
//          (byte-level BPE never needs them).
//   normalizer: null, or NFC taken as the identity. Shortcut: text is assumed to be NFC already
//          (true of nearly all input); decomposed accents would encode differently from Hugging Face.
//   pre_tokenizer: ByteLevel, Split (Regex or String pattern), or a Sequence of them; it must
//          contain a ByteLevel step, since only byte-level BPE is implemented.
//   decoder: null or ByteLevel.  post_processor: ignored (meshrl never adds BOS on its own).
#include <nlohmann/json.hpp>

#include "core/file_io.h"
#include "tokenizer/bpe_tokenizer.h"
#include "tokenizer/tokenizer.h"

namespace meshrl::tokenizer {
namespace {

using json = nlohmann::json;

// Nesting depth allowed for pre_tokenizer Sequences (real files use 1).
constexpr int kMaxSequenceDepth = 8;

struct Ctx {
  std::string source;  // the file, or "<memory>"
  std::string where;   // "[tokenizer] <source>: "
  Status error(const std::string& field, const std::string& what) const {
    return invalid_argument(where + field + " " + what);
  }
  Status unsupported(const std::string& field, const std::string& what) const {
    return unimplemented(where + field + " " + what);
  }
};

std::string type_name(const json& j) { return j.type_name(); }

// Optional boolean field: absent or null gives `fallback`.
Result<bool> get_bool(const Ctx& ctx, const json& obj, const std::string& field, const char* key, bool fallback) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return fallback;
  if (!it->is_boolean()) return ctx.error(field + "." + key, "must be true or false, got " + type_name(*it));
  return it->get<bool>();
}

Result<std::string> get_type(const Ctx& ctx, const json& obj, const std::string& field) {
  if (!obj.is_object()) return ctx.error(field, "must be an object or null, got " + type_name(obj));
  auto it = obj.find("type");
  if (it == obj.end()) return ctx.error(field, "has no \"type\"");
  if (!it->is_string()) return ctx.error(field + ".type", "must be a string, got " + type_name(*it));
  return it->get<std::string>();
}

Status parse_pre_tokenizer(const Ctx& ctx, const json& j, const std::string& field, int depth,
                           std::vector<PreTokenizerStep>* steps) {
  MESHRL_ASSIGN_OR_RETURN(std::string type, get_type(ctx, j, field));
  if (type == "Sequence") {
    if (depth >= kMaxSequenceDepth) return ctx.error(field, "nests Sequences deeper than " + std::to_string(kMaxSequenceDepth));
    auto it = j.find("pretokenizers");
    if (it == j.end() || !it->is_array()) return ctx.error(field + ".pretokenizers", "must be an array");
    for (size_t i = 0; i < it->size(); ++i)
      MESHRL_RETURN_IF_ERROR(
          parse_pre_tokenizer(ctx, (*it)[i], field + ".pretokenizers[" + std::to_string(i) + "]", depth + 1, steps));
    return Status::ok();
  }
  PreTokenizerStep step;
  if (type == "ByteLevel") {
    step.kind = PreTokenizerStep::Kind::kByteLevel;
    MESHRL_ASSIGN_OR_RETURN(step.add_prefix_space, get_bool(ctx, j, field, "add_prefix_space", true));
    MESHRL_ASSIGN_OR_RETURN(bool use_regex, get_bool(ctx, j, field, "use_regex", true));
    if (use_regex) {
      MESHRL_ASSIGN_OR_RETURN(step.regex, Regex::compile(kGpt2Pattern, false, ctx.source + ": " + field));
    }
  } else if (type == "Split") {
    step.kind = PreTokenizerStep::Kind::kSplit;
    auto pat = j.find("pattern");
    if (pat == j.end() || !pat->is_object()) return ctx.error(field + ".pattern", "must be {\"Regex\": ...} or {\"String\": ...}");
    bool literal;
    std::string pattern, pfield;
    if (auto r = pat->find("Regex"); r != pat->end() && r->is_string()) {
      literal = false, pattern = r->get<std::string>(), pfield = field + ".pattern.Regex";
    } else if (auto s = pat->find("String"); s != pat->end() && s->is_string()) {
      literal = true, pattern = s->get<std::string>(), pfield = field + ".pattern.String";
    } else {
      return ctx.error(field + ".pattern", "must be {\"Regex\": \"...\"} or {\"String\": \"...\"}");
    }
    if (pattern.empty()) return ctx.error(pfield, "is empty");
    MESHRL_ASSIGN_OR_RETURN(step.regex, Regex::compile(pattern, literal, ctx.source + ": " + pfield));
    auto beh = j.find("behavior");
    if (beh == j.end() || !beh->is_string()) return ctx.error(field + ".behavior", "must be a string");
    const std::string b = beh->get<std::string>();
    if (b == "Isolated") step.behavior = SplitBehavior::kIsolated;
    else if (b == "Removed") step.behavior = SplitBehavior::kRemoved;
    else if (b == "MergedWithPrevious") step.behavior = SplitBehavior::kMergedWithPrevious;
    else if (b == "MergedWithNext") step.behavior = SplitBehavior::kMergedWithNext;
    else if (b == "Contiguous") step.behavior = SplitBehavior::kContiguous;
    else return ctx.error(field + ".behavior", "'" + b + "' is not a known split behavior");
    MESHRL_ASSIGN_OR_RETURN(step.invert, get_bool(ctx, j, field, "invert", false));
  } else {
    return ctx.unsupported(field + ".type", "'" + type + "' is not supported (ByteLevel, Split, Sequence are)");
  }
  steps->push_back(std::move(step));
  return Status::ok();
}

Status parse_model(const Ctx& ctx, const json& root, BpeSpec* spec) {
  auto mit = root.find("model");
  if (mit == root.end() || mit->is_null()) return ctx.error("model", "is missing");
  const json& m = *mit;
  if (!m.is_object()) return ctx.error("model", "must be an object, got " + type_name(m));
  if (auto t = m.find("type"); t != m.end()) {
    if (!t->is_string()) return ctx.error("model.type", "must be a string");
    if (t->get<std::string>() != "BPE")
      return ctx.unsupported("model.type", "'" + t->get<std::string>() + "' is not supported (only BPE)");
  }
  if (auto d = m.find("dropout"); d != m.end() && !d->is_null()) {
    if (!d->is_number()) return ctx.error("model.dropout", "must be a number or null");
    if (d->get<double>() != 0.0) return ctx.unsupported("model.dropout", "is not supported (must be null or 0)");
  }
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    auto it = m.find(key);
    if (it == m.end() || it->is_null()) continue;
    if (!it->is_string()) return ctx.error(std::string("model.") + key, "must be a string or null");
    if (!it->get<std::string>().empty())
      return ctx.unsupported(std::string("model.") + key, "is not supported with byte-level BPE (must be empty)");
  }
  MESHRL_ASSIGN_OR_RETURN(spec->ignore_merges, get_bool(ctx, m, "model", "ignore_merges", false));

  auto vit = m.find("vocab");
  if (vit == m.end() || vit->is_null()) return ctx.error("model.vocab", "is missing");
  if (!vit->is_object()) return ctx.error("model.vocab", "must be an object {token: id}, got " + type_name(*vit));
  spec->vocab.reserve(vit->size());
  for (auto it = vit->begin(); it != vit->end(); ++it) {
    if (!it.value().is_number_integer())
      return ctx.error("model.vocab[\"" + it.key().substr(0, 64) + "\"]", "must be an integer id, got " + type_name(it.value()));
    const int64_t id = it.value().get<int64_t>();
    if (id < 0 || id > INT32_MAX)
      return ctx.error("model.vocab[\"" + it.key().substr(0, 64) + "\"]", "has id " + std::to_string(id) + ", out of range");
    spec->vocab.emplace_back(it.key(), static_cast<int32_t>(id));
  }

  auto rit = m.find("merges");
  if (rit == m.end() || rit->is_null()) return ctx.error("model.merges", "is missing");
  if (!rit->is_array()) return ctx.error("model.merges", "must be an array, got " + type_name(*rit));
  spec->merges.reserve(rit->size());
  for (size_t i = 0; i < rit->size(); ++i) {
    const json& e = (*rit)[i];
    const std::string field = "model.merges[" + std::to_string(i) + "]";
    if (e.is_string()) {
      const std::string& s = e.get_ref<const std::string&>();
      const size_t sp = s.find(' ');
      if (sp == std::string::npos || sp == 0 || sp + 1 == s.size() || s.find(' ', sp + 1) != std::string::npos)
        return ctx.error(field, "'" + s.substr(0, 64) + "' must be two tokens separated by one space");
      spec->merges.emplace_back(s.substr(0, sp), s.substr(sp + 1));
    } else if (e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string()) {
      spec->merges.emplace_back(e[0].get<std::string>(), e[1].get<std::string>());
    } else {
      return ctx.error(field, "must be \"a b\" or [\"a\", \"b\"], got " + type_name(e));
    }
  }
  return Status::ok();
}

Status parse_added_tokens(const Ctx& ctx, const json& root, BpeSpec* spec) {
  auto ait = root.find("added_tokens");
  if (ait == root.end() || ait->is_null()) return Status::ok();
  if (!ait->is_array()) return ctx.error("added_tokens", "must be an array, got " + type_name(*ait));
  for (size_t i = 0; i < ait->size(); ++i) {
    const json& e = (*ait)[i];
    const std::string field = "added_tokens[" + std::to_string(i) + "]";
    if (!e.is_object()) return ctx.error(field, "must be an object, got " + type_name(e));
    AddedToken t;
    auto id = e.find("id");
    if (id == e.end() || !id->is_number_integer()) return ctx.error(field + ".id", "must be an integer");
    const int64_t v = id->get<int64_t>();
    if (v < 0 || v > INT32_MAX) return ctx.error(field + ".id", std::to_string(v) + " is out of range");
    t.id = static_cast<int32_t>(v);
    auto content = e.find("content");
    if (content == e.end() || !content->is_string()) return ctx.error(field + ".content", "must be a string");
    t.content = content->get<std::string>();
    MESHRL_ASSIGN_OR_RETURN(t.special, get_bool(ctx, e, field, "special", false));
    MESHRL_ASSIGN_OR_RETURN(t.lstrip, get_bool(ctx, e, field, "lstrip", false));
    MESHRL_ASSIGN_OR_RETURN(t.rstrip, get_bool(ctx, e, field, "rstrip", false));
    MESHRL_ASSIGN_OR_RETURN(t.single_word, get_bool(ctx, e, field, "single_word", false));
    spec->added_tokens.push_back(std::move(t));
  }
  return Status::ok();
}

Status check_normalizer_and_decoder(const Ctx& ctx, const json& root) {
  if (auto n = root.find("normalizer"); n != root.end() && !n->is_null()) {
    MESHRL_ASSIGN_OR_RETURN(std::string type, get_type(ctx, *n, "normalizer"));
    if (type != "NFC")
      return ctx.unsupported("normalizer.type", "'" + type + "' is not supported (only null or NFC)");
  }
  if (auto d = root.find("decoder"); d != root.end() && !d->is_null()) {
    MESHRL_ASSIGN_OR_RETURN(std::string type, get_type(ctx, *d, "decoder"));
    if (type != "ByteLevel")
      return ctx.unsupported("decoder.type", "'" + type + "' is not supported (only null or ByteLevel)");
  }
  return Status::ok();
}

Result<std::unique_ptr<Tokenizer>> parse(const Ctx& ctx, const json& root, const std::string& source) {
  if (!root.is_object()) return ctx.error("(top level)", "must be a JSON object, got " + type_name(root));
  BpeSpec spec;
  MESHRL_RETURN_IF_ERROR(check_normalizer_and_decoder(ctx, root));
  MESHRL_RETURN_IF_ERROR(parse_model(ctx, root, &spec));
  MESHRL_RETURN_IF_ERROR(parse_added_tokens(ctx, root, &spec));
  auto pit = root.find("pre_tokenizer");
  if (pit == root.end() || pit->is_null())
    return ctx.unsupported("pre_tokenizer", "is null; only byte-level BPE (a ByteLevel pre-tokenizer) is supported");
  MESHRL_RETURN_IF_ERROR(parse_pre_tokenizer(ctx, *pit, "pre_tokenizer", 0, &spec.pre_tokenizer));
  bool byte_level = false;
  for (const auto& s : spec.pre_tokenizer) byte_level |= s.kind == PreTokenizerStep::Kind::kByteLevel;
  if (!byte_level)
    return ctx.unsupported("pre_tokenizer", "has no ByteLevel step; only byte-level BPE is supported");
  MESHRL_ASSIGN_OR_RETURN(auto tok, BpeTokenizer::create(std::move(spec), source));
  return std::unique_ptr<Tokenizer>(std::move(tok));
}

}  // namespace

Result<std::unique_ptr<Tokenizer>> load_tokenizer_from_string(std::string_view text, std::string source) {
  Ctx ctx{source, "[tokenizer] " + source + ": "};
  json root;
  try {
    root = json::parse(text.begin(), text.end());
  } catch (const json::exception& e) {
    return invalid_argument(ctx.where + "not valid JSON: " + e.what());
  }
  try {
    return parse(ctx, root, source);
  } catch (const json::exception& e) {
    // Every field is type-checked before use, so this is a safety net, not a code path.
    return invalid_argument(ctx.where + "unexpected JSON content: " + e.what());
  }
}

Result<std::unique_ptr<Tokenizer>> load_tokenizer(const std::filesystem::path& path) {
  MESHRL_ASSIGN_OR_RETURN(std::string text, read_file(path, kMaxTokenizerJsonBytes));
  return load_tokenizer_from_string(text, path.string());
}

}  // namespace meshrl::tokenizer
