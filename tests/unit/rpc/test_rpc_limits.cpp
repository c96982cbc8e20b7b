// What an admitted node can make the coordinator's server hold: every request field bounded
// (request_limits.h) and refused before the Coordinator sees it; WatchVersions only on a live
// session and capped per node, for the server and by its thread pool; uploads answered on their
// header before a payload byte is read, one at a time per node, with the bytes buffered across
// uploads capped.
//   OMP_NUM_THREADS=1 ./build/tests/test_rpc --gtest_filter='RpcLimits*'
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "rpc/request_limits.h"
#include "support/loopback_coordinator.h"

namespace meshrl::rpc {
namespace {

namespace fs = std::filesystem;

int thread_count() {
  int n = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator("/proc/self/task")) ++n;
  return n;
}

void set_deadline(grpc::ClientContext& ctx, double seconds) {
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000)));
}

bool contains(const std::string& text, const std::string& needle) { return text.find(needle) != std::string::npos; }

// ---------------------------------------------------------------------------------------------
// The checks alone, without gRPC.

TEST(RpcLimitsCheck, EveryStringOfAJoinIsBoundedAndTheRefusalNamesFieldLimitAndSize) {
  v1::JoinRequest j;
  j.set_protocol_version(mesh::kProtocolVersion);
  j.set_name("paris");
  j.set_device("cuda:0");
  j.set_run_id("0123456789abcdef");
  j.set_model_config_hash(std::string(64, 'f'));
  j.set_signing_key(std::string(32, '\x01'));
  EXPECT_EQ(check_request(j), "");

  auto big_device = j;
  big_device.set_device(std::string(3 << 20, 'x'));
  EXPECT_EQ(check_request(big_device), "JoinRequest.device is 3145728 bytes, the limit is 32");

  auto long_name = j;
  long_name.set_name(std::string(65, 'a'));
  EXPECT_EQ(check_request(long_name), "JoinRequest.name is 65 bytes, the limit is 64");
  long_name.set_name(std::string(64, 'a'));
  EXPECT_EQ(check_request(long_name), "");

  for (const char* field : {"run_id", "model_config_hash", "signing_key"}) {
    auto m = j;
    const auto* f = m.GetDescriptor()->FindFieldByName(field);
    m.GetReflection()->SetString(&m, f, std::string(1 << 20, 'z'));
    const std::string why = check_request(m);
    EXPECT_TRUE(contains(why, std::string("JoinRequest.") + field + " is 1048576 bytes, the limit is " +
                                  std::to_string(field_byte_limit(field))))
        << why;
  }
}

TEST(RpcLimitsCheck, NestedAndRepeatedFieldsAreBoundedWithTheirPath) {
  v1::HeartbeatRequest hb;
  hb.set_name("paris");
  hb.mutable_progress()->set_hash(std::string(1 << 20, '0'));
  EXPECT_EQ(check_request(hb), "HeartbeatRequest.progress.hash is 1048576 bytes, the limit is 128");

  v1::UpdateHeader h;
  h.set_name("paris");
  h.set_signature(std::string(64, 's'));
  h.set_payload_hash(std::string(32, 'p'));
  EXPECT_EQ(check_request(h), "");
  h.mutable_stats()->set_scored_digest(std::string(65, 'd'));
  EXPECT_EQ(check_request(h), "UpdateHeader.stats.scored_digest is 65 bytes, the limit is 64");

  v1::AuditAnswer a;
  a.set_name("paris");
  for (int i = 0; i < 3; ++i) {
    v1::ScoredRollout* r = a.add_rollouts();
    r->set_prompt_id(i);
    r->set_completion_hash(std::string(32, 'h'));
  }
  a.mutable_rollouts(1)->set_completion(std::string(kMaxCompletionBytes, 'c'));
  RequestLimits three{.max_audit_rollouts = 3};
  EXPECT_EQ(check_request(a, three), "");
  a.mutable_rollouts(1)->set_completion(std::string(kMaxCompletionBytes + 1, 'c'));
  EXPECT_EQ(check_request(a, three), "AuditAnswer.rollouts[1].completion is 16385 bytes, the limit is 16384");
  a.mutable_rollouts(1)->clear_completion();
  RequestLimits two{.max_audit_rollouts = 2};
  EXPECT_EQ(check_request(a, two), "AuditAnswer.rollouts has 3 elements, the limit is 2");
}

