// The torch-free safetensors parser and writer, on files crafted byte by byte.
//   cmake --build build --target test_model && build/tests/test_model --gtest_filter='Safetensors*'
#include <gtest/gtest.h>

#include <cstring>

#include "model/safetensors.h"

namespace meshrl::model {
namespace {

std::string le64(uint64_t v) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[i] = static_cast<char>((v >> (8 * i)) & 0xff);
  return s;
}

// A file with this header text (unpadded) and `data_bytes` bytes of data section.
std::string file_with(const std::string& header, size_t data_bytes = 0) {
  return le64(header.size()) + header + std::string(data_bytes, '\x11');
}

// Parses and expects failure; returns the message.
std::string error_of(const std::string& bytes) {
  auto r = parse_safetensors(bytes, "bad.safetensors");
  EXPECT_FALSE(r.is_ok()) << "parsed a bad file";
  if (r.is_ok()) return "";
  EXPECT_EQ(r.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(r.status().message().find("bad.safetensors"), std::string::npos) << r.status().message();
  return r.status().message();
}

#define EXPECT_CONTAINS(haystack, needle) \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << "message: " << (haystack)

TEST(SafetensorsDtype, SizesAndNames) {
  EXPECT_EQ(dtype_size(Dtype::F32), 4u);
  EXPECT_EQ(dtype_size(Dtype::BF16), 2u);
  EXPECT_EQ(dtype_size(Dtype::F64), 8u);
  EXPECT_EQ(dtype_size(Dtype::BOOL), 1u);
  EXPECT_EQ(dtype_name(Dtype::I16), "I16");
  EXPECT_EQ(dtype_from_name("BF16"), Dtype::BF16);
  EXPECT_FALSE(dtype_from_name("bf16").has_value());
  EXPECT_FALSE(dtype_from_name("F8_E4M3").has_value());
}

TEST(SafetensorsParse, ValidFileWithMetadata) {
  // Two tensors written out of order in the header: the parser returns them by offset.
  std::string h =
      R"({"b":{"dtype":"F16","shape":[3],"data_offsets":[8,14]},)"
      R"("__metadata__":{"format":"pt"},"a":{"dtype":"I64","shape":[1],"data_offsets":[0,8]}})";
  auto r = parse_safetensors(file_with(h, 14), "ok.safetensors");
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(r->data_offset, 8 + h.size());
  ASSERT_EQ(r->tensors.size(), 2u);
  EXPECT_EQ(r->tensors[0].name, "a");
  EXPECT_EQ(r->tensors[0].dtype, Dtype::I64);
  EXPECT_EQ(r->tensors[1].name, "b");
  EXPECT_EQ(r->tensors[1].shape, std::vector<int64_t>({3}));
  EXPECT_EQ(r->tensors[1].begin, 8u);
  EXPECT_EQ(r->tensors[1].end, 14u);
  EXPECT_EQ(r->tensors[1].numel(), 3);
  EXPECT_EQ(r->metadata.at("format"), "pt");
}

TEST(SafetensorsParse, EmptyHeaderScalarsAndEmptyTensors) {
  auto empty = parse_safetensors(file_with("{}"), "x");
  ASSERT_TRUE(empty.is_ok()) << empty.status().message();
  EXPECT_TRUE(empty->tensors.empty());
  // A scalar (shape []) holds one element; a [0, 5] tensor holds none and may share an offset.
  std::string h =
      R"({"s":{"dtype":"F32","shape":[],"data_offsets":[0,4]},)"
      R"("z":{"dtype":"F32","shape":[0,5],"data_offsets":[4,4]},"__metadata__":null})";
  auto r = parse_safetensors(file_with(h, 4), "x");
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(r->tensors.size(), 2u);
  EXPECT_EQ(r->tensors[0].numel(), 1);
}

TEST(SafetensorsParse, GapsAndTrailingBytesAreAllowed) {
  std::string h = R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[4,6]}})";
  EXPECT_TRUE(parse_safetensors(file_with(h, 10), "x").is_ok());
}

TEST(SafetensorsParse, RejectsShortFile) {
  EXPECT_CONTAINS(error_of(""), "shorter than the 8-byte");
  EXPECT_CONTAINS(error_of(std::string(7, '\0')), "7 bytes");
}

TEST(SafetensorsParse, RejectsHeaderLengthBeyondFile) {
  std::string f = le64(100) + "{}";
  EXPECT_CONTAINS(error_of(f), "beyond the end of the file");
  // 2^64 - 1 must not wrap around when added to 8.
  EXPECT_CONTAINS(error_of(le64(~uint64_t{0}) + "{}"), "over the limit");
}

TEST(SafetensorsParse, RejectsHugeHeaderLength) {
  EXPECT_CONTAINS(error_of(le64(kMaxSafetensorsHeaderBytes + 1) + "{}"), "over the limit");
}

