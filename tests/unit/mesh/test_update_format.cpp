// The update wire format (src/mesh/update_format.h) against hostile buffers: every malformed
// buffer gives an error naming the field, never a crash or an allocation past the caller's cap.
//   build-codec/tests/test_mesh --gtest_filter='UpdateFormat*'
#include <gtest/gtest.h>
#include <zstd.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "mesh/update_format.h"

namespace meshrl::mesh {
namespace {

template <typename T>
void put(std::string& s, T v) {
  s.append(reinterpret_cast<const char*>(&v), sizeof v);
}

// Hand-built buffers, field by field, so a test can lie in any one of them.
std::string header(uint8_t codec, uint8_t compression, uint32_t n_tensors, uint16_t version = kUpdateFormatVersion) {
  std::string s("MRLU");
  put<uint16_t>(s, version);
  put<uint8_t>(s, codec);
  put<uint8_t>(s, compression);
  put<uint32_t>(s, n_tensors);
  return s;
}
std::string record(const std::string& name, const std::vector<int64_t>& shape, uint64_t numel, uint32_t block,
                   uint64_t stored) {
  std::string s;
  put<uint16_t>(s, static_cast<uint16_t>(name.size()));
  s += name;
  put<uint8_t>(s, static_cast<uint8_t>(shape.size()));
  for (auto d : shape) put<int64_t>(s, d);
  put<uint64_t>(s, numel);
  put<uint32_t>(s, block);
  put<uint64_t>(s, stored);
  return s;
}
std::string floats(const std::vector<float>& v) { return std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4); }

const UpdateDecodeLimits kLimits{1 << 20, 64};

// Parses and, when that succeeds, decodes every tensor; returns the first error message ("" if none).
std::string decode_error(const std::string& bytes, const UpdateDecodeLimits& limits = kLimits) {
  auto parsed = parse_update(bytes, limits, "test");
  if (!parsed.is_ok()) return parsed.status().message();
  for (size_t i = 0; i < parsed.value().tensors.size(); ++i) {
    std::vector<float> out(parsed.value().tensors[i].numel);
    auto st = decode_update_tensor(parsed.value(), i, out, "test");
    if (!st.is_ok()) return st.message();
    for (float v : out)
      if (!std::isfinite(v)) return "decoded a non-finite value";
  }
  return "";
}

#define EXPECT_ERROR_HAS(bytes, needle)                                     \
  do {                                                                      \
    const std::string _e = decode_error(bytes);                             \
    EXPECT_NE(_e.find(needle), std::string::npos) << "error was: '" << _e << "'"; \
  } while (0)

std::string valid_update(CodecId codec, int zstd_level) {
  std::vector<float> a(15), b(7);
  for (size_t i = 0; i < a.size(); ++i) a[i] = 0.01f * (static_cast<float>(i) - 7);
  for (size_t i = 0; i < b.size(); ++i) b[i] = -0.5f + static_cast<float>(i);
  std::vector<int64_t> sa{3, 5}, sb{7};
  std::vector<UpdateTensorView> views{{"layer.w", sa, a}, {"norm", sb, b}};
  UpdateEncodeOptions o;
  o.codec = codec;
  o.block_size = 4;
  o.zstd_level = zstd_level;
  return write_update(views, o).value();
}

TEST(UpdateFormat, ValidBuffersOfEveryCodecDecode) {
  for (auto codec : {CodecId::kFp32, CodecId::kInt8, CodecId::kInt4, CodecId::kInt2})
    for (int level : {0, 3}) EXPECT_EQ(decode_error(valid_update(codec, level)), "") << codec_name(codec) << level;
  EXPECT_EQ(decode_error(header(2, 1, 0)), "") << "an empty update is valid";
}

TEST(UpdateFormat, EveryTruncationIsAnError) {
  for (auto codec : {CodecId::kFp32, CodecId::kInt8, CodecId::kInt4, CodecId::kInt2})
    for (int level : {0, 3}) {
      const std::string full = valid_update(codec, level);
      for (size_t n = 0; n < full.size(); ++n)
        EXPECT_NE(decode_error(full.substr(0, n)), "") << codec_name(codec) << " zstd " << level << " cut at " << n;
    }
}

TEST(UpdateFormat, HeaderFields) {
  EXPECT_ERROR_HAS("", "magic");
  EXPECT_ERROR_HAS("MRLX" + header(2, 0, 0).substr(4), "magic");
  EXPECT_ERROR_HAS(header(2, 0, 0, 2), "format_version");
  EXPECT_ERROR_HAS(header(2, 0, 0, 0), "format_version");
  EXPECT_ERROR_HAS(header(0, 0, 0), "codec");
  EXPECT_ERROR_HAS(header(5, 0, 0), "codec");  // 1..4 are fp32, int8, int4, int2
  EXPECT_ERROR_HAS(header(9, 0, 0), "codec");
  EXPECT_ERROR_HAS(header(2, 7, 0), "compression");
  EXPECT_ERROR_HAS(header(2, 0, 65), "n_tensors");  // over the caller's 64
  EXPECT_ERROR_HAS(header(2, 0, 0xFFFFFFFF), "n_tensors");
  EXPECT_ERROR_HAS(header(2, 0, 3), "name_len: truncated");  // declares 3, holds none
}

TEST(UpdateFormat, RecordFields) {
  const std::string p12 = floats(std::vector<float>(12, 1.0f));
  EXPECT_EQ(decode_error(header(1, 0, 1) + record("w", {3, 4}, 12, 0, 48) + p12), "");
  EXPECT_ERROR_HAS(header(1, 0, 1) + record("", {3, 4}, 12, 0, 48) + p12, "name_len");
  EXPECT_ERROR_HAS(header(1, 0, 1) + record(std::string(1025, 'x'), {3, 4}, 12, 0, 48) + p12, "name_len");
  EXPECT_ERROR_HAS(header(1, 0, 2) + record("w", {3, 4}, 12, 0, 48) + record("w", {3, 4}, 12, 0, 48) + p12 + p12,
                   "duplicate");
  EXPECT_ERROR_HAS(header(1, 0, 1) + record("w", {1, 1, 1, 1, 1, 1, 1, 1, 12}, 12, 0, 48) + p12, "rank");
  EXPECT_ERROR_HAS(header(1, 0, 1) + record("w", {3, -4}, 12, 0, 48) + p12, "shape: negative");
  EXPECT_ERROR_HAS(header(1, 0, 1) + record("w", {1ll << 40, 1ll << 40}, 0, 0, 48) + p12, "shape: product overflows");
  EXPECT_ERROR_HAS(header(1, 0, 1) + record("w", {3, 4}, 13, 0, 48) + p12, "numel: 13 but the shape holds 12");
  EXPECT_ERROR_HAS(header(1, 0, 1) + record("w", {3, 4}, 12, 64, 48) + p12, "block_size");  // fp32 has none
  EXPECT_ERROR_HAS(header(2, 0, 1) + record("w", {3, 4}, 12, 0, 16) + p12, "block_size");
  EXPECT_ERROR_HAS(header(2, 0, 1) + record("w", {3, 4}, 12, 65537, 16) + p12, "block_size");
  // Lengths beyond the buffer, and bytes after the last payload.
  EXPECT_ERROR_HAS(header(1, 0, 1) + record("w", {3, 4}, 12, 0, 1ull << 62) + p12, "stored_bytes");
  EXPECT_ERROR_HAS(header(1, 0, 1) + record("w", {3, 4}, 12, 0, ~0ull) + p12, "stored_bytes");
  EXPECT_ERROR_HAS(header(1, 0, 2) + record("a", {1}, 1, 0, ~0ull) + record("b", {1}, 1, 0, 5) + p12, "stored_bytes");
  EXPECT_ERROR_HAS(header(1, 0, 1) + record("w", {3, 4}, 12, 0, 48) + p12 + "x", "trailing");
  // The record is internally consistent but the stored size is not the fp32 payload size.
  EXPECT_ERROR_HAS(header(1, 0, 1) + record("w", {3, 4}, 12, 0, 44) + p12.substr(0, 44), "stored_bytes: 44");
}

TEST(UpdateFormat, DeclaredSizeOverTheCallersCapIsRefusedBeforeAllocating) {
  // 2^40 values = 4 TiB of output from a 60-byte buffer: refused from the record alone.
  const std::string lie = header(1, 1, 1) + record("w", {1ll << 20, 1ll << 20}, 1ull << 40, 0, 8) + "zzzzzzzz";
  EXPECT_ERROR_HAS(lie, "cap");
  // The cap is on the sum over tensors: two tensors of 2^17 + 1 values each break a 2^20-byte cap.
  const int64_t n = (1 << 17) + 1;
  const std::string two = header(1, 0, 2) + record("a", {n}, n, 0, 4 * n) + record("b", {n}, n, 0, 4 * n);
  EXPECT_ERROR_HAS(two, "tensor 1 'b': numel");
}

std::string zstd_frame(const std::string& raw, bool with_content_size) {
  ZSTD_CCtx* c = ZSTD_createCCtx();
  ZSTD_CCtx_setParameter(c, ZSTD_c_contentSizeFlag, with_content_size ? 1 : 0);
  std::string out(ZSTD_compressBound(raw.size()), '\0');
  ZSTD_outBuffer ob{out.data(), out.size(), 0};
  ZSTD_inBuffer ib{raw.data(), raw.size(), 0};
  // Streaming without a pledged size: the frame has no content size unless the flag adds it.
  size_t rc = ZSTD_compressStream2(c, &ob, &ib, ZSTD_e_end);
  EXPECT_EQ(rc, 0u);
  ZSTD_freeCCtx(c);
  out.resize(ob.pos);
  return out;
}

TEST(UpdateFormat, ZstdBombsAndBadFrames) {
  // A 64 MiB frame of zeros squeezed into a few KiB, posing as the payload of 12 values.
  const std::string bomb = zstd_frame(std::string(64 << 20, '\0'), true);
  const std::string bomb_buf = header(1, 1, 1) + record("w", {3, 4}, 12, 0, bomb.size()) + bomb;
  EXPECT_ERROR_HAS(bomb_buf, "zstd frame declares 67108864 bytes");
  // The same frame with a matching shape: refused by the cap (1 MiB here), not decompressed.
  const std::string big = header(1, 1, 1) + record("w", {16 << 20}, 16 << 20, 0, bomb.size()) + bomb;
  EXPECT_ERROR_HAS(big, "cap");
  // A frame that does not declare its size: refused (could expand without bound).
  const std::string p12 = floats(std::vector<float>(12, 1.0f));
  const std::string unsized = zstd_frame(p12, false);
  EXPECT_ERROR_HAS(header(1, 1, 1) + record("w", {3, 4}, 12, 0, unsized.size()) + unsized, "without a content size");
  // Not a frame at all.
  EXPECT_ERROR_HAS(header(1, 1, 1) + record("w", {3, 4}, 12, 0, 48) + p12, "not a zstd frame");
  // A valid frame followed by junk inside the same payload.
  const std::string sized = zstd_frame(p12, true);
  EXPECT_ERROR_HAS(header(1, 1, 1) + record("w", {3, 4}, 12, 0, sized.size() + 3) + sized + "abc", "does not fill");
  // A bit flipped inside the compressed data: zstd's checksum (or its decoder) catches it.
  std::string corrupt = valid_update(CodecId::kInt8, 3);
  corrupt[corrupt.size() - 6] ^= 0x40;
  EXPECT_NE(decode_error(corrupt), "");
}

// An uncompressed int8 / int4 buffer of one tensor with chosen scales and code bytes.
std::string quantized(uint8_t codec, uint64_t numel, uint32_t block, const std::vector<float>& scales,
                      const std::string& code_bytes) {
  const std::string payload = floats(scales) + code_bytes;
  return header(codec, 0, 1) + record("w", {static_cast<int64_t>(numel)}, numel, block, payload.size()) + payload;
}

TEST(UpdateFormat, ScalesMustBeFiniteNonNegativeAndNotOverflow) {
  const std::string codes(8, '\x01');
  EXPECT_EQ(decode_error(quantized(2, 8, 4, {0.5f, 0.25f}, codes)), "");
  const float inf = std::numeric_limits<float>::infinity();
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), inf, -inf, -1.0f, -0.0f, 3e38f})
    EXPECT_NE(decode_error(quantized(2, 8, 4, {0.5f, bad}, codes)).find("scale of block 1"), std::string::npos) << bad;
  // 127 * scale must stay finite for int8; int4 only needs 7 * scale to.
  EXPECT_ERROR_HAS(quantized(2, 8, 4, {0.5f, 3e36f}, codes), "scale of block 1");
  EXPECT_EQ(decode_error(quantized(3, 8, 4, {0.5f, 3e37f}, std::string(4, '\x11'))), "");  // 7 * 3e37 fits
}