// A field this build does not know is kept by protobuf (and would be copied wherever the message
// is): more than a few bytes of them is refused.
TEST(RpcLimitsCheck, FieldsThisBuildDoesNotKnowAreBoundedToo) {
  v1::WatchRequest w;
  w.set_name("paris");
  std::string wire = w.SerializeAsString();
  // Field 99, length-delimited (tag (99 << 3) | 2 = 794 = varint 9a 06), 1024 bytes (varint 80 08).
  wire += std::string("\x9a\x06\x80\x08", 4) + std::string(1024, 'u');
  v1::WatchRequest parsed;
  ASSERT_TRUE(parsed.ParseFromString(wire));
  EXPECT_EQ(parsed.name(), "paris");
  const std::string why = check_request(parsed);
  EXPECT_TRUE(contains(why, "WatchRequest carries 1028 bytes of fields this build does not know, the limit is 256")) << why;
}

TEST(RpcLimitsCheck, EveryFieldNotListedGetsTheDefaultBound) {
  EXPECT_EQ(field_byte_limit("a_field_added_later"), kMaxOtherFieldBytes);
  EXPECT_EQ(field_byte_limit("completion"), kMaxCompletionBytes);
  EXPECT_EQ(field_byte_limit("name"), kMaxNameBytes);
}

// ---------------------------------------------------------------------------------------------
// Over real gRPC on loopback.

class RpcLimits : public test_support::LoopbackCoordinator {};

// Three 3 MiB `device` strings used to grow the ledger by 24 MiB. Each request type with an
// oversized field is refused (INVALID_ARGUMENT naming the field) and nothing of it is recorded.
TEST_F(RpcLimits, OversizedStringsAreRefusedBeforeTheCoordinatorSeesThem) {
  for (int i = 0; i < 3; ++i) {
    auto req = hello("paris");
    req.set_device(std::string(3 << 20, 'x'));
    grpc::ClientContext ctx;
    set_deadline(ctx, 10);
    v1::JoinReply reply;
    const grpc::Status s = stub_->Join(&ctx, req, &reply);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
    EXPECT_EQ(s.error_message(), "JoinRequest.device is 3145728 bytes, the limit is 32");
  }
  EXPECT_TRUE(coord_->store().ledger().node_events().empty());
  EXPECT_TRUE(coord_->nodes().empty());

  auto j = join("paris");
  ASSERT_TRUE(j.accepted()) << j.reason();
  {
    v1::HeartbeatRequest hb;
    hb.set_name("paris");
    hb.set_session(j.session());
    hb.mutable_progress()->set_hash(std::string(1 << 20, '0'));
    grpc::ClientContext ctx;
    set_deadline(ctx, 10);
    v1::HeartbeatReply reply;
    const grpc::Status s = stub_->Heartbeat(&ctx, hb, &reply);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_TRUE(contains(s.error_message(), "HeartbeatRequest.progress.hash is 1048576 bytes")) << s.error_message();
    EXPECT_TRUE(coord_->nodes().at("paris").last_progress.hash().empty());
  }
  {
    v1::AuditAnswer a;
    a.set_name("paris");
    a.set_session(j.session());
    a.add_rollouts()->set_completion(std::string(20000, 'c'));
    grpc::ClientContext ctx;
    set_deadline(ctx, 10);
    v1::AuditVerdict verdict;
    const grpc::Status s = stub_->AnswerAudit(&ctx, a, &verdict);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_TRUE(contains(s.error_message(), "AuditAnswer.rollouts[0].completion is 20000 bytes, the limit is 16384")) << s.error_message();
  }
  {
    v1::WatchRequest w;
    w.set_name(std::string(1000, 'n'));
    w.set_session(j.session());
    grpc::ClientContext ctx;
    set_deadline(ctx, 10);
    auto reader = stub_->WatchVersions(&ctx, w);
    v1::VersionAnnouncement a;
    EXPECT_FALSE(reader->Read(&a));
    const grpc::Status s = reader->Finish();
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_TRUE(contains(s.error_message(), "WatchRequest.name is 1000 bytes, the limit is 64")) << s.error_message();
  }
  {
    v1::UpdateHeader h = header(j, "paris", 0, 1, 100);
    h.set_run_id(std::string(1 << 20, 'r'));
    grpc::ClientContext ctx;
    set_deadline(ctx, 10);
    v1::SubmitReply reply;
    auto writer = stub_->SubmitUpdate(&ctx, &reply);
    v1::UpdateChunk c;
    *c.mutable_header() = h;
    writer->Write(c);
    const grpc::Status s = writer->Finish();
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_TRUE(contains(s.error_message(), "UpdateHeader.run_id is 1048576 bytes, the limit is 64")) << s.error_message();
  }
  // Only paris's own join is in the ledger, and it is small.
  const auto events = coord_->store().ledger().node_events();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_LT(events[0].detail.size(), 1024u);
}

