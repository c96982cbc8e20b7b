// The HTTP server on loopback, without a mesh: /metrics, /api/state and the dashboard's assets
// served from a snapshot, and answers only to its own Host names.
//   build/tests/test_web --gtest_filter='HttpServer*'
#include <gtest/gtest.h>
#include <httplib.h>

#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "support/loopback_peers.h"
#include "two_round_snapshot.h"
#include "web/embedded_assets.h"
#include "web/http_server.h"
#include "web/prometheus_text.h"
#include "web/state_json.h"

namespace meshrl::web {
namespace {

using testing::two_round_snapshot;

TEST(HttpServer, ServesMetricsStateAndAssetsOnLoopback) {
  int calls = 0;
  auto server = HttpServer::start({}, [&] {
                  ++calls;
                  return two_round_snapshot();
                }).value();
  ASSERT_GT(server->port(), 0);
  EXPECT_EQ(server->url(), "http://127.0.0.1:" + std::to_string(server->port()) + "/");
  httplib::Client c("127.0.0.1", server->port());
  auto m = c.Get("/metrics");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->status, 200);
  EXPECT_EQ(m->get_header_value("Content-Type"), kPrometheusContentType);
  EXPECT_NE(m->body.find("meshrl_policy_version 2\n"), std::string::npos);
  auto s = c.Get("/api/state");
  ASSERT_TRUE(s);
  const auto j = nlohmann::json::parse(s->body);
  EXPECT_EQ(j["version"], 2);
  EXPECT_EQ(j["nodes"].size(), 2u);
  auto page = c.Get("/");
  ASSERT_TRUE(page);
  EXPECT_NE(page->body.find("dashboard.js"), std::string::npos);
  auto js = c.Get("/assets/uPlot.iife.min.js");
  ASSERT_TRUE(js);
  EXPECT_EQ(js->status, 200);
  EXPECT_EQ(js->body.size(), find_asset("uPlot.iife.min.js")->size);
  auto missing = c.Get("/assets/nope.js");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);
  EXPECT_EQ(calls, 2);
  server->stop();
}

// One request written by hand, so that the Host header (or its absence) is exactly as given.
// Returns the status code, 0 when nothing came back.
int raw_get(int port, const std::string& request) {
  const int fd = test_support::connect_loopback(static_cast<uint16_t>(port));
  if (fd < 0) return 0;
  test_support::send_all(fd, request.data(), request.size());
  const std::vector<char> reply = test_support::recv_until_eof(fd);
  ::close(fd);
  int status = 0;
  std::sscanf(std::string(reply.begin(), reply.end()).c_str(), "HTTP/1.%*d %d", &status);
  return status;
}

std::string get_with_host(const std::string& host) {
  return "GET /api/state HTTP/1.1\r\nHost: " + host + "\r\nConnection: close\r\n\r\n";
}

// A page on evil.example whose name an attacker points at 127.0.0.1 (DNS rebinding) sends
// Host: evil.example; the dashboard must not answer it.
TEST(HttpServer, RefusesAHostHeaderThatIsNotItsAddress) {
  HttpOptions o;
  o.hosts = {"coord.example.org"};
  auto server = HttpServer::start(o, [] { return two_round_snapshot(); }).value();
  const int port = server->port();
  const std::string p = ":" + std::to_string(port);
  EXPECT_EQ(raw_get(port, get_with_host("evil.example" + p)), 403);
  EXPECT_EQ(raw_get(port, get_with_host("evil.example")), 403);
  EXPECT_EQ(raw_get(port, get_with_host("127.0.0.1.evil.example" + p)), 403);
  EXPECT_EQ(raw_get(port, get_with_host("127.0.0.1" + p)), 200);
  EXPECT_EQ(raw_get(port, get_with_host("localhost" + p)), 200);
  EXPECT_EQ(raw_get(port, get_with_host("LocalHost." + p)), 200);
  EXPECT_EQ(raw_get(port, get_with_host("[::1]" + p)), 200);
  EXPECT_EQ(raw_get(port, get_with_host("localhost:9000")), 200);  // an ssh -L tunnel's port
  EXPECT_EQ(raw_get(port, get_with_host("coord.example.org")), 200);  // named by the operator
  EXPECT_EQ(raw_get(port, "GET /metrics HTTP/1.0\r\n\r\n"), 200);  // no Host: not from a browser
  EXPECT_EQ(raw_get(port, "GET /metrics HTTP/1.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n"), 403);
  httplib::Client c("127.0.0.1", port);
  auto refused = c.Get("/", {{"Host", "evil.example"}});
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 403);
  EXPECT_NE(refused->body.find("--http-host evil.example"), std::string::npos) << refused->body;
}

TEST(HttpServer, HostAllowedByBindAddress) {
  HttpOptions loop;  // 127.0.0.1
  EXPECT_TRUE(host_allowed(loop, "127.0.0.1:8080"));
  EXPECT_FALSE(host_allowed(loop, "10.1.2.3:8080"));
  EXPECT_FALSE(host_allowed(loop, "attacker.example:8080"));
  HttpOptions any;
  any.bind = "0.0.0.0";
  EXPECT_TRUE(host_allowed(any, "10.1.2.3:8080"));  // an address literal cannot be rebound
  EXPECT_TRUE(host_allowed(any, "[fe80::1]:8080"));
  EXPECT_TRUE(host_allowed(any, "localhost"));
  EXPECT_FALSE(host_allowed(any, "attacker.example"));
  any.hosts = {"Gpu-Box.lan"};
  EXPECT_TRUE(host_allowed(any, "gpu-box.lan:8080"));
  HttpOptions lan;
  lan.bind = "10.0.0.5";
  EXPECT_TRUE(host_allowed(lan, "10.0.0.5:8080"));
  EXPECT_FALSE(host_allowed(lan, "127.0.0.1:8080"));
  EXPECT_FALSE(host_allowed(lan, "localhost:8080"));
  HttpOptions v6;
  v6.bind = "::1";
  EXPECT_TRUE(host_allowed(v6, "[::1]:8080"));
}

// Ledger texts hold whatever bytes a node sent; invalid UTF-8 must not turn /api/state into a 500.
TEST(HttpServer, StateWithInvalidUtf8StillServes) {
  auto server = HttpServer::start({}, [] {
                  RunSnapshot s = two_round_snapshot();
                  s.events.push_back({1.0, "paris", "join", "device \xff\xfe gpu"});
                  return s;
                }).value();
  httplib::Client c("127.0.0.1", server->port());
  auto r = c.Get("/api/state");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(nlohmann::json::parse(r->body)["events"][0]["event"], "join");
}

TEST(HttpServer, RefusesATakenPort) {
  auto first = HttpServer::start({}, [] { return RunSnapshot{}; }).value();
  HttpOptions o;
  o.port = first->port();
  auto second = HttpServer::start(o, [] { return RunSnapshot{}; });
  EXPECT_FALSE(second.is_ok());
}

}  // namespace
}  // namespace meshrl::web
