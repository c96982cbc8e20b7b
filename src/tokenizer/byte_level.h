// The byte-level alphabet of GPT-2 style BPE: a bijection between the 256 byte values and 256
// printable Unicode code points, so that a vocabulary of byte strings can be written as text in
// tokenizer.json ("Ġ" is the space byte 0x20). Owns two static tables; knows nothing else.
//
// The mapping: bytes that are printable Latin-1 ('!'..'~', '¡'..'¬', '®'..'ÿ') map to themselves;
// the remaining 68 bytes, in increasing order, map to U+0100, U+0101, ... .
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace meshrl::tokenizer {

// The code point that stands for byte `b` in the byte-level alphabet.
char32_t byte_level_char(unsigned char b);

// Raw bytes -> byte-level text (each byte becomes one code point, UTF-8 encoded).
std::string bytes_to_byte_level(std::string_view bytes);

// Byte-level text -> raw bytes; nullopt when `text` is not valid UTF-8 or holds a code point
// outside the 256-character alphabet (such vocab entries cannot come out of byte-level BPE).
std::optional<std::string> byte_level_to_bytes(std::string_view text);

}  // namespace meshrl::tokenizer
