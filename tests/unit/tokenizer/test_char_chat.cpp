// The built-in char tokenizer and the ChatML template.
//   ./build/tests/test_tokenizer --gtest_filter='Char*:ChatMl*'
#include <gtest/gtest.h>

#include "tokenizer/char_tokenizer.h"
#include "tokenizer/chat_template.h"

namespace meshrl::tokenizer {
namespace {

using Ids = std::vector<int32_t>;

TEST(CharTokenizer, BytesAndSpecials) {
  auto r = make_char_tokenizer(512);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  const Tokenizer& t = *r.value();
  EXPECT_EQ(t.n_vocab(), 512);
  EXPECT_EQ(t.encode("hi").value(), (Ids{'h', 'i'}));
  EXPECT_EQ(t.encode("é").value(), (Ids{0xC3, 0xA9}));
  EXPECT_EQ(t.encode("<|im_start|>a<|im_end|><|bos|><|eos|><|pad|>").value(),
            (Ids{kCharImStart, 'a', kCharImEnd, kCharBos, kCharEos, kCharPad}));
  EXPECT_EQ(t.encode("<|im_end").value().size(), 8u);
  EXPECT_EQ(t.eos_id(), kCharImEnd);
  EXPECT_EQ(t.bos_id(), kCharBos);
  EXPECT_EQ(t.token_to_id("<|pad|>"), kCharPad);
  EXPECT_EQ(t.token_to_id("a"), 'a');
  EXPECT_EQ(t.token_to_id("ab"), std::nullopt);
  EXPECT_TRUE(t.is_special(kCharImEnd));
  EXPECT_FALSE(t.is_special('a'));
  const std::string text = "Zürich <|im_start|>中文 😀\n\t";
  EXPECT_EQ(t.decode(t.encode(text).value()).value(), text);
  EXPECT_EQ(t.token_bytes(0).value(), std::string(1, '\0'));
  EXPECT_EQ(t.token_bytes(255).value(), "\xff");
  EXPECT_EQ(t.token_bytes(kCharEos).value(), "<|eos|>");
}

TEST(CharTokenizer, Errors) {
  auto t = std::move(make_char_tokenizer(8192)).value();
  auto d = t->decode({'a', 300});
  ASSERT_FALSE(d.is_ok());
  EXPECT_NE(d.status().message().find("id 300"), std::string::npos) << d.status().message();
  EXPECT_NE(d.status().message().find("unused"), std::string::npos) << d.status().message();
  auto o = t->decode({8192});
  ASSERT_FALSE(o.is_ok());
  EXPECT_NE(o.status().message().find("id 8192"), std::string::npos);
  EXPECT_FALSE(t->decode({-1}).is_ok());
  auto e = t->encode("ok\xC3");
  ASSERT_FALSE(e.is_ok());
  EXPECT_NE(e.status().message().find("byte 2"), std::string::npos);
  EXPECT_FALSE(make_char_tokenizer(260).is_ok());
  EXPECT_TRUE(make_char_tokenizer(261).is_ok());
  EXPECT_FALSE(make_char_tokenizer(-5).is_ok());
}

TEST(ChatMl, Format) {
  std::vector<ChatMessage> msgs = {{"system", "Be brief."}, {"user", "2+2?"}};
  EXPECT_EQ(apply_chatml(msgs, true),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(apply_chatml(msgs, false), "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\n2+2?<|im_end|>\n");
  EXPECT_EQ(apply_chatml({}, true), "<|im_start|>assistant\n");
  // With the char tokenizer, the markers become single ids.
  auto t = std::move(make_char_tokenizer(512)).value();
  auto ids = t->encode(apply_chatml({{"user", "hi"}}, true)).value();
  EXPECT_EQ(ids, (Ids{kCharImStart, 'u', 's', 'e', 'r', '\n', 'h', 'i', kCharImEnd, '\n', kCharImStart, 'a', 's', 's',
                      'i', 's', 't', 'a', 'n', 't', '\n'}));
}

}  // namespace
}  // namespace meshrl::tokenizer
