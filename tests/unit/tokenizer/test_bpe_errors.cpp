// Malformed tokenizer.json files: each is refused with an error naming the field, never a crash.
//   ./build/tests/test_tokenizer --gtest_filter='BpeLoadErrors*'
#include <gtest/gtest.h>

#include "tokenizer/tokenizer.h"
#include "tokenizer_test_util.h"

namespace meshrl::tokenizer {
namespace {

using testing::byte_level_pre;
using testing::hand_merges;
using testing::make_tokenizer_json;
using testing::qwen2_pre;
using json = nlohmann::json;

json good() { return make_tokenizer_json(hand_merges(), byte_level_pre(false, true)); }

// Loads `text` and expects an error whose message contains every one of `needles`.
void expect_error(const std::string& text, std::initializer_list<std::string> needles) {
  auto r = load_tokenizer_from_string(text, "bad/tokenizer.json");
  ASSERT_FALSE(r.is_ok()) << "accepted: " << text.substr(0, 200);
  const std::string& m = r.status().message();
  EXPECT_NE(m.find("bad/tokenizer.json"), std::string::npos) << m;
  for (const auto& n : needles) EXPECT_NE(m.find(n), std::string::npos) << "missing '" << n << "' in: " << m;
}

TEST(BpeLoadErrors, GoodFileLoads) {
  auto r = load_tokenizer_from_string(good().dump(), "good");
  ASSERT_TRUE(r.is_ok()) << r.status().message();
}

TEST(BpeLoadErrors, MalformedJson) {
  expect_error("{\"model\": ", {"not valid JSON"});
  expect_error("", {"not valid JSON"});
  expect_error("[1, 2]", {"JSON object"});
}

TEST(BpeLoadErrors, MissingOrWrongModelFields) {
  auto j = good();
  j.erase("model");
  expect_error(j.dump(), {"model", "missing"});
  j = good();
  j["model"].erase("vocab");
  expect_error(j.dump(), {"model.vocab", "missing"});
  j = good();
  j["model"].erase("merges");
  expect_error(j.dump(), {"model.merges", "missing"});
  j = good();
  j["model"]["vocab"] = json::array();
  expect_error(j.dump(), {"model.vocab", "object"});
  j = good();
  j["model"]["vocab"]["x"] = "seven";
  expect_error(j.dump(), {"model.vocab", "integer"});
  j = good();
  j["model"]["type"] = "Unigram";
  expect_error(j.dump(), {"model.type", "Unigram"});
  j = good();
  j["model"]["dropout"] = 0.1;
  expect_error(j.dump(), {"model.dropout"});
  j = good();
  j["model"]["continuing_subword_prefix"] = "##";
  expect_error(j.dump(), {"model.continuing_subword_prefix"});
}

TEST(BpeLoadErrors, BadMerges) {
  auto j = good();
  j["model"]["merges"][2] = "h";  // no space
  expect_error(j.dump(), {"model.merges[2]", "one space"});
  j = good();
  j["model"]["merges"][3] = "q Z";  // parts exist, "qZ" does not
  expect_error(j.dump(), {"model.merges[3]", "'qZ'", "not in model.vocab"});
  j = good();
  j["model"]["merges"][1] = "hx ll";
  expect_error(j.dump(), {"model.merges[1]", "'hx'", "not in model.vocab"});
  j = good();
  j["model"]["merges"][0] = json::array({"h", 5});
  expect_error(j.dump(), {"model.merges[0]"});
  j = make_tokenizer_json(hand_merges(), qwen2_pre(), {}, true);
  j["model"]["merges"][4] = json::array({"Ġ", "nope"});
  expect_error(j.dump(), {"model.merges[4]", "'nope'"});
}

TEST(BpeLoadErrors, BadIds) {
  auto j = good();
  j["model"]["vocab"]["zz"] = 97;  // 'a' already has 97
  expect_error(j.dump(), {"id 97", "given to both"});
  j = good();
  j["model"]["vocab"]["zz"] = -3;
  expect_error(j.dump(), {"model.vocab", "-3"});
  j = good();
  j["model"]["vocab"]["zz"] = 2000000000;  // would size the id tables
  expect_error(j.dump(), {"2000000000"});
  j = good();
  j["added_tokens"][0]["id"] = 97;  // <|endoftext|> onto 'a'
  expect_error(j.dump(), {"added_tokens[0]", "id 97"});
  j = good();
  j["added_tokens"][1]["id"] = j["added_tokens"][0]["id"];
  expect_error(j.dump(), {"added_tokens[1]", "already used"});
  j = good();
  j["added_tokens"][0]["content"] = "";
  expect_error(j.dump(), {"added_tokens[0].content", "empty"});
  j = good();
  j["added_tokens"][0].erase("id");
  expect_error(j.dump(), {"added_tokens[0].id"});
  j = good();
  j["added_tokens"][0]["special"] = "yes";
  expect_error(j.dump(), {"added_tokens[0].special"});
}

TEST(BpeLoadErrors, UnsupportedPipelineParts) {
  auto j = good();
  j["pre_tokenizer"] = {{"type", "Whitespace"}};
  expect_error(j.dump(), {"pre_tokenizer.type", "Whitespace"});
  j = good();
  j["pre_tokenizer"] = qwen2_pre();
  j["pre_tokenizer"]["pretokenizers"][1] = {{"type", "Digits"}, {"individual_digits", true}};
  expect_error(j.dump(), {"pre_tokenizer.pretokenizers[1].type", "Digits"});
  j = good();
  j["pre_tokenizer"] = nullptr;
  expect_error(j.dump(), {"pre_tokenizer", "byte-level"});
  j = good();
  j["pre_tokenizer"] = {{"type", "Sequence"}, {"pretokenizers", json::array()}};
  expect_error(j.dump(), {"pre_tokenizer", "no ByteLevel"});
  j = good();
  j["pre_tokenizer"] = qwen2_pre("(unclosed");
  expect_error(j.dump(), {"pre_tokenizer.pretokenizers[0].pattern.Regex", "does not compile"});
  j = good();
  j["pre_tokenizer"] = qwen2_pre("x", "Sideways");
  expect_error(j.dump(), {"pre_tokenizer.pretokenizers[0].behavior", "Sideways"});
  j = good();
  j["normalizer"] = {{"type", "Lowercase"}};
  expect_error(j.dump(), {"normalizer.type", "Lowercase"});
  j = good();
  j["decoder"] = {{"type", "WordPiece"}};
  expect_error(j.dump(), {"decoder.type", "WordPiece"});
  // Deeply nested Sequences are refused before they can recurse far.
  json pre = byte_level_pre(false, true);
  for (int i = 0; i < 20; ++i) pre = {{"type", "Sequence"}, {"pretokenizers", json::array({pre})}};
  j = good();
  j["pre_tokenizer"] = pre;
  expect_error(j.dump(), {"deeper"});
}

TEST(BpeLoadErrors, AcceptedVariants) {
  // What real files carry and we accept: NFC normalizer, any post_processor, null decoder,
  // GPT-2's <|endoftext|> both in the vocab and in added_tokens with one id.
  auto j = make_tokenizer_json(hand_merges(), qwen2_pre(), {}, true);
  j["normalizer"] = {{"type", "NFC"}};
  j["post_processor"] = {{"type", "TemplateProcessing"}, {"single", json::array()}};
  j["decoder"] = nullptr;
  j["model"]["vocab"]["<|endoftext|>"] = 272;
  j["added_tokens"] = json::array({{{"id", 272}, {"content", "<|endoftext|>"}, {"special", true}}});
  auto r = load_tokenizer_from_string(j.dump(), "variants");
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(r.value()->encode("a<|endoftext|>").value(), (std::vector<int32_t>{'a', 272}));
  EXPECT_EQ(r.value()->eos_id(), 272);
}

TEST(BpeLoadErrors, HostileRegexFailsAtEncodeNotHang) {
  auto j = good();
  j["pre_tokenizer"] = qwen2_pre("(a|aa)+$");
  auto r = load_tokenizer_from_string(j.dump(), "hostile");
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  auto e = r.value()->encode(std::string(64, 'a') + "!");
  ASSERT_FALSE(e.is_ok());
  EXPECT_NE(e.status().message().find("limit"), std::string::npos) << e.status().message();
  EXPECT_NE(e.status().message().find("pre_tokenizer.pretokenizers[0].pattern.Regex"), std::string::npos)
      << e.status().message();
}

TEST(BpeLoadErrors, MissingFileNamesThePath) {
  auto r = load_tokenizer("/nonexistent/dir/tokenizer.json");
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("/nonexistent/dir/tokenizer.json"), std::string::npos);
}

}  // namespace
}  // namespace meshrl::tokenizer
