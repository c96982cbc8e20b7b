// A coordinator of the tiny preset behind its gRPC service on plaintext loopback, for tests that
// speak to it over real gRPC: the node's client (client_), a raw stub (stub_) for requests and
// call patterns no client would produce (a header without its payload, a stream left open), and
// helpers to join and to build a signed zero update. start_server() restarts the service with
// other ServerOptions over the same coordinator (sessions stay valid).
#pragma once

#include <gtest/gtest.h>
#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>

#include "meshrl.grpc.pb.h"
#include "mesh/codec.h"
#include "mesh/coordinator.h"
#include "mesh/protocol.h"
#include "mesh/update_signature.h"
#include "rpc/coordinator_service.h"
#include "rpc/grpc_client.h"
#include "trust/signing_key.h"

namespace meshrl::rpc {

// The tiny preset without a warm start; raw int8 payloads (zstd 0), one inner step per update.
inline const char* const kLoopbackRun = R"(
[model]
init = "tiny"
[sft]
steps = 0
[mesh]
rounds = 3
inner_steps = 1
codec = "int8"
zstd_level = 0
max_staleness = 0
lease_s = 30
)";

class LoopbackCoordinator : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("meshrl-loopback-" + std::to_string(::getpid()) + "-" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    mesh::CoordinatorOptions o;
    o.run_dir = dir_;
    o.config = mesh::parse_mesh_run_config(kLoopbackRun, "test.toml").value();
    coord_ = mesh::Coordinator::start(o).value();
    start_server({});
  }
  void TearDown() override {
    if (server_) server_->shutdown();
    if (coord_) coord_->stop();
    std::filesystem::remove_all(dir_);
  }

  void start_server(const ServerOptions& so) {
    if (server_) server_->shutdown();
    server_ = CoordinatorServer::start(*coord_, so).value();
    ChannelOptions co;
    co.target = "127.0.0.1:" + std::to_string(server_->port());
    client_ = make_grpc_client(co).value();
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(mesh::kMaxMessageBytes);
    args.SetMaxSendMessageSize(mesh::kMaxMessageBytes);
    stub_ = v1::Coordinator::NewStub(grpc::CreateCustomChannel(co.target, grpc::InsecureChannelCredentials(), args));
  }

  v1::JoinRequest hello(const std::string& name) const {
    v1::JoinRequest r;
    r.set_protocol_version(mesh::kProtocolVersion);
    r.set_name(name);
    r.set_device("cpu");
    r.set_threads(1);
    r.set_signing_key(key_.public_key());
    return r;
  }
  v1::JoinReply join(const std::string& name) { return client_->join(hello(name)).value(); }

  // A zero update in the run's layout, encoded with the run's codec.
  std::string zero_update(uint64_t session, const std::string& name, int64_t version) {
    auto d = client_->download_weights(name, session, version).value();
    mesh::NamedTensors w = mesh::decode_update(d.bytes, {}).value();
    for (auto& t : w.tensors) t = torch::zeros_like(t);
    mesh::CodecConfig cc;
    cc.zstd_level = 0;
    return mesh::make_codec(cc).value()->encode(w).value();
  }

  v1::UpdateHeader header(const v1::JoinReply& j, const std::string& name, int64_t base, int64_t seq, uint64_t bytes) const {
    v1::UpdateHeader h;
    h.set_protocol_version(mesh::kProtocolVersion);
    h.set_name(name);
    h.set_session(j.session());
    h.set_base_version(base);
    h.set_seq(seq);
    h.set_n_samples(8);
    h.set_declared_bytes(bytes);
    return h;
  }
  v1::UpdateHeader signed_header(const v1::JoinReply& j, const std::string& name, int64_t base, int64_t seq,
                                 const std::string& payload) const {
    v1::UpdateHeader h = header(j, name, base, seq, payload.size());
    mesh::sign_update(h, coord_->run_id(), payload, key_);
    return h;
  }

  const trust::SigningKey key_ = trust::SigningKey::generate();
  std::filesystem::path dir_;
  std::unique_ptr<mesh::Coordinator> coord_;
  std::unique_ptr<CoordinatorServer> server_;
  std::unique_ptr<mesh::CoordinatorClient> client_;
  std::unique_ptr<v1::Coordinator::Stub> stub_;
};

}  // namespace meshrl::rpc