TEST(UpdateFormat, CodesMustBeInRange) {
  std::string codes(8, '\x05');
  codes[3] = static_cast<char>(-128);
  EXPECT_ERROR_HAS(quantized(2, 8, 4, {1, 1}, codes), "codes: value 3 is -128");
  std::string nib(4, '\x11');
  nib[2] = static_cast<char>(0x81);  // element 5 = -8
  EXPECT_ERROR_HAS(quantized(3, 8, 4, {1, 1}, nib), "codes: value 5 is -8");
  // Odd length: the last byte's high nibble is padding and must be 0.
  EXPECT_EQ(decode_error(quantized(3, 5, 4, {1, 1}, std::string("\x11\x11\x01", 3))), "");
  EXPECT_ERROR_HAS(quantized(3, 5, 4, {1, 1}, std::string("\x11\x11\x11", 3)), "padding nibble");
  // int2: four 2-bit codes per byte, -1..1; 0b10 (-2) is out of range.
  EXPECT_EQ(decode_error(quantized(4, 8, 4, {1, 1}, std::string("\x55\x55", 2))), "");  // all +1
  EXPECT_EQ(decode_error(quantized(4, 8, 4, {1, 1}, std::string("\xFF\x00", 2))), "");  // -1 x 4, 0 x 4
  EXPECT_ERROR_HAS(quantized(4, 8, 4, {1, 1}, std::string("\x55\x65", 2)), "codes: value 6 is -2");
  // 6 values: the last byte's bits 4..7 are padding and must be 0.
  EXPECT_EQ(decode_error(quantized(4, 6, 4, {1, 1}, std::string("\x55\x05", 2))), "");
  EXPECT_ERROR_HAS(quantized(4, 6, 4, {1, 1}, std::string("\x55\x15", 2)), "padding bits");
}

