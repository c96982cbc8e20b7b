// The frozen base of a [lora] run on a node (mesh/base_weights.h): held, cached or downloaded,
// always ending on exactly the run's base or failing with both hashes named.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/file_io.h"
#include "mesh/base_weights.h"
#include "mesh/codec.h"
#include "mesh/content_hash.h"
#include "mesh/policy_params.h"
#include "rollout/policy.h"

namespace meshrl::mesh {
namespace {

namespace fs = std::filesystem;

struct BaseWeightsTest : ::testing::Test {
  fs::path cache = fs::temp_directory_path() / ("meshrl-base-" + std::to_string(::getpid()));
  rollout::Policy run_base = rollout::load_policy("tiny", "cpu", 11).value();  // the coordinator's
  std::string run_hash = content_hash(trainable_parameters(*run_base.model));
  std::string encoded = make_codec(CodecConfig{.id = CodecId::kFp32, .zstd_level = 0}).value()->encode(trainable_parameters(*run_base.model)).value();
  int downloads = 0;
  std::vector<std::string> logged;

  void SetUp() override { fs::remove_all(cache); }
  void TearDown() override { fs::remove_all(cache); }
  Result<BaseSource> ensure(model::TransformerImpl& m, const std::string& bytes) {
    return ensure_base_weights(m, run_hash, cache, [&]() -> Result<std::string> { ++downloads; return bytes; },
                               [&](const std::string& s) { logged.push_back(s); });
  }
};

TEST_F(BaseWeightsTest, HeldThenDownloadedThenCached) {
  auto same = rollout::load_policy("tiny", "cpu", 11).value();
  EXPECT_EQ(ensure(*same.model, encoded).value(), BaseSource::kHeld);
  EXPECT_EQ(downloads, 0);

  auto other = rollout::load_policy("tiny", "cpu", 12).value();
  ASSERT_NE(content_hash(trainable_parameters(*other.model)), run_hash);
  EXPECT_EQ(ensure(*other.model, encoded).value(), BaseSource::kDownloaded);
  EXPECT_EQ(content_hash(trainable_parameters(*other.model)), run_hash);
  EXPECT_EQ(downloads, 1);

  auto third = rollout::load_policy("tiny", "cpu", 13).value();
  EXPECT_EQ(ensure(*third.model, encoded).value(), BaseSource::kCache);
  EXPECT_EQ(content_hash(trainable_parameters(*third.model)), run_hash);
  EXPECT_EQ(downloads, 1);  // the second node on this machine did not download
}

TEST_F(BaseWeightsTest, ATamperedCacheIsReplacedByADownload) {
  fs::create_directories(cache);
  std::string bad = encoded;
  bad[bad.size() / 2] ^= 0x10;  // one fp32 value changed: decodes fine, hashes differently
  ASSERT_TRUE(write_file_atomic(cache / ("base-" + run_hash + ".mrlu"), bad).is_ok());
  auto m = rollout::load_policy("tiny", "cpu", 12).value();
  EXPECT_EQ(ensure(*m.model, encoded).value(), BaseSource::kDownloaded);
  EXPECT_EQ(content_hash(trainable_parameters(*m.model)), run_hash);
  ASSERT_EQ(logged.size(), 1u);
  EXPECT_NE(logged[0].find("downloading it again"), std::string::npos) << logged[0];
  EXPECT_EQ(read_file(cache / ("base-" + run_hash + ".mrlu")).value(), encoded);
}

TEST_F(BaseWeightsTest, ADownloadOfAnotherBaseIsRefusedAndNotCached) {
  auto wrong = rollout::load_policy("tiny", "cpu", 99).value();
  const std::string wrong_bytes =
      make_codec(CodecConfig{.id = CodecId::kFp32, .zstd_level = 0}).value()->encode(trainable_parameters(*wrong.model)).value();
  auto m = rollout::load_policy("tiny", "cpu", 12).value();
  auto r = ensure(*m.model, wrong_bytes);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find(run_hash), std::string::npos) << r.status().message();
  EXPECT_FALSE(fs::exists(cache / ("base-" + run_hash + ".mrlu")));
}

}  // namespace
}  // namespace meshrl::mesh
