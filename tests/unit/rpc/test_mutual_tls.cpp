// Mutual TLS with a run CA over real gRPC on loopback: a connection without
// a client certificate, with one of another CA, or of a revoked node is refused before any handler
// runs (nothing reaches the ledger); a good certificate works; a certificate whose name differs
// from the node name a request claims is refused; a revocation takes effect on a running server;
// plaintext is refused off loopback.
//   build/tests/test_rpc --gtest_filter='MutualTls*'
#include <gtest/gtest.h>

#include <filesystem>

#include "mesh/coordinator.h"
#include "mesh/protocol.h"
#include "rpc/coordinator_service.h"
#include "rpc/grpc_client.h"
#include "rpc/peer_identity.h"
#include "trust/run_ca.h"

namespace meshrl::rpc {
namespace {

namespace fs = std::filesystem;
namespace v1 = ::meshrl::v1;

const char* kTlsRun = R"(
[model]
init = "tiny"
[sft]
steps = 0
[mesh]
rounds = 3
inner_steps = 1
lease_s = 30
)";

class MutualTls : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = fs::temp_directory_path() / ("meshrl-mtls-" + std::to_string(::getpid()));
    fs::remove_all(root_);
    ca_ = root_ / "ca";
    ASSERT_TRUE(trust::init_run_ca(ca_, {}).is_ok());
    for (const char* n : {"paris", "zurich", "dublin", "toronto"}) ASSERT_TRUE(trust::issue_node_identity(ca_, n, {}).is_ok());
    ASSERT_TRUE(trust::revoke_node(ca_, "dublin").is_ok());
    // Another run's CA, with a node of the same name.
    ASSERT_TRUE(trust::init_run_ca(root_ / "other-ca", {}).is_ok());
    ASSERT_TRUE(trust::issue_node_identity(root_ / "other-ca", "paris", {}).is_ok());

    mesh::CoordinatorOptions o;
    o.run_dir = root_ / "run";
    o.config = mesh::parse_mesh_run_config(kTlsRun, "test.toml").value();
    coord_ = mesh::Coordinator::start(o).value().release();
    ServerOptions so;
    so.insecure = false;
    so.ca_dir = ca_.string();
    server_ = CoordinatorServer::start(*coord_, so).value().release();
  }
  static void TearDownTestSuite() {
    delete server_;
    delete coord_;
    fs::remove_all(root_);
  }

  // A client presenting the identity folder `id` (empty: no client certificate at all).
  static std::unique_ptr<mesh::CoordinatorClient> client(const fs::path& id) {
    ChannelOptions co;
    co.target = "127.0.0.1:" + std::to_string(server_->port());
    co.insecure = false;
    co.ca_cert = (ca_ / "ca.pem").string();
    if (!id.empty()) {
      const auto f = trust::IdentityFiles::in(id);
      co.client_cert = f.cert.string();
      co.client_key = f.key.string();
    }
    return make_grpc_client(co).value();
  }
  static v1::JoinRequest hello(const std::string& name) {
    v1::JoinRequest r;
    r.set_protocol_version(mesh::kProtocolVersion);
    r.set_name(name);
    r.set_signing_key(std::string(32, 'k'));
    return r;
  }
  static int ledger_events_of(const std::string& node) {
    int n = 0;
    for (const auto& e : coord_->store().ledger().node_events()) n += e.node == node;
    return n;
  }

  static inline fs::path root_, ca_;
  static inline mesh::Coordinator* coord_ = nullptr;
  static inline CoordinatorServer* server_ = nullptr;
};

TEST_F(MutualTls, AGoodCertificateJoins) {
  auto c = client(ca_ / "nodes" / "paris");
  auto r = c->join(hello("paris"));
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_TRUE(r.value().accepted()) << r.value().reason();
  v1::HeartbeatRequest hb;
  hb.set_name("paris");
  hb.set_session(r.value().session());
  EXPECT_TRUE(c->heartbeat(hb).value().ok());
}

TEST_F(MutualTls, NoClientCertificateIsRefusedAtTheHandshake) {
  auto r = client({})->join(hello("toronto"));
  EXPECT_FALSE(r.is_ok());
  EXPECT_EQ(ledger_events_of("toronto"), 0);
}

TEST_F(MutualTls, AnotherCasCertificateIsRefusedAtTheHandshake) {
  auto r = client(root_ / "other-ca" / "nodes" / "paris")->join(hello("paris"));
  EXPECT_FALSE(r.is_ok());
}

TEST_F(MutualTls, ARevokedNodeIsRefusedBeforeAnyHandler) {
  auto r = client(ca_ / "nodes" / "dublin")->join(hello("dublin"));
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("revoked"), std::string::npos) << r.status().message();
  EXPECT_EQ(ledger_events_of("dublin"), 0);  // Join never ran: not even a refusal was recorded
}

TEST_F(MutualTls, ACertificateSpeakingForAnotherNodeIsRefused) {
  auto c = client(ca_ / "nodes" / "zurich");
  auto r = c->join(hello("toronto")).value();
  EXPECT_FALSE(r.accepted());
  EXPECT_NE(r.reason().find("authenticated as 'zurich'"), std::string::npos) << r.reason();
  v1::HeartbeatRequest hb;
  hb.set_name("toronto");
  EXPECT_FALSE(c->heartbeat(hb).is_ok());
  EXPECT_EQ(ledger_events_of("toronto"), 0);
}

TEST_F(MutualTls, RevokingARunningNodeCutsItOff) {
  auto c = client(ca_ / "nodes" / "toronto");
  auto j = c->join(hello("toronto"));
  ASSERT_TRUE(j.is_ok() && j.value().accepted());
  ASSERT_TRUE(trust::revoke_node(ca_, "toronto").is_ok());
  v1::HeartbeatRequest hb;
  hb.set_name("toronto");
  hb.set_session(j.value().session());
  auto r = c->heartbeat(hb);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("revoked"), std::string::npos) << r.status().message();
}

TEST(PlaintextPolicy, OnlyOnLoopback) {
  EXPECT_TRUE(is_loopback_target("127.0.0.1:50051"));
  EXPECT_TRUE(is_loopback_target("127.3.2.1:1"));
  EXPECT_TRUE(is_loopback_target("localhost:50051"));
  EXPECT_TRUE(is_loopback_target("[::1]:50051"));
  EXPECT_FALSE(is_loopback_target("0.0.0.0:50051"));
  EXPECT_FALSE(is_loopback_target("10.0.0.7:50051"));
  EXPECT_FALSE(is_loopback_target("coordinator.example.org:50051"));
  EXPECT_FALSE(is_loopback_target("[::]:50051"));
  ChannelOptions co;
  co.target = "10.0.0.7:50051";
  co.insecure = true;
  EXPECT_FALSE(make_grpc_client(co).is_ok());
}

}  // namespace
}  // namespace meshrl::rpc