// Forty streams on a made-up session used to hold forty server threads. They are refused at once
// ("not joined", the node rejoins), and the process gains no thread per stream.
TEST_F(RpcLimits, WatchOnAMadeUpSessionIsRefusedAndAFloodHoldsNoThreads) {
  auto j = join("paris");
  ASSERT_TRUE(j.accepted()) << j.reason();
  // Warm the channel (connection and gRPC's own threads) before counting.
  {
    v1::HeartbeatRequest hb;
    hb.set_name("paris");
    hb.set_session(j.session());
    ASSERT_TRUE(client_->heartbeat(hb).value().ok());
    grpc::ClientContext ctx;
    set_deadline(ctx, 10);
    v1::HeartbeatReply r;
    ASSERT_TRUE(stub_->Heartbeat(&ctx, hb, &r).ok());
  }
  const int before = thread_count();
  constexpr int kStreams = 40;
  std::vector<std::unique_ptr<grpc::ClientContext>> ctxs;
  std::vector<std::unique_ptr<grpc::ClientReader<v1::VersionAnnouncement>>> readers;
  for (int i = 0; i < kStreams; ++i) {
    v1::WatchRequest w;
    w.set_name("paris");
    w.set_session(j.session() + 2 + 2 * i);  // sessions are odd: never paris's
    ctxs.push_back(std::make_unique<grpc::ClientContext>());
    set_deadline(*ctxs.back(), 5);
    readers.push_back(stub_->WatchVersions(ctxs.back().get(), w));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const int during = thread_count();
  EXPECT_LT(during - before, 10) << before << " threads before the flood, " << during << " during it";
  for (auto& r : readers) {
    v1::VersionAnnouncement a;
    EXPECT_FALSE(r->Read(&a));
    const grpc::Status s = r->Finish();
    EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << s.error_message();
    EXPECT_TRUE(mesh::is_not_joined(s.error_message())) << s.error_message();
  }
  EXPECT_EQ(server_->watch_streams(), 0);
}

// A node's live session holds at most two streams, and all nodes together max_watch_streams;
// a stream that ends frees its slot.
TEST_F(RpcLimits, WatchStreamsAreCappedPerNodeAndForTheServer) {
  ServerOptions so;
  so.max_watch_streams_per_node = 2;
  so.max_watch_streams = 3;
  start_server(so);
  auto paris = join("paris");
  auto zurich = join("zurich");
  ASSERT_TRUE(paris.accepted() && zurich.accepted());

  struct Stream {
    std::unique_ptr<grpc::ClientContext> ctx = std::make_unique<grpc::ClientContext>();
    std::unique_ptr<grpc::ClientReader<v1::VersionAnnouncement>> reader;
    bool open = false;  // got the current version announced
  };
  auto watch = [&](const v1::JoinReply& j, const std::string& name) {
    Stream st;
    set_deadline(*st.ctx, 10);
    v1::WatchRequest w;
    w.set_name(name);
    w.set_session(j.session());
    st.reader = stub_->WatchVersions(st.ctx.get(), w);
    v1::VersionAnnouncement a;
    st.open = st.reader->Read(&a);
    return st;
  };
  auto refusal = [](Stream& st) {
    EXPECT_FALSE(st.open);
    const grpc::Status s = st.reader->Finish();
    EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
    return s.error_message();
  };
  auto close = [](Stream& st) {
    st.ctx->TryCancel();
    (void)st.reader->Finish();
  };

  Stream p1 = watch(paris, "paris"), p2 = watch(paris, "paris");
  EXPECT_TRUE(p1.open && p2.open);
  Stream p3 = watch(paris, "paris");
  EXPECT_EQ(refusal(p3), "'paris' already has 2 WatchVersions stream(s) open, the limit per node is 2; wait for one to end");
  Stream z1 = watch(zurich, "zurich");
  EXPECT_TRUE(z1.open);
  EXPECT_EQ(server_->watch_streams(), 3);
  Stream z2 = watch(zurich, "zurich");
  EXPECT_TRUE(contains(refusal(z2), "the coordinator has 3 WatchVersions stream(s) open, its limit for all nodes"));

  close(p1);
  for (int i = 0; i < 100 && server_->watch_streams() > 2; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(server_->watch_streams(), 2);
  Stream z3 = watch(zurich, "zurich");
  EXPECT_TRUE(z3.open);
  close(p2);
  close(z1);
  close(z3);
}

// Beyond the thread pool gRPC answers RESOURCE_EXHAUSTED itself: many nodes' streams do not grow
// the server past max_threads.
TEST_F(RpcLimits, TheServersThreadsAreBoundedWhateverTheNodesOpen) {
  ServerOptions so;
  so.max_threads = 8;
  start_server(so);
  constexpr int kNodes = 14;
  std::vector<v1::JoinReply> joins;
  for (int i = 0; i < kNodes; ++i) {
    joins.push_back(join("n" + std::to_string(i)));
    ASSERT_TRUE(joins.back().accepted()) << joins.back().reason();
  }
  const int before = thread_count();
  std::vector<std::unique_ptr<grpc::ClientContext>> ctxs;
  std::vector<std::unique_ptr<grpc::ClientReader<v1::VersionAnnouncement>>> readers;
  int open = 0, exhausted = 0;
  for (int i = 0; i < kNodes; ++i) {
    v1::WatchRequest w;
    w.set_name("n" + std::to_string(i));
    w.set_session(joins[i].session());
    ctxs.push_back(std::make_unique<grpc::ClientContext>());
    set_deadline(*ctxs.back(), 10);
    readers.push_back(stub_->WatchVersions(ctxs.back().get(), w));
    v1::VersionAnnouncement a;
    if (readers.back()->Read(&a)) {
      ++open;
    } else {
      const grpc::Status s = readers.back()->Finish();
      exhausted += s.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED;
      readers.back().reset();
    }
  }
  const int during = thread_count();
  EXPECT_GT(exhausted, 0) << open << " streams open";
  EXPECT_LE(open, so.max_threads);
  EXPECT_LE(during - before, so.max_threads) << before << " threads before, " << during << " with " << open << " streams open";
  for (size_t i = 0; i < readers.size(); ++i)
    if (readers[i]) {
      ctxs[i]->TryCancel();
      (void)readers[i]->Finish();
    }
}

// An upload on a made-up session, unsigned, of another run or declaring more than the run allows
// is answered on its header alone: the client has sent no payload and has not closed its side,
// and the reply still comes (before, the server waited for the payload it meant to buffer).
TEST_F(RpcLimits, UploadsAreAnsweredOnTheirHeaderBeforeAnyPayloadIsRead) {
  auto j = join("paris");
  ASSERT_TRUE(j.accepted()) << j.reason();
  auto header_only = [&](const v1::UpdateHeader& h) {
    grpc::ClientContext ctx;
    set_deadline(ctx, 5);
    v1::SubmitReply reply;
    auto writer = stub_->SubmitUpdate(&ctx, &reply);
    v1::UpdateChunk c;
    *c.mutable_header() = h;
    EXPECT_TRUE(writer->Write(c));
    const grpc::Status s = writer->Finish();  // no payload, no WritesDone
    EXPECT_TRUE(s.ok()) << "grpc code " << s.error_code() << ": " << s.error_message();
    EXPECT_FALSE(reply.accepted());
    return reply;
  };
  const uint64_t big = coord_->max_update_bytes();

  v1::UpdateHeader sessionless = header(j, "paris", 0, 1, big);
  sessionless.set_session(j.session() + 2);
  sessionless.set_run_id(coord_->run_id());
  sessionless.set_signature(std::string(64, 's'));
  EXPECT_TRUE(mesh::is_not_joined(header_only(sessionless).reason()));

  v1::UpdateHeader unsigned_header = header(j, "paris", 0, 2, big);
  unsigned_header.set_run_id(coord_->run_id());
  EXPECT_EQ(header_only(unsigned_header).code(), "bad_signature");

  v1::UpdateHeader foreign = header(j, "paris", 0, 3, big);
  foreign.set_run_id("0123456789abcdef");
  foreign.set_signature(std::string(64, 's'));
  EXPECT_EQ(header_only(foreign).code(), "wrong_run");

  v1::UpdateHeader too_big = header(j, "paris", 0, 4, big + 1);
  too_big.set_run_id(coord_->run_id());
  too_big.set_signature(std::string(64, 's'));
  const v1::SubmitReply r = header_only(too_big);
  EXPECT_EQ(r.code(), "size");
  EXPECT_TRUE(contains(r.reason(), "declared " + std::to_string(big + 1) + " bytes")) << r.reason();

  EXPECT_EQ(coord_->bytes_up(), 0u);
  EXPECT_EQ(server_->upload_bytes_in_flight(), 0u);
  EXPECT_TRUE(coord_->store().ledger().updates().empty());
}

// One upload at a time per node, and the payload bytes buffered across all uploads capped: here
// room for one update. Both refusals are RESOURCE_EXHAUSTED (the node backs off and retries), and
// the room is there again once the upload holding it is answered.
TEST_F(RpcLimits, OneUploadPerNodeAndTheBytesInFlightAreCapped) {
  auto paris = join("paris");
  auto zurich = join("zurich");
  ASSERT_TRUE(paris.accepted() && zurich.accepted());
  const std::string payload = zero_update(paris.session(), "paris", 0);
  ServerOptions so;
  so.upload_bytes_in_flight = payload.size() + 1 + 16;
  start_server(so);

  struct Upload {
    std::unique_ptr<grpc::ClientContext> ctx = std::make_unique<grpc::ClientContext>();
    v1::SubmitReply reply;
    std::unique_ptr<grpc::ClientWriter<v1::UpdateChunk>> writer;
  };
  auto open = [&](const v1::UpdateHeader& h) {
    auto u = std::make_unique<Upload>();
    set_deadline(*u->ctx, 10);
    u->writer = stub_->SubmitUpdate(u->ctx.get(), &u->reply);
    v1::UpdateChunk c;
    *c.mutable_header() = h;
    u->writer->Write(c);
    return u;
  };
  auto finish = [&](Upload& u, bool with_payload) {
    if (with_payload) {
      v1::UpdateChunk d;
      d.set_data(payload);
      u.writer->Write(d);
      u.writer->WritesDone();
    }
    return u.writer->Finish();
  };

  auto held = open(signed_header(paris, "paris", 0, 10, payload));
  for (int i = 0; i < 250 && server_->upload_bytes_in_flight() == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(server_->upload_bytes_in_flight(), payload.size() + 1);

  auto second = open(signed_header(paris, "paris", 0, 11, payload));
  grpc::Status s = finish(*second, false);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
  EXPECT_EQ(s.error_message(), "'paris' already has 1 upload stream(s) open, the limit per node is 1; wait for one to end");

  auto other = open(signed_header(zurich, "zurich", 0, 20, payload));
  s = finish(*other, false);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
  EXPECT_TRUE(contains(s.error_message(), "payload bytes the coordinator buffers at once, this one needs " +
                                              std::to_string(payload.size() + 1)))
      << s.error_message();

  s = finish(*held, true);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_TRUE(held->reply.accepted()) << held->reply.reason();
  EXPECT_EQ(server_->upload_bytes_in_flight(), 0u);
  EXPECT_EQ(coord_->bytes_up(), payload.size());

  auto retry = open(signed_header(zurich, "zurich", 0, 21, payload));
  s = finish(*retry, true);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_TRUE(retry->reply.accepted()) << retry->reply.reason();
}

}  // namespace
}  // namespace meshrl::rpc
