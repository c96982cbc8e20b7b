// Oracle check: encodings of ~300 random strings per style (GPT-2, Qwen2 with NFC, Llama-3 with
// ignore_merges) must equal those of the plain-Python BPE in tests/oracle/tokenizer_fixtures.py,
// which also trained the 300 merges of these fixtures. Remake the fixtures with
//   /usr/bin/python3 tests/oracle/tokenizer_fixtures.py --write tests/data/tokenizer
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/file_io.h"
#include "tokenizer/tokenizer.h"

namespace meshrl::tokenizer {
namespace {

class OracleFixture : public ::testing::TestWithParam<std::string> {};

TEST_P(OracleFixture, MatchesPythonBpe) {
  const std::filesystem::path dir = std::filesystem::path(MESHRL_TEST_DATA) / "tokenizer" / GetParam();
  auto tok = load_tokenizer(dir / "tokenizer.json");
  ASSERT_TRUE(tok.is_ok()) << tok.status().message();
  auto text = read_file(dir / "cases.json");
  ASSERT_TRUE(text.is_ok()) << text.status().message();
  auto cases = nlohmann::json::parse(text.value());
  ASSERT_GE(cases["cases"].size(), 250u);
  size_t n_bytes = 0, n_ids = 0, n_failed = 0;
  for (const auto& c : cases["cases"]) {
    const std::string s = c["text"].get<std::string>();
    const auto expected = c["ids"].get<std::vector<int32_t>>();
    auto ids = tok.value()->encode(s);
    ASSERT_TRUE(ids.is_ok()) << ids.status().message();
    if (ids.value() != expected && ++n_failed <= 5) {
      ADD_FAILURE() << GetParam() << ": ids differ for " << nlohmann::json(s).dump() << "\n  got      "
                    << nlohmann::json(ids.value()).dump() << "\n  expected " << nlohmann::json(expected).dump();
    }
    auto back = tok.value()->decode(ids.value());
    ASSERT_TRUE(back.is_ok());
    EXPECT_EQ(back.value(), s);
    n_bytes += s.size();
    n_ids += ids.value().size();
  }
  EXPECT_EQ(n_failed, 0u);
  // The merges really apply: well under one token per byte.
  EXPECT_LT(static_cast<double>(n_ids), 0.8 * static_cast<double>(n_bytes));
}

INSTANTIATE_TEST_SUITE_P(Styles, OracleFixture, ::testing::Values("gpt2", "qwen2", "llama3"));

}  // namespace
}  // namespace meshrl::tokenizer
