// Version blobs (mesh/version_blobs.h): the current weights encoded once until a version is
// published, exactly the coordinator's fp32 values; the last eight broadcasts kept; older
// weights and broadcasts read back from a run directory; byte counters.
//   build/tests/test_mesh --gtest_filter='VersionBlobs*'
#include <gtest/gtest.h>

#include <torch/torch.h>
#include <unistd.h>

#include <filesystem>

#include "mesh/content_hash.h"
#include "mesh/version_blobs.h"

namespace meshrl::mesh {
namespace {

namespace fs = std::filesystem;

NamedTensors vec(std::vector<float> v) { return {{"w"}, {torch::tensor(v)}}; }

TEST(VersionBlobs, TheCurrentWeightsAreEncodedOnceUntilTheNextVersion) {
  VersionBlobs blobs;
  NamedTensors theta = vec({1.5f, -2.25f, 3e-8f});
  const VersionBlob a = blobs.current_weights(theta, 4, "h4").value();
  EXPECT_EQ(a.version, 4);
  EXPECT_EQ(a.hash, "h4");
  const NamedTensors back = decode_update(*a.bytes, {}).value();
  EXPECT_TRUE(torch::equal(back.tensors[0], theta.tensors[0]));  // fp32: bit for bit
  theta.tensors[0].add_(1);  // the cache holds until published() says theta moved
  EXPECT_EQ(blobs.current_weights(theta, 4, "h4").value().bytes, a.bytes);
  blobs.published(5, "delta-5", "h5");
  const VersionBlob b = blobs.current_weights(theta, 5, "h5").value();
  EXPECT_NE(b.bytes, a.bytes);
  EXPECT_TRUE(torch::equal(decode_update(*b.bytes, {}).value().tensors[0], theta.tensors[0]));
}

TEST(VersionBlobs, TheLastEightBroadcastsAreKept) {
  VersionBlobs blobs;
  for (int64_t v = 1; v <= 10; ++v) blobs.published(v, "delta-" + std::to_string(v), "h" + std::to_string(v));
  EXPECT_FALSE(blobs.recent_broadcast(2).has_value());
  for (int64_t v = 3; v <= 10; ++v) {
    const auto b = blobs.recent_broadcast(v);
    ASSERT_TRUE(b.has_value()) << v;
    EXPECT_EQ(*b->bytes, "delta-" + std::to_string(v));
    EXPECT_EQ(b->hash, "h" + std::to_string(v));
  }
  EXPECT_FALSE(blobs.recent_broadcast(11).has_value());
}

TEST(VersionBlobs, TheBaseIsEncodedOnce) {
  VersionBlobs blobs;
  const NamedTensors base = vec({7, 8});
  const VersionBlob a = blobs.base(base, "base-hash").value();
  EXPECT_EQ(a.version, 0);
  EXPECT_EQ(a.hash, "base-hash");
  EXPECT_EQ(blobs.base(base, "base-hash").value().bytes, a.bytes);
  EXPECT_TRUE(torch::equal(decode_update(*a.bytes, {}).value().tensors[0], base.tensors[0]));
}

TEST(VersionBlobs, OlderVersionsComeFromTheRunDirectory) {
  const fs::path dir = fs::temp_directory_path() / ("meshrl-blobs-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  {
    store::RunStore st = store::RunStore::create(dir, nlohmann::json::object()).value();
    const NamedTensors w0 = vec({1, 2}), w1 = vec({0, 3});
    ASSERT_TRUE(st.write_version(0, content_hash(w0), "", {w0.names, w0.tensors}, {}, "").is_ok());
    ASSERT_TRUE(st.ledger().commit_initial(content_hash(w0)).is_ok());
    ASSERT_TRUE(st.write_version(1, content_hash(w1), content_hash(w0), {w1.names, w1.tensors}, {}, "delta-1").is_ok());
    ASSERT_TRUE(st.ledger().commit_round(1, content_hash(w1), {}, "deadline").is_ok());
    const VersionBlobs blobs;
    const VersionBlob v0 = blobs.stored_weights(st, 0).value();
    EXPECT_EQ(v0.hash, content_hash(w0));
    EXPECT_TRUE(torch::equal(decode_update(*v0.bytes, {}).value().tensors[0], w0.tensors[0]));
    const VersionBlob b1 = blobs.stored_broadcast(st, 1).value();
    EXPECT_EQ(*b1.bytes, "delta-1");
    EXPECT_EQ(b1.hash, content_hash(w1));
    EXPECT_FALSE(blobs.stored_weights(st, 2).is_ok());
  }
  fs::remove_all(dir);
}

TEST(VersionBlobs, BytesAreCountedEachWay) {
  VersionBlobs blobs;
  blobs.count_up(100);
  blobs.count_down(30, true);
  blobs.count_down(5, false);
  EXPECT_EQ(blobs.bytes_up(), 100u);
  EXPECT_EQ(blobs.bytes_down(), 35u);
  EXPECT_EQ(blobs.bytes_down_full(), 30u);
}

}  // namespace
}  // namespace meshrl::mesh
