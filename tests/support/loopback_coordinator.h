// A coordinator behind its gRPC service on plaintext loopback, for tests that speak to it over real
// gRPC. LoopbackRun starts a mesh::Coordinator of a run file (kLoopbackRun unless given) in a fresh
// directory, its CoordinatorServer, the node's client (client_) and a raw stub (stub_) for requests
// and call patterns no client would produce (a header without its payload, a stream left open);
// helpers join and build (signed) zero updates in the run's layout. start_server() restarts the
// service with other ServerOptions over the same coordinator (sessions stay valid); restart()
// starts a new run in the same place with command-line overrides. Everything stops and the
// directory goes when the object does. LoopbackCoordinator is the gtest fixture of one.
//   #include "support/loopback_coordinator.h"
#pragma once

#include <gtest/gtest.h>
#include <grpcpp/grpcpp.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "meshrl.grpc.pb.h"
#include "mesh/codec.h"
#include "mesh/coordinator.h"
#include "mesh/protocol.h"
#include "mesh/update_signature.h"
#include "rpc/coordinator_service.h"
#include "rpc/grpc_client.h"
#include "support/temp_dir.h"
#include "trust/signing_key.h"

namespace meshrl::test_support {

// The tiny preset without a warm start; raw int8 payloads (zstd 0, so a test can corrupt them),
// one inner step per update, no staleness allowed.
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

class LoopbackRun {
 public:
  explicit LoopbackRun(std::string run_toml = kLoopbackRun, const std::vector<std::string>& overrides = {})
      : run_toml_(std::move(run_toml)) {
    start_coordinator(overrides);
  }
  ~LoopbackRun() { stop(); }
  LoopbackRun(const LoopbackRun&) = delete;
  LoopbackRun& operator=(const LoopbackRun&) = delete;

  // Replaces the service (other ServerOptions) over the same coordinator, and client_ and stub_.
  void start_server(const rpc::ServerOptions& so) {
    if (server_) server_->shutdown();
    server_ = rpc::CoordinatorServer::start(*coord_, so).value();
    rpc::ChannelOptions co;
    co.target = "127.0.0.1:" + std::to_string(server_->port());
    client_ = rpc::make_grpc_client(co).value();
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(mesh::kMaxMessageBytes);
    args.SetMaxSendMessageSize(mesh::kMaxMessageBytes);
    stub_ = v1::Coordinator::NewStub(grpc::CreateCustomChannel(co.target, grpc::InsecureChannelCredentials(), args));
  }

  // Stops everything and starts a fresh run of the same file with `overrides` in an empty run_dir_.
  void restart(const std::vector<std::string>& overrides) {
    stop();
    std::filesystem::remove_all(run_dir_);
    start_coordinator(overrides);
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

  // The weights of `version` as the client downloads them, in the run's layout.
  mesh::NamedTensors weights(uint64_t session, const std::string& name, int64_t version) {
    return mesh::decode_update(client_->download_weights(name, session, version).value().bytes, {}).value();
  }

  // A zero update in the run's layout, encoded as int8 without zstd.
  std::string zero_update(uint64_t session, const std::string& name, int64_t version) {
    mesh::NamedTensors w = weights(session, name, version);
    for (auto& t : w.tensors) t = torch::zeros_like(t);
    mesh::CodecConfig cc;
    cc.zstd_level = 0;
    return mesh::make_codec(cc).value()->encode(w).value();
  }

  // An unsigned header for `bytes` of payload, 8 samples.
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
  // The same header signed by key_ over this run's id and `payload`.
  v1::UpdateHeader signed_header(const v1::JoinReply& j, const std::string& name, int64_t base, int64_t seq,
                                 const std::string& payload) const {
    v1::UpdateHeader h = header(j, name, base, seq, payload.size());
    mesh::sign_update(h, coord_->run_id(), payload, key_);
    return h;
  }

  const trust::SigningKey key_ = trust::SigningKey::generate();
  TempDir tmp_{"meshrl-loopback"};
  const std::filesystem::path run_dir_ = tmp_.path() / "run";
  std::unique_ptr<mesh::Coordinator> coord_;
  std::unique_ptr<rpc::CoordinatorServer> server_;
  std::unique_ptr<mesh::CoordinatorClient> client_;
  std::unique_ptr<v1::Coordinator::Stub> stub_;

 private:
  void start_coordinator(const std::vector<std::string>& overrides) {
    mesh::CoordinatorOptions o;
    o.run_dir = run_dir_;
    o.config = mesh::parse_mesh_run_config(run_toml_, "test.toml", overrides).value();
    coord_ = mesh::Coordinator::start(o).value();
    start_server({});
  }
  void stop() {
    stub_.reset();
    client_.reset();
    if (server_) server_->shutdown();
    server_.reset();
    if (coord_) coord_->stop();
    coord_.reset();
  }

  std::string run_toml_;
};

// The fixture: one LoopbackRun per test, of kLoopbackRun unless a derived fixture passes another.
class LoopbackCoordinator : public ::testing::Test, public LoopbackRun {
 protected:
  explicit LoopbackCoordinator(std::string run_toml = kLoopbackRun) : LoopbackRun(std::move(run_toml)) {}
};

}  // namespace meshrl::test_support
