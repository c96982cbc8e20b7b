// The GPT-2 byte <-> unicode alphabet and the UTF-8 validator.
//   ./build/tests/test_tokenizer --gtest_filter='ByteLevel*:Utf8*'
#include <gtest/gtest.h>

#include <set>

#include "tokenizer/byte_level.h"
#include "tokenizer/utf8.h"

namespace meshrl::tokenizer {
namespace {

TEST(ByteLevel, KnownCharacters) {
  EXPECT_EQ(byte_level_char(' '), U'\u0120');   // "Ġ"
  EXPECT_EQ(byte_level_char('\n'), U'\u010A');  // "Ċ"
  EXPECT_EQ(byte_level_char(0), U'\u0100');
  EXPECT_EQ(byte_level_char('a'), U'a');
  EXPECT_EQ(byte_level_char(0xAD), U'\u0143');  // the soft hyphen is the last remapped byte
  EXPECT_EQ(byte_level_char(0xE9), U'\u00E9');
  EXPECT_EQ(bytes_to_byte_level(" hello\n"), "Ġhello\xC4\x8A");
}

TEST(ByteLevel, IsABijection) {
  std::set<char32_t> seen;
  std::string all;
  for (int b = 0; b < 256; ++b) {
    seen.insert(byte_level_char(static_cast<unsigned char>(b)));
    all.push_back(static_cast<char>(b));
  }
  EXPECT_EQ(seen.size(), 256u);
  auto back = byte_level_to_bytes(bytes_to_byte_level(all));
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(*back, all);
  EXPECT_FALSE(byte_level_to_bytes("\xE4\xB8\xAD").has_value());  // '中' is not in the alphabet
  EXPECT_FALSE(byte_level_to_bytes("\xFF").has_value());
}

TEST(Utf8, Validation) {
  EXPECT_EQ(utf8_first_invalid(""), kUtf8Valid);
  EXPECT_EQ(utf8_first_invalid("ascii é 中 😀"), kUtf8Valid);
  EXPECT_EQ(utf8_first_invalid("\xF4\x8F\xBF\xBF"), kUtf8Valid);  // U+10FFFF
  EXPECT_EQ(utf8_first_invalid("ab\x80"), 2u);                    // stray continuation
  EXPECT_EQ(utf8_first_invalid("a\xC0\x80"), 1u);                 // overlong NUL
  EXPECT_EQ(utf8_first_invalid("\xE0\x80\xAF"), 0u);              // overlong '/'
  EXPECT_EQ(utf8_first_invalid("\xED\xA0\x80"), 0u);              // surrogate
  EXPECT_EQ(utf8_first_invalid("\xF4\x90\x80\x80"), 0u);          // above U+10FFFF
  EXPECT_EQ(utf8_first_invalid("xy\xE4\xB8"), 2u);                // truncated
  EXPECT_EQ(utf8_first_invalid("\xF8\x88\x80\x80\x80"), 0u);      // 5-byte form
}

TEST(Utf8, EncodeDecodeRoundTrip) {
  for (char32_t cp : {U'\0', U'A', U'\u00E9', U'\u07FF', U'\u0800', U'\u4E2D', U'\uFFFF', U'\U00010000',
                      U'\U0001F600', U'\U0010FFFF'}) {
    std::string s;
    utf8_append(cp, &s);
    EXPECT_EQ(utf8_first_invalid(s), kUtf8Valid);
    size_t pos = 0;
    EXPECT_EQ(utf8_decode_next(s, &pos), cp);
    EXPECT_EQ(pos, s.size());
  }
}

}  // namespace
}  // namespace meshrl::tokenizer