TEST(UpdateFormat, Fp32ValuesMustBeFinite) {
  std::vector<float> v(4, 1.0f);
  v[2] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_ERROR_HAS(header(1, 0, 1) + record("w", {4}, 4, 0, 16) + floats(v), "value 2 is not finite");
  v[2] = -std::numeric_limits<float>::infinity();
  EXPECT_ERROR_HAS(header(1, 0, 1) + record("w", {4}, 4, 0, 16) + floats(v), "value 2 is not finite");
}

TEST(UpdateFormat, WriterRefusesBadInput) {
  std::vector<float> v{1, 2, std::numeric_limits<float>::quiet_NaN()};
  std::vector<int64_t> s3{3}, s4{4};
  UpdateEncodeOptions o;
  std::vector<UpdateTensorView> nan{{"w", s3, v}};
  EXPECT_NE(write_update(nan, o).status().message().find("not finite"), std::string::npos);
  v[2] = 0;
  std::vector<UpdateTensorView> shape{{"w", s4, v}};
  EXPECT_NE(write_update(shape, o).status().message().find("shape holds 4"), std::string::npos);
  std::vector<UpdateTensorView> dup{{"w", s3, v}, {"w", s3, v}};
  EXPECT_NE(write_update(dup, o).status().message().find("duplicate"), std::string::npos);
  std::vector<UpdateTensorView> ok{{"w", s3, v}};
  o.block_size = 0;
  EXPECT_NE(write_update(ok, o).status().message().find("block_size"), std::string::npos);
  o.block_size = 64;
  o.zstd_level = 99;
  EXPECT_NE(write_update(ok, o).status().message().find("zstd_level"), std::string::npos);
}

}  // namespace
}  // namespace meshrl::mesh
