// The [mesh] section of a run file (src/mesh/mesh_config.h): defaults, overrides, errors that
// name the key, and a round trip through the effective config.
//   build-mesh/tests/test_mesh --gtest_filter='MeshConfig*'
#include <gtest/gtest.h>

#include "mesh/mesh_config.h"

namespace meshrl::mesh {
namespace {

const char* kRun = R"(
[model]
init = "tiny"
[grpo]
steps = 10
[mesh]
rounds = 3
inner_steps = 2
mode = "async"
codec = "int4"
)";

TEST(MeshConfig, ReadsTheSectionAndLeavesTheRestToTheRunConfig) {
  auto c = parse_mesh_run_config(kRun, "run.toml");
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  EXPECT_EQ(c->mesh.rounds, 3);
  EXPECT_EQ(c->mesh.inner_steps, 2);
  EXPECT_EQ(c->mesh.mode, "async");
  EXPECT_EQ(c->mesh.codec, "int4");
  EXPECT_DOUBLE_EQ(c->mesh.outer_lr, 0.7);  // default
  EXPECT_EQ(c->run.grpo.steps, 10);
}

TEST(MeshConfig, OverridesGoToTheirSection) {
  auto c = parse_mesh_run_config(kRun, "run.toml", {"--mesh.rounds=7", "--grpo.lr=1e-3"});
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  EXPECT_EQ(c->mesh.rounds, 7);
  EXPECT_DOUBLE_EQ(c->run.grpo.lr, 1e-3);
}

TEST(MeshConfig, UnknownKeysWrongTypesAndRangesAreErrors) {
  auto unknown = parse_mesh_run_config("[mesh]\nroundz = 3\n", "run.toml");
  ASSERT_FALSE(unknown.is_ok());
  EXPECT_NE(unknown.status().message().find("[mesh] unknown key 'roundz'"), std::string::npos) << unknown.status().message();
  auto type = parse_mesh_run_config("[mesh]\nrounds = \"3\"\n", "run.toml");
  ASSERT_FALSE(type.is_ok());
  EXPECT_NE(type.status().message().find("rounds must be an integer"), std::string::npos) << type.status().message();
  auto range = parse_mesh_run_config("[mesh]\nquorum = 1.5\n", "run.toml");
  ASSERT_FALSE(range.is_ok());
  EXPECT_NE(range.status().message().find("quorum must be in (0, 1]"), std::string::npos) << range.status().message();
  auto density = parse_mesh_run_config(kRun, "run.toml", {"--mesh.int2_density=0.0625"});  // kRun's codec is int4
  ASSERT_FALSE(density.is_ok());
  EXPECT_NE(density.status().message().find("int2_density must be 0 unless codec is \"int2\", got 0.0625 with codec \"int4\""),
            std::string::npos) << density.status().message();
  EXPECT_TRUE(parse_mesh_run_config(kRun, "run.toml", {"--mesh.codec=int2", "--mesh.int2_density=0.0625"}).is_ok());
  EXPECT_FALSE(parse_mesh_run_config(kRun, "run.toml", {"--mesh.codec=int2", "--mesh.int2_density=1.5"}).is_ok());
  auto scale = parse_mesh_run_config(kRun, "run.toml", {"--mesh.int2_scale=mean"});  // kRun's codec is int4
  ASSERT_FALSE(scale.is_ok());
  EXPECT_NE(scale.status().message().find("int2_scale must be absmax unless codec is \"int2\", got \"mean\" with codec \"int4\""),
            std::string::npos) << scale.status().message();
  auto scale_name = parse_mesh_run_config(kRun, "run.toml", {"--mesh.codec=int2", "--mesh.int2_scale=median"});
  ASSERT_FALSE(scale_name.is_ok());
  EXPECT_NE(scale_name.status().message().find("int2_scale must be absmax or mean"), std::string::npos);
  auto down_name = parse_mesh_run_config(kRun, "run.toml", {"--mesh.codec=int2", "--mesh.broadcast_int2_scale=max"});
  ASSERT_FALSE(down_name.is_ok());
  EXPECT_NE(down_name.status().message().find("[mesh] broadcast_int2_scale must be mean or absmax, got \"max\""),
            std::string::npos) << down_name.status().message();
  // The broadcast's default ("mean") is inert for a broadcast in another codec, so it is no error.
  EXPECT_TRUE(parse_mesh_run_config(kRun, "run.toml", {"--mesh.broadcast_int2_scale=mean"}).is_ok());
  auto mode = parse_mesh_run_config("", "run.toml", {"--mesh.mode=fast"});
  ASSERT_FALSE(mode.is_ok());
  auto other = parse_mesh_run_config("[grpo]\nstepz = 1\n", "run.toml");
  ASSERT_FALSE(other.is_ok());
  EXPECT_NE(other.status().message().find("stepz"), std::string::npos);
}

TEST(MeshConfig, EffectiveConfigReadsBackToTheSameValues) {
  auto c = parse_mesh_run_config(kRun, "run.toml", {"--mesh.outer_lr=0.5", "--mesh.overlap=false"});
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  auto back = parse_mesh_run_config(mesh_run_config_to_toml(c.value()), "effective.toml");
  ASSERT_TRUE(back.is_ok()) << back.status().message();
  EXPECT_EQ(mesh_section_to_json(back->mesh), mesh_section_to_json(c->mesh));
  EXPECT_EQ(rl::run_config_to_json(back->run), rl::run_config_to_json(c->run));
}

}  // namespace
}  // namespace meshrl::mesh