TEST(SafetensorsParse, RejectsNonJsonAndNonObjectHeaders) {
  EXPECT_CONTAINS(error_of(file_with("{\"a\":")), "not valid JSON");
  EXPECT_CONTAINS(error_of(file_with("")), "not valid JSON");
  EXPECT_CONTAINS(error_of(file_with("[1,2]")), "must be a JSON object");
  EXPECT_CONTAINS(error_of(file_with("{} trailing")), "not valid JSON");
  EXPECT_CONTAINS(error_of(file_with("{\"\xff\":1}")), "not valid JSON");  // invalid UTF-8
  // Comments are not JSON.
  EXPECT_CONTAINS(error_of(file_with("{/* x */}")), "not valid JSON");
}

TEST(SafetensorsParse, RejectsBadMetadata) {
  EXPECT_CONTAINS(error_of(file_with(R"({"__metadata__":[1]})")), "__metadata__ must be an object");
  auto m = error_of(file_with(R"({"__metadata__":{"format":"pt","step":3}})"));
  EXPECT_CONTAINS(m, "__metadata__ field 'step' must be a string");
}

TEST(SafetensorsParse, RejectsUnknownDtype) {
  auto m = error_of(file_with(R"({"w":{"dtype":"F8_E4M3","shape":[1],"data_offsets":[0,1]}})", 1));
  EXPECT_CONTAINS(m, "tensor 'w', field 'dtype'");
  EXPECT_CONTAINS(m, "F8_E4M3");
  m = error_of(file_with(R"({"w":{"dtype":4,"shape":[1],"data_offsets":[0,4]}})", 4));
  EXPECT_CONTAINS(m, "field 'dtype': must be a string");
}

TEST(SafetensorsParse, RejectsBadShapes) {
  auto entry = [](const std::string& shape) {
    return file_with(R"({"w":{"dtype":"F32","shape":)" + shape + R"(,"data_offsets":[0,4]}})", 4);
  };
  EXPECT_CONTAINS(error_of(entry("4")), "tensor 'w', field 'shape': must be a list");
  EXPECT_CONTAINS(error_of(entry("[-1]")), "non-negative integers");
  EXPECT_CONTAINS(error_of(entry("[1.0]")), "non-negative integers");
  EXPECT_CONTAINS(error_of(entry("[\"1\"]")), "non-negative integers");
  EXPECT_CONTAINS(error_of(entry("[18446744073709551615]")), "non-negative integers");  // > INT64_MAX
  // 2^32 * 2^32 elements overflow uint64; 2^31 * 2^31 elements fit, but not times 4 bytes.
  EXPECT_CONTAINS(error_of(entry("[4294967296,4294967296]")), "element count of [4294967296,4294967296] overflows");
  EXPECT_CONTAINS(error_of(entry("[2147483648,2147483648]")), "byte size of");
  EXPECT_CONTAINS(error_of(entry("[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1]")), "rank 17");
}

TEST(SafetensorsParse, RejectsBadOffsets) {
  auto entry = [](const std::string& offsets, size_t data) {
    return file_with(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":)" + offsets + "}}", data);
  };
  EXPECT_CONTAINS(error_of(entry("[0]", 8)), "tensor 'w', field 'data_offsets': must be [begin, end]");
  EXPECT_CONTAINS(error_of(entry("[0,8,9]", 9)), "must be [begin, end]");
  EXPECT_CONTAINS(error_of(entry("[-8,0]", 8)), "must be [begin, end]");
  EXPECT_CONTAINS(error_of(entry("[0,8.0]", 8)), "must be [begin, end]");
  EXPECT_CONTAINS(error_of(entry("{\"b\":0}", 8)), "must be [begin, end]");
  EXPECT_CONTAINS(error_of(entry("[8,0]", 8)), "begin > end");
  EXPECT_CONTAINS(error_of(entry("[0,8]", 7)), "beyond the data section of 7 bytes");
  EXPECT_CONTAINS(error_of(entry("[0,12]", 12)), "span of 12 bytes does not match");
  EXPECT_CONTAINS(error_of(entry("[18446744073709551615,18446744073709551615]", 8)), "beyond the data section");
}

TEST(SafetensorsParse, RejectsOverlappingSpans) {
  std::string h =
      R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
      R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})";
  auto m = error_of(file_with(h, 12));
  EXPECT_CONTAINS(m, "tensor 'b', field 'data_offsets'");
  EXPECT_CONTAINS(m, "overlap tensor 'a'");
}

TEST(SafetensorsParse, RejectsDuplicateNames) {
  // nlohmann::json alone would keep the second entry silently.
  std::string h =
      R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},)"
      R"("a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}})";
  EXPECT_CONTAINS(error_of(file_with(h, 2)), "duplicate tensor name 'a'");
  std::string dup_field = R"({"a":{"dtype":"U8","dtype":"I8","shape":[1],"data_offsets":[0,1]}})";
  EXPECT_CONTAINS(error_of(file_with(dup_field, 1)), "duplicate key 'a.dtype'");
}

