// What a coordinator cannot make a node do (mesh/node_local_config.h, node.h download caps):
//   - a fake coordinator whose manifest asks for a command verifier (one that would create a
//     marker file) is refused by the node with a message naming --task.command.argv, and nothing
//     is run: the marker does not exist, no download was asked for, and the node left;
//   - a manifest asking for a jsonl path, or a model folder, the node was not given is refused;
//   - an endless download: a coordinator over real gRPC declaring 120 MiB of weights for the
//     tiny model (about 12 MiB) is refused at its first chunk, by the client alone and by a node.
//   build/tests/test_rpc --gtest_filter='NodeTrust*'
#include <gtest/gtest.h>

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <filesystem>
#include <fstream>

#include "mesh/node.h"
#include "mesh/policy_params.h"
#include "mesh/protocol.h"
#include "meshrl.grpc.pb.h"
#include "rollout/policy.h"
#include "rpc/grpc_client.h"
#include "support/temp_dir.h"

namespace meshrl::rpc {
namespace {

namespace fs = std::filesystem;
namespace v1 = ::meshrl::v1;

// A coordinator that accepts every join with the manifest it was given and records what the
// node asks for next; downloads are refused (a node that gets that far was not stopped).
class FakeCoordinator : public mesh::CoordinatorClient {
 public:
  explicit FakeCoordinator(v1::Manifest m) : manifest_(std::move(m)) {}

  Result<v1::JoinReply> join(const v1::JoinRequest&) override {
    v1::JoinReply r;
    r.set_accepted(true);
    r.set_session(7);
    r.set_protocol_version(mesh::kProtocolVersion);
    *r.mutable_manifest() = manifest_;
    return r;
  }
  Result<v1::HeartbeatReply> heartbeat(const v1::HeartbeatRequest&) override { return v1::HeartbeatReply(); }
  Result<v1::LeaveReply> leave(const v1::LeaveRequest&) override {
    ++leaves;
    return v1::LeaveReply();
  }
  Result<mesh::Download> download_weights(const std::string&, uint64_t, int64_t, uint64_t) override {
    ++downloads;
    return invalid_argument("fake: no weights");
  }
  Result<mesh::Download> download_base(const std::string&, uint64_t, uint64_t) override {
    ++downloads;
    return invalid_argument("fake: no base");
  }
  Result<mesh::Download> get_broadcast(const std::string&, uint64_t, int64_t, uint64_t) override {
    ++downloads;
    return invalid_argument("fake: no broadcast");
  }
  Result<v1::SubmitReply> submit(const v1::UpdateHeader&, const std::string&) override { return invalid_argument("fake"); }
  Status watch(const std::string&, uint64_t, const std::function<bool(const v1::VersionAnnouncement&)>&) override {
    return Status::ok();
  }
  Result<v1::AuditVerdict> answer_audit(const v1::AuditAnswer&) override { return invalid_argument("fake"); }

  std::atomic<int> downloads{0}, leaves{0};

 private:
  v1::Manifest manifest_;
};

// The tiny preset's manifest, as a coordinator of `run_toml` would send it.
v1::Manifest tiny_manifest(const std::string& run_toml) {
  auto p = rollout::load_policy("tiny", "cpu", 0).value();
  v1::Manifest m;
  m.set_run_id("run-under-test");
  m.set_model_spec("tiny");
  m.set_model_config_hash(mesh::model_config_hash(p.model->config()));
  m.set_tokenizer_hash(mesh::tokenizer_hash(*p.tokenizer));
  m.set_param_count(mesh::trainable_parameters(*p.model).numel());
  m.set_run_config_toml(run_toml);
  m.set_current_version(0);
  m.set_lease_seconds(30);
  return m;
}

mesh::NodeOptions node_options(const std::string& name) {
  mesh::NodeOptions o;
  o.name = name;
  o.give_up_s = 20;
  return o;
}

class NodeTrust : public ::testing::Test {
 protected:
  test_support::TempDir tmp_;
  const fs::path dir_ = tmp_.path();
};

TEST_F(NodeTrust, ACoordinatorAskingForACommandIsRefusedAndNothingRuns) {
  const fs::path marker = dir_ / "marker";
  const fs::path prompts = dir_ / "prompts.jsonl";
  std::ofstream(prompts) << "{\"prompt\": \"1+1=\", \"answer\": \"2\"}\n";
  const std::string run = "[task]\nkind = \"command\"\njsonl.path = \"" + prompts.string() +
                          "\"\ncommand.argv = [\"/bin/sh\", \"-c\", \"touch " + marker.string() + "\"]\n";
  FakeCoordinator coord(tiny_manifest(run));
  auto r = mesh::run_node(coord, node_options("paris"));
  ASSERT_FALSE(r.is_ok());
  const std::string& m = r.status().message();
  EXPECT_NE(m.find("--task.command.argv"), std::string::npos) << m;
  EXPECT_NE(m.find("kind = \"command\""), std::string::npos) << m;
  EXPECT_FALSE(fs::exists(marker)) << "the coordinator's argv ran on the node";
  EXPECT_EQ(coord.downloads.load(), 0);  // refused at setup, before any weights were asked for
  EXPECT_EQ(coord.leaves.load(), 1);     // and gave its place in the quorum back at once
}

TEST_F(NodeTrust, AJsonlPathTheNodeWasNotGivenIsRefused) {
  const fs::path secret = dir_ / "secret.jsonl";
  std::ofstream(secret) << "{\"prompt\": \"hunter2\", \"answer\": \"1\"}\n";
  FakeCoordinator coord(tiny_manifest("[task]\nkind = \"jsonl\"\njsonl.path = \"" + secret.string() + "\"\n"));
  auto r = mesh::run_node(coord, node_options("dublin"));
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("--task.jsonl.path"), std::string::npos) << r.status().message();
  EXPECT_EQ(coord.downloads.load(), 0);
}

TEST_F(NodeTrust, AModelFolderTheNodeWasNotGivenIsRefused) {
  v1::Manifest m = tiny_manifest("");
  m.set_model_spec((dir_ / "coordinator-model").string());
  FakeCoordinator coord(m);
  auto r = mesh::run_node(coord, node_options("dublin"));
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("--model"), std::string::npos) << r.status().message();
  EXPECT_EQ(coord.downloads.load(), 0);
}