#include "mesh/codec.h"

namespace meshrl::mesh {
namespace {

// [mesh] broadcast_codec: empty means the updates' codec; set, it replaces only the codec id of
// the broadcast's settings (block size and zstd level are shared), drops the updates' sparse
// ternary option when the id differs, reads back from the effective config, and a bad name is
// refused naming the key.
TEST(MeshConfig, BroadcastCodecDefaultsToTheUpdatesCodecAndIsValidated) {
  auto same = parse_mesh_run_config(kRun, "run.toml");
  ASSERT_TRUE(same.is_ok()) << same.status().message();
  auto up = codec_config(same->mesh), down = broadcast_codec_config(same->mesh);
  ASSERT_TRUE(up.is_ok() && down.is_ok());
  EXPECT_EQ(down->id, up->id);
  EXPECT_EQ(down->id, CodecId::kInt4);

  auto split = parse_mesh_run_config(kRun, "run.toml",
                                     {"--mesh.codec=int2", "--mesh.int2_density=0.25", "--mesh.broadcast_codec=int8",
                                      "--mesh.block_size=1024", "--mesh.zstd_level=7"});
  ASSERT_TRUE(split.is_ok()) << split.status().message();
  auto u = codec_config(split->mesh), b = broadcast_codec_config(split->mesh);
  ASSERT_TRUE(u.is_ok() && b.is_ok());
  EXPECT_EQ(u->id, CodecId::kInt2);
  EXPECT_DOUBLE_EQ(u->int2_density, 0.25);
  EXPECT_EQ(b->id, CodecId::kInt8);
  EXPECT_DOUBLE_EQ(b->int2_density, 0.0);
  EXPECT_EQ(b->block_size, 1024u);
  EXPECT_EQ(b->zstd_level, 7);
  EXPECT_TRUE(make_codec(b.value()).is_ok());
  // Ternary scales, one key per direction: updates absmax and broadcasts least-squares by default
  // (the demo's split, quantize.h), each settable on its own.
  auto tern = parse_mesh_run_config(kRun, "run.toml", {"--mesh.codec=int2"});
  ASSERT_TRUE(tern.is_ok()) << tern.status().message();
  EXPECT_FALSE(codec_config(tern->mesh)->int2_mean_scale);
  EXPECT_TRUE(broadcast_codec_config(tern->mesh)->int2_mean_scale);
  auto flipped = parse_mesh_run_config(kRun, "run.toml",
                                       {"--mesh.codec=int2", "--mesh.int2_scale=mean", "--mesh.broadcast_int2_scale=absmax"});
  ASSERT_TRUE(flipped.is_ok()) << flipped.status().message();
  EXPECT_TRUE(codec_config(flipped->mesh)->int2_mean_scale);
  EXPECT_FALSE(broadcast_codec_config(flipped->mesh)->int2_mean_scale);
  auto flipped_back = parse_mesh_run_config(mesh_run_config_to_toml(flipped.value()), "effective.toml");
  ASSERT_TRUE(flipped_back.is_ok()) << flipped_back.status().message();
  EXPECT_EQ(flipped_back->mesh.int2_scale, "mean");
  EXPECT_EQ(flipped_back->mesh.broadcast_int2_scale, "absmax");
  auto back = parse_mesh_run_config(mesh_run_config_to_toml(split.value()), "effective.toml");
  ASSERT_TRUE(back.is_ok()) << back.status().message();
  EXPECT_EQ(back->mesh.broadcast_codec, "int8");

  auto bad = parse_mesh_run_config(kRun, "run.toml", {"--mesh.broadcast_codec=int3"});
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("[mesh] broadcast_codec must be int8, int4, int2, fp32"), std::string::npos)
      << bad.status().message();
}

}  // namespace
}  // namespace meshrl::mesh
