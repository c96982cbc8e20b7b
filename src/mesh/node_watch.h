// NodeWatch: a node's two background threads while it trains. Heartbeats renew its lease every
// heartbeat_s and carry its progress (node_tally.h); the watch follows the coordinator's version
// announcements (WatchVersions), which the training loops read (announced, wait_for_version), and
// joins again (node_session.h) when the coordinator answers the watch "not joined" (it restarted,
// or the lease expired), or no announcement would ever reach the node again.
//
// Threads: announced and wait_for_version are safe from any thread. Knows nothing about weights,
// codecs or training.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

#include "core/status.h"
#include "mesh/node_session.h"
#include "mesh/node_tally.h"

namespace meshrl::mesh {

// The newest version the coordinator announced, and whether the run is finished.
struct Announcement {
  int64_t version = -1;
  std::string hash;
  bool finished = false;
};

class NodeWatch {
 public:
  NodeWatch(NodeSession& session, NodeTally& tally) : session_(session), tally_(tally) {}
  ~NodeWatch();  // stop()

  // Starts both threads, from the join's manifest (its version is the first announcement).
  void start(const v1::Manifest& joined, double heartbeat_s);
  // Stops the node's session (request_stop) and both threads, and wakes every wait.
  void stop();
  Announcement announced() const;
  // Blocks until a version newer than `base` is announced, the run finishes, or the node stops;
  // fails after give_up_s without contact.
  Status wait_for_version(int64_t base);

 private:
  void heartbeat_loop();
  void watch_loop();

  NodeSession& session_;
  NodeTally& tally_;
  mutable std::mutex mu_;  // the announcement, and the condition the loops and waits sleep on
  std::condition_variable cv_;
  Announcement ann_;
  double heartbeat_s_ = 1;
  std::thread heartbeat_, watcher_;
};

}  // namespace meshrl::mesh