// A coordinator over real gRPC whose weights never end: it declares 120 MiB and would stream
// them all. Join answers with `manifest`; every other call is unimplemented.
class EndlessWeights final : public v1::Coordinator::Service {
 public:
  explicit EndlessWeights(v1::Manifest m) : manifest_(std::move(m)) {}
  static constexpr uint64_t kDeclared = uint64_t{120} << 20;

  grpc::Status Join(grpc::ServerContext*, const v1::JoinRequest*, v1::JoinReply* r) override {
    r->set_accepted(true);
    r->set_session(7);
    r->set_protocol_version(mesh::kProtocolVersion);
    *r->mutable_manifest() = manifest_;
    return grpc::Status::OK;
  }
  grpc::Status Leave(grpc::ServerContext*, const v1::LeaveRequest*, v1::LeaveReply* r) override {
    r->set_ok(true);
    return grpc::Status::OK;
  }
  grpc::Status DownloadWeights(grpc::ServerContext* ctx, const v1::DownloadRequest* req, grpc::ServerWriter<v1::DataChunk>* w) override {
    v1::DataChunk c;
    c.set_version(req->version());
    c.set_total_bytes(kDeclared);
    c.set_data(std::string(mesh::kChunkBytes, '\0'));
    for (uint64_t off = req->offset(); off < kDeclared && !ctx->IsCancelled(); off += mesh::kChunkBytes) {
      c.set_offset(off);
      if (!w->Write(c)) break;
      ++chunks_written;
    }
    return grpc::Status::OK;
  }

  std::atomic<int> chunks_written{0};

 private:
  v1::Manifest manifest_;
};

struct EndlessServer {
  explicit EndlessServer(v1::Manifest m) : service(std::move(m)) {
    grpc::ServerBuilder b;
    b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    b.RegisterService(&service);
    server = b.BuildAndStart();
  }
  ~EndlessServer() {
    if (server) server->Shutdown();
  }
  std::unique_ptr<mesh::CoordinatorClient> client() {
    ChannelOptions co;
    co.target = "127.0.0.1:" + std::to_string(port);
    return make_grpc_client(co).value();
  }
  EndlessWeights service;
  int port = 0;
  std::unique_ptr<grpc::Server> server;
};

TEST_F(NodeTrust, TheClientRefusesADownloadDeclaringMoreThanItsCap) {
  EndlessServer s(v1::Manifest{});
  ASSERT_GT(s.port, 0);
  auto client = s.client();
  const uint64_t cap = uint64_t{12} << 20;
  auto d = client->download_weights("paris", 7, 0, cap);
  ASSERT_FALSE(d.is_ok());
  EXPECT_EQ(d.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(d.status().message().find("declares " + std::to_string(EndlessWeights::kDeclared) + " bytes, more than the " +
                                      std::to_string(cap)),
            std::string::npos)
      << d.status().message();
  auto b = client->download_base("paris", 7, cap);
  ASSERT_FALSE(b.is_ok());
  EXPECT_NE(b.status().message().find("more than the"), std::string::npos) << b.status().message();
  // Nothing was taken past the first chunk, and the stream was abandoned, not read to its end.
  s.server->Shutdown();  // waits for the handlers
  s.server.reset();
  EXPECT_LT(s.service.chunks_written.load(), 2 * 120);
}

TEST_F(NodeTrust, ANodeRefusesAnEndlessDownloadAtTheSizeItsShapesImply) {
  const v1::Manifest m = tiny_manifest("");
  const uint64_t weights_bytes = static_cast<uint64_t>(m.param_count()) * 4;
  ASSERT_LT(weights_bytes, EndlessWeights::kDeclared / 4);  // the tiny model is ~12 MiB
  EndlessServer s(m);
  auto client = s.client();
  auto r = mesh::run_node(*client, node_options("paris"));
  ASSERT_FALSE(r.is_ok());
  const std::string& msg = r.status().message();
  EXPECT_EQ(r.status().code(), StatusCode::kDataLoss) << msg;
  EXPECT_NE(msg.find("declares " + std::to_string(EndlessWeights::kDeclared) + " bytes"), std::string::npos) << msg;
  // The node's cap is the fp32 size of its shapes plus headers and zstd's worst case: well under
  // 1.01x here, so nowhere near what was declared.
  const size_t at = msg.find("more than the ");
  ASSERT_NE(at, std::string::npos) << msg;
  const uint64_t cap = std::stoull(msg.substr(at + 14));
  EXPECT_GE(cap, weights_bytes);
  EXPECT_LE(cap, weights_bytes + weights_bytes / 100);
}

}  // namespace
}  // namespace meshrl::rpc