TEST(SafetensorsParse, RejectsMissingAndUnknownFields) {
  EXPECT_CONTAINS(error_of(file_with(R"({"a":{"dtype":"U8","shape":[1]}})", 1)), "field 'data_offsets': missing");
  EXPECT_CONTAINS(error_of(file_with(R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"x":1}})", 1)),
                  "field 'x': unknown field");
  EXPECT_CONTAINS(error_of(file_with(R"({"a":[1]})")), "entry must be an object");
  EXPECT_CONTAINS(error_of(file_with(R"({"":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})", 1)), "empty name");
}

TEST(SafetensorsParse, ControlCharactersInNamesArePrintedEscaped) {
  auto m = error_of(file_with(R"({"a\u0001b":{"dtype":"X","shape":[],"data_offsets":[0,0]}})"));
  EXPECT_CONTAINS(m, "'a\\x01b'");
}

TEST(SafetensorsWrite, LayoutSortsByDtypeThenNameAndPads) {
  std::string f32(8, 'a'), i64(16, 'b'), bf16(6, 'c'), u8(3, 'd');
  std::vector<TensorBytes> in = {{"z", Dtype::F32, {2}, f32},
                                 {"b", Dtype::BF16, {3}, bf16},
                                 {"a", Dtype::F32, {1, 2}, f32},
                                 {"m", Dtype::U8, {3}, u8},
                                 {"q", Dtype::I64, {2}, i64}};
  auto file = build_safetensors_file(in, {{"format", "pt"}});
  ASSERT_TRUE(file.is_ok()) << file.status().message();
  uint64_t n = 0;
  std::memcpy(&n, file->data(), 8);
  EXPECT_EQ(n % 8, 0u);  // padded so that the data section starts 8-aligned
  std::string header = file->substr(8, n);
  EXPECT_EQ(header.rfind("{\"__metadata__\":{\"format\":\"pt\"},\"q\":{\"dtype\":\"I64\",\"shape\":[2],"
                         "\"data_offsets\":[0,16]},\"a\":",
                         0),
            0u)
      << header;
  EXPECT_LT(header.size() - (header.find_last_not_of(' ') + 1), 8u);  // at most 7 spaces of padding

  auto parsed = parse_safetensors(*file, "written");
  ASSERT_TRUE(parsed.is_ok()) << parsed.status().message();
  std::vector<std::string> order;
  for (const auto& e : parsed->tensors) order.push_back(e.name);
  EXPECT_EQ(order, (std::vector<std::string>{"q", "a", "z", "b", "m"}));
  EXPECT_EQ(parsed->tensors.back().end, 16u + 8 + 8 + 6 + 3);
  EXPECT_EQ(file->size(), parsed->data_offset + parsed->tensors.back().end);
  EXPECT_EQ(file->substr(parsed->data_offset, 16), i64);
  EXPECT_EQ(file->substr(parsed->data_offset + 32, 6), bf16);

  // The same tensors in another order give the same bytes.
  std::vector<TensorBytes> reversed(in.rbegin(), in.rend());
  EXPECT_EQ(build_safetensors_file(reversed, {{"format", "pt"}}).value(), *file);
}

TEST(SafetensorsWrite, HeaderOfParsedFileReserializesIdentically) {
  std::string data(12, 'x');
  auto file = build_safetensors_file({{"w", Dtype::F32, {3}, data}}, {}).value();
  auto parsed = parse_safetensors(file, "f").value();
  EXPECT_EQ(serialize_safetensors_header(parsed.tensors, parsed.metadata) + file.substr(parsed.data_offset), file);
}

TEST(SafetensorsWrite, RejectsBadInput) {
  std::string four(4, 'x');
  EXPECT_FALSE(build_safetensors_file({{"a", Dtype::F32, {2}, four}}, {}).is_ok());  // 4 bytes for 8
  EXPECT_FALSE(build_safetensors_file({{"a", Dtype::F32, {1}, four}, {"a", Dtype::F32, {1}, four}}, {}).is_ok());
  EXPECT_FALSE(build_safetensors_file({{"", Dtype::F32, {1}, four}}, {}).is_ok());
  EXPECT_FALSE(build_safetensors_file({{"__metadata__", Dtype::F32, {1}, four}}, {}).is_ok());
  EXPECT_FALSE(build_safetensors_file({{"a\xff", Dtype::F32, {1}, four}}, {}).is_ok());
  EXPECT_FALSE(build_safetensors_file({{"a", Dtype::F32, {-1}, four}}, {}).is_ok());
}

}  // namespace
}  // namespace meshrl::model
