// UTF-8 helpers for the tokenizer: validation and code point encode/decode.
// Owns nothing; knows nothing about vocabularies or regexes. Strict UTF-8 (RFC 3629): overlong
// forms, surrogates and code points above U+10FFFF are invalid.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace meshrl::tokenizer {

inline constexpr size_t kUtf8Valid = static_cast<size_t>(-1);

// Byte offset of the first invalid sequence in `s`, or kUtf8Valid when all of `s` is valid UTF-8.
size_t utf8_first_invalid(std::string_view s);

// Decodes the code point starting at s[*pos] and advances *pos past it. `s` must be valid UTF-8
// from *pos on (checked by the caller with utf8_first_invalid).
char32_t utf8_decode_next(std::string_view s, size_t* pos);

// Appends the UTF-8 encoding of `cp` (<= U+10FFFF) to `out`.
void utf8_append(char32_t cp, std::string* out);

}  // namespace meshrl::tokenizer
