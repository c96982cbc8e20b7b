// A node's heartbeats and its watch on version announcements. See node_watch.h.
#include "mesh/node_watch.h"

#include <chrono>

namespace meshrl::mesh {

NodeWatch::~NodeWatch() { stop(); }

void NodeWatch::start(const v1::Manifest& joined, double heartbeat_s) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    ann_.version = joined.current_version();
    ann_.hash = joined.current_hash();
    ann_.finished = joined.finished();
  }
  heartbeat_s_ = heartbeat_s;
  heartbeat_ = std::thread([this] { heartbeat_loop(); });
  watcher_ = std::thread([this] { watch_loop(); });
}

void NodeWatch::stop() {
  session_.request_stop();
  {
    std::lock_guard<std::mutex> lk(mu_);  // a loop between its stopping() check and its wait sees the notify
  }
  cv_.notify_all();
  if (heartbeat_.joinable()) heartbeat_.join();
  if (watcher_.joinable()) watcher_.join();
}

Announcement NodeWatch::announced() const {
  std::lock_guard<std::mutex> lk(mu_);
  return ann_;
}

Status NodeWatch::wait_for_version(int64_t base) {
  std::unique_lock<std::mutex> lk(mu_);
  while (!(session_.stopping() || ann_.version > base || ann_.finished)) {
    cv_.wait_for(lk, std::chrono::seconds(1));
    const double give_up_s = session_.options().give_up_s;
    if (session_.seconds_without_contact() > give_up_s)
      return io_error("[node " + session_.name() + "] no contact with the coordinator for " +
                      std::to_string(static_cast<int>(give_up_s)) + " s");
  }
  return Status::ok();
}

void NodeWatch::heartbeat_loop() {
  while (!session_.stopping()) {
    {
      std::unique_lock<std::mutex> lk(mu_);
      cv_.wait_for(lk, std::chrono::duration<double>(heartbeat_s_), [this] { return session_.stopping(); });
    }
    if (session_.stopping()) break;
    v1::HeartbeatRequest req;
    req.set_name(session_.name());
    req.set_session(session_.session());
    *req.mutable_progress() = tally_.progress();
    auto r = session_.client().heartbeat(req);
    if (r.is_ok() && r.value().ok()) session_.mark_contact();
    if (r.is_ok() && r.value().finished()) cv_.notify_all();
  }
}

void NodeWatch::watch_loop() {
  while (!session_.stopping()) {
    const uint64_t used = session_.session();
    Status s = session_.client().watch(session_.name(), used, [this](const v1::VersionAnnouncement& a) {
      {
        std::lock_guard<std::mutex> lk(mu_);
        if (a.version() >= ann_.version) {
          ann_.version = a.version();
          ann_.hash = a.hash();
          ann_.finished = a.finished();
        }
      }
      cv_.notify_all();
      return !session_.stopping();
    });
    if (session_.stopping()) break;
    // The coordinator answers a watch on a session it does not know (it restarted, or our lease
    // expired) with "not joined": join again, or no announcement ever reaches this node.
    if (!s.is_ok() && s.message().find("not joined") != std::string::npos) {
      session_.log("watch: " + s.message());
      (void)session_.rejoin(used);
    }
    std::unique_lock<std::mutex> lk(mu_);
    cv_.wait_for(lk, std::chrono::milliseconds(s.is_ok() ? 100 : 500), [this] { return session_.stopping(); });
  }
}

}  // namespace meshrl::mesh
