// Pre-tokenizer pieces for the GPT-2 and Qwen2 patterns and every Split behavior, checked by hand.
//   ./build/tests/test_tokenizer --gtest_filter='PreTokenizer*'
#include <gtest/gtest.h>

#include "tokenizer/pre_tokenizer.h"
#include "tokenizer_test_util.h"

namespace meshrl::tokenizer {
namespace {

using Strs = std::vector<std::string>;

PreTokenizerStep split_step(std::string_view pattern, bool literal, SplitBehavior b, bool invert = false) {
  PreTokenizerStep s;
  s.kind = PreTokenizerStep::Kind::kSplit;
  auto r = Regex::compile(pattern, literal, "<test>");
  EXPECT_TRUE(r.is_ok()) << r.status().message();
  s.regex = std::move(r).value();
  s.behavior = b;
  s.invert = invert;
  return s;
}

PreTokenizerStep byte_level_step(bool add_prefix_space, bool use_regex) {
  PreTokenizerStep s;
  s.kind = PreTokenizerStep::Kind::kByteLevel;
  s.add_prefix_space = add_prefix_space;
  if (use_regex) s.regex = Regex::compile(kGpt2Pattern, false, "<gpt2>").value();
  return s;
}

Strs pieces_of(const PreTokenizer& pre, std::string_view text) {
  Pieces p;
  auto st = pre.apply(text, &p);
  EXPECT_TRUE(st.is_ok()) << st.message();
  Strs out;
  for (size_t i = 0; i < p.spans.size(); ++i) out.emplace_back(p.piece(i));
  return out;
}

std::vector<PreTokenizerStep> one(PreTokenizerStep s) {
  std::vector<PreTokenizerStep> v;
  v.push_back(std::move(s));
  return v;
}

TEST(PreTokenizer, Gpt2Pattern) {
  PreTokenizer pre(one(byte_level_step(false, true)));
  EXPECT_EQ(pieces_of(pre, "Hello world's 123 foo!!  bar\n\n"),
            (Strs{"Hello", " world", "'s", " 123", " foo", "!!", " ", " bar", "\n\n"}));
  EXPECT_EQ(pieces_of(pre, "café 中文 😀"), (Strs{"café", " 中文", " 😀"}));
  EXPECT_EQ(pieces_of(pre, ""), Strs{});
}

TEST(PreTokenizer, AddPrefixSpaceThenRegex) {
  PreTokenizer pre(one(byte_level_step(true, true)));
  EXPECT_EQ(pieces_of(pre, "Hello world"), (Strs{" Hello", " world"}));
  EXPECT_EQ(pieces_of(pre, " Hello"), (Strs{" Hello"}));
}

TEST(PreTokenizer, Qwen2Pattern) {
  std::vector<PreTokenizerStep> steps;
  steps.push_back(split_step(testing::kQwen2Pattern, false, SplitBehavior::kIsolated));
  steps.push_back(byte_level_step(false, false));
  PreTokenizer pre(std::move(steps));
  EXPECT_EQ(pieces_of(pre, "Hello WORLD'S 2024 (x).\n\ny"),
            (Strs{"Hello", " WORLD", "'S", " ", "2", "0", "2", "4", " (", "x", ").\n\n", "y"}));
}

TEST(PreTokenizer, SplitBehaviors) {
  auto run = [](SplitBehavior b, bool invert = false) {
    return pieces_of(PreTokenizer(one(split_step("-", true, b, invert))), "a-b--c-");
  };
  EXPECT_EQ(run(SplitBehavior::kIsolated), (Strs{"a", "-", "b", "-", "-", "c", "-"}));
  EXPECT_EQ(run(SplitBehavior::kRemoved), (Strs{"a", "b", "c"}));
  EXPECT_EQ(run(SplitBehavior::kMergedWithPrevious), (Strs{"a-", "b-", "-", "c-"}));
  EXPECT_EQ(run(SplitBehavior::kMergedWithNext), (Strs{"a", "-b", "-", "-c", "-"}));
  EXPECT_EQ(run(SplitBehavior::kContiguous), (Strs{"a", "-", "b", "--", "c", "-"}));
  // invert: the pattern marks what to keep.
  EXPECT_EQ(run(SplitBehavior::kRemoved, true), (Strs{"-", "-", "-", "-"}));
}

TEST(PreTokenizer, HostileRegexHitsTheMatchLimit) {
  // Catastrophic backtracking: (a|aa)+ tried every way before the final '$' fails.
  PreTokenizer pre(one(split_step("(a|aa)+$", false, SplitBehavior::kIsolated)));
  Pieces p;
  auto st = pre.apply(std::string(60, 'a') + "!", &p);
  ASSERT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("limit"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("<test>"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace meshrl::tokenizer
