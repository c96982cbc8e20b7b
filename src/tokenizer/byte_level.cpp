#include "tokenizer/byte_level.h"

#include <array>

#include "tokenizer/utf8.h"

namespace meshrl::tokenizer {
namespace {

struct Tables {
  std::array<char32_t, 256> to_char{};
  // Every code point in the alphabet is below U+0144 (0x100 + 68), so a flat table covers it.
  std::array<int16_t, 0x144> to_byte{};

  Tables() {
    to_byte.fill(-1);
    auto printable = [](int b) { return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF); };
    char32_t next = 0x100;
    for (int b = 0; b < 256; ++b) {
      char32_t cp = printable(b) ? static_cast<char32_t>(b) : next++;
      to_char[b] = cp;
      to_byte[cp] = static_cast<int16_t>(b);
    }
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

}  // namespace

char32_t byte_level_char(unsigned char b) { return tables().to_char[b]; }

std::string bytes_to_byte_level(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char b : bytes) utf8_append(tables().to_char[b], &out);
  return out;
}

std::optional<std::string> byte_level_to_bytes(std::string_view text) {
  if (utf8_first_invalid(text) != kUtf8Valid) return std::nullopt;
  std::string out;
  out.reserve(text.size());
  size_t pos = 0;
  while (pos < text.size()) {
    char32_t cp = utf8_decode_next(text, &pos);
    if (cp >= tables().to_byte.size() || tables().to_byte[cp] < 0) return std::nullopt;
    out.push_back(static_cast<char>(tables().to_byte[cp]));
  }
  return out;
}

}  // namespace meshrl::tokenizer
