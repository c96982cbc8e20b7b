// Byte-level BPE on small hand-made tokenizer.json files: encodings checked by hand, round trips,
// added tokens, the GPT-2 and Qwen2 pre-tokenizers. Merge ids are listed in tokenizer_test_util.h.
//   cmake --build build --target test_tokenizer && ./build/tests/test_tokenizer --gtest_filter='Bpe*'
#include <gtest/gtest.h>

#include <random>
#include <thread>

#include "tokenizer/bpe_tokenizer.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer_test_util.h"

namespace meshrl::tokenizer {
namespace {

using testing::byte_level_pre;
using testing::hand_merges;
using testing::make_tokenizer_json;
using testing::qwen2_pre;
using Ids = std::vector<int32_t>;
using json = nlohmann::json;

constexpr int32_t kEndOfText = 272, kImStart = 273, kImEnd = 274;

std::unique_ptr<Tokenizer> load(const json& j) {
  auto r = load_tokenizer_from_string(j.dump(), "<test>");
  EXPECT_TRUE(r.is_ok()) << r.status().message();
  return r.is_ok() ? std::move(r).value() : nullptr;
}

std::unique_ptr<Tokenizer> gpt2_style() { return load(make_tokenizer_json(hand_merges(), byte_level_pre(false, true))); }
std::unique_ptr<Tokenizer> qwen2_style() {
  return load(make_tokenizer_json(hand_merges(), qwen2_pre(), {"<|endoftext|>", "<|im_start|>", "<|im_end|>"}, true));
}

Ids enc(const Tokenizer& t, std::string_view s) {
  auto r = t.encode(s);
  EXPECT_TRUE(r.is_ok()) << r.status().message();
  return r.is_ok() ? r.value() : Ids{};
}

Ids bytes_of(std::string_view s) { return Ids(s.begin(), s.end()); }

TEST(BpeHand, MergesApplyByRank) {
  auto t = gpt2_style();
  ASSERT_TRUE(t);
  EXPECT_EQ(t->n_vocab(), 275);
  // "hello": he, ll, hell, hello. " world": " w" (rank 4) and " wo" (rank 5) win over "or" (rank 6).
  EXPECT_EQ(enc(*t, "hello world"), (Ids{259, 261, 'r', 'l', 'd'}));
  EXPECT_EQ(enc(*t, "for"), (Ids{'f', 262}));
  // Ties go to the leftmost pair.
  EXPECT_EQ(enc(*t, "aaa"), (Ids{263, 'a'}));
  EXPECT_EQ(enc(*t, "aaaa"), (Ids{263, 263}));
  EXPECT_EQ(enc(*t, "aaaaa"), (Ids{263, 263, 'a'}));
  // A two-byte character merges like any pair of bytes.
  EXPECT_EQ(enc(*t, "café"), (Ids{269}));
  EXPECT_EQ(enc(*t, "é"), (Ids{266}));
  EXPECT_EQ(enc(*t, "ca"), (Ids{267}));
  // Merges never cross a pre-token boundary.
  EXPECT_EQ(enc(*t, "he llo"), (Ids{256, ' ', 257, 'o'}));
  EXPECT_EQ(enc(*t, ""), Ids{});
}

TEST(BpeHand, Gpt2AndQwen2PreTokenizersDiffer) {
  auto g = gpt2_style();
  auto q = qwen2_style();
  ASSERT_TRUE(g && q);
  // GPT-2 keeps a digit run in one piece, so "20" + "2" merge; Qwen2 cuts every digit alone.
  EXPECT_EQ(enc(*g, "2024"), (Ids{265, '4'}));
  EXPECT_EQ(enc(*q, "2024"), (Ids{'2', '0', '2', '4'}));
  // GPT-2 contractions are lower case only ("'" and "S" land in different pieces); Qwen2's are not.
  EXPECT_EQ(enc(*g, "IT'S"), (Ids{'I', 'T', '\'', 'S'}));
  EXPECT_EQ(enc(*q, "IT'S"), (Ids{'I', 'T', 270}));
  // Qwen2 keeps newlines after punctuation in the same piece, GPT-2 does not.
  EXPECT_EQ(enc(*q, "x.\n\ny"), (Ids{'x', 271, '\n', 'y'}));
  EXPECT_EQ(enc(*g, "x.\n\ny"), (Ids{'x', '.', '\n', '\n', 'y'}));
  // A whitespace run leaves its last space to the next word in both.
  EXPECT_EQ(enc(*g, "a   wo"), (Ids{'a', ' ', ' ', 261}));
  EXPECT_EQ(enc(*q, "a   wo"), (Ids{'a', ' ', ' ', 261}));
}

TEST(BpeHand, AddedTokensAreCutOutFirst) {
  auto g = gpt2_style();
  auto q = qwen2_style();
  ASSERT_TRUE(g && q);
  for (const Tokenizer* t : {g.get(), q.get()}) {
    EXPECT_EQ(enc(*t, "<|im_start|>user\nhello<|im_end|>\n"),
              (Ids{kImStart, 'u', 's', 'e', 'r', '\n', 259, kImEnd, '\n'}));
    EXPECT_EQ(enc(*t, "he<|endoftext|>llo"), (Ids{256, kEndOfText, 257, 'o'}));
    EXPECT_EQ(enc(*t, "<|im_end|><|im_end|>"), (Ids{kImEnd, kImEnd}));
    EXPECT_EQ(enc(*t, "<|im_end"), bytes_of("<|im_end"));  // a prefix is plain text
    EXPECT_EQ(t->token_to_id("<|im_end|>"), kImEnd);
    EXPECT_EQ(t->token_to_id("Ġw"), 260);  // vocab entries by their tokenizer.json spelling
    EXPECT_EQ(t->token_to_id("nope"), std::nullopt);
    EXPECT_EQ(t->eos_id(), kImEnd);
    EXPECT_EQ(t->bos_id(), std::nullopt);
    EXPECT_TRUE(t->is_special(kImStart));
    EXPECT_FALSE(t->is_special(259));
    auto d = t->decode({kImStart, 259, kImEnd});
    ASSERT_TRUE(d.is_ok());
    EXPECT_EQ(d.value(), "<|im_start|>hello<|im_end|>");
  }
}

TEST(BpeHand, LongestAddedTokenWins) {
  auto j = make_tokenizer_json(hand_merges(), byte_level_pre(false, true), {"<a>", "<a><b>", "<b>"});
  auto t = load(j);
  ASSERT_TRUE(t);
  EXPECT_EQ(enc(*t, "<a><b><b>"), (Ids{273, 274}));  // ids 272 "<a>", 273 "<a><b>", 274 "<b>"
  EXPECT_EQ(enc(*t, "x<a>"), (Ids{'x', 272}));
}

TEST(BpeHand, AddPrefixSpace) {
  auto t = load(make_tokenizer_json(hand_merges(), byte_level_pre(true, true)));
  ASSERT_TRUE(t);
  EXPECT_EQ(enc(*t, "hello"), (Ids{' ', 259}));
  EXPECT_EQ(enc(*t, " hello"), (Ids{' ', 259}));
  EXPECT_EQ(enc(*t, "wo"), (Ids{261}));
  // Each stretch between added tokens gets its own prefix space.
  EXPECT_EQ(enc(*t, "wo<|im_end|>wo"), (Ids{261, kImEnd, 261}));
}

TEST(BpeHand, IgnoreMergesUsesWholeVocabEntries) {
  auto j = make_tokenizer_json(hand_merges(), qwen2_pre(), {}, true);
  j["model"]["vocab"]["xyz"] = 272;
  EXPECT_EQ(enc(*load(j), "xyz"), (Ids{'x', 'y', 'z'}));
  j["model"]["ignore_merges"] = true;
  EXPECT_EQ(enc(*load(j), "xyz"), (Ids{272}));
  EXPECT_EQ(enc(*load(j), "hello"), (Ids{259}));
}

TEST(BpeRoundTrip, TextSurvivesEncodeDecode) {
  auto g = gpt2_style();
  auto q = qwen2_style();
  ASSERT_TRUE(g && q);
  const std::vector<std::string> texts = {
      "plain ASCII, with punctuation!?",
      "accents: café, naïve, Zürich, São Paulo, Łódź",
      "CJK: 中文字符，日本語のテキスト。한국어",
      "emoji: 😀 👍🏽 🇫🇷 👨‍👩‍👧",
      "whitespace   runs\t\t and\u00a0nbsp\u3000ideographic",
      "newlines\n\n\nand\r\nCRLF\n",
      "   ",
      "\n",
      "mixed<|im_start|>special<|im_end|> tokens<|endoftext|>",
      "it's they're we'll I'M YOU'VE",
      "numbers 3.14159 2024 1e-5 0x1F ٣٤ ²",
  };
  for (const Tokenizer* t : {g.get(), q.get()}) {
    for (const auto& s : texts) {
      auto ids = enc(*t, s);
      auto back = t->decode(ids);
      ASSERT_TRUE(back.is_ok()) << back.status().message();
      EXPECT_EQ(back.value(), s);
      // Concatenating single-token bytes gives the same text (what streaming does).
      std::string joined;
      for (int32_t id : ids) joined += t->token_bytes(id).value();
      EXPECT_EQ(joined, s);
    }
  }
}

TEST(BpeRoundTrip, EncodeIsThreadSafeAndDeterministic) {
  auto t = qwen2_style();
  ASSERT_TRUE(t);
  std::mt19937 rng(7);
  const std::string alphabet[] = {"he", "llo", " wo", "r", "café", "20", "24", " ", "\n", "<|im_end|>", "é", "中"};
  std::vector<std::string> texts(200);
  for (auto& s : texts)
    for (int k = 0, n = static_cast<int>(rng() % 20); k < n; ++k) s += alphabet[rng() % std::size(alphabet)];
  std::vector<Ids> expected;
  for (const auto& s : texts) expected.push_back(enc(*t, s));
  std::vector<std::thread> threads;
  std::vector<int> mismatches(4, 0);
  for (int w = 0; w < 4; ++w)
    threads.emplace_back([&, w] {
      for (int rep = 0; rep < 5; ++rep)
        for (size_t i = 0; i < texts.size(); ++i) {
          auto r = t->encode(texts[(i + w * 17) % texts.size()]);
          if (!r.is_ok() || r.value() != expected[(i + w * 17) % texts.size()]) ++mismatches[w];
        }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(mismatches, std::vector<int>(4, 0));
}

TEST(BpeErrorsAtUse, InvalidUtf8AndUnknownIds) {
  auto t = gpt2_style();
  ASSERT_TRUE(t);
  for (std::string bad : {std::string("abc\xff"), std::string("ab\xC3"), std::string("\xC0\xAF"),
                          std::string("\xED\xA0\x80"), std::string("x\xF4\x90\x80\x80")}) {
    auto r = t->encode(bad);
    ASSERT_FALSE(r.is_ok()) << "accepted " << bad;
    EXPECT_NE(r.status().message().find("not valid UTF-8 at byte"), std::string::npos) << r.status().message();
  }
  auto r = t->encode(std::string("ab\xffz"));
  EXPECT_NE(r.status().message().find("byte 2"), std::string::npos) << r.status().message();
  for (int32_t id : {-1, 275, 1 << 30}) {
    auto d = t->decode({'a', id});
    ASSERT_FALSE(d.is_ok());
    EXPECT_NE(d.status().message().find("id " + std::to_string(id)), std::string::npos) << d.status().message();
    EXPECT_FALSE(t->token_bytes(id).is_ok());
  }
}

}  // namespace
}  // namespace meshrl::tokenizer
