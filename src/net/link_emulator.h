// The WAN link emulator: a named set of emulated links (link_proxy.h), one per node city, each
// forwarding to the same upstream (the coordinator). The demo and the tests start it in-process;
// `meshrl link-emulator` runs it as its own process. Knows nothing about the topology file
// (topology.h turns one into LinkSpecs) or about the protocol carried.
//
//   auto emu = net::LinkEmulator::start(net::link_specs(topology, upstream, 0).value()).value();
//   node_connects_to("127.0.0.1:" + std::to_string(emu->port("toronto")));
//   emu->set_partitioned("toronto", true);   // toronto drops off the WAN
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "net/link_proxy.h"

namespace meshrl::net {

class LinkEmulator {
 public:
  // Starts one proxy per spec. Fails (and starts nothing) on an empty or duplicate name or a link
  // that cannot bind its port or resolve its upstream; the message names the link.
  static Result<std::unique_ptr<LinkEmulator>> start(const std::vector<LinkSpec>& specs);
  ~LinkEmulator();  // stop()

  // The links' names, in the order given to start().
  std::vector<std::string> names() const;
  bool has(const std::string& name) const;
  // The following take a name start() was given; any other is a caller bug (MESHRL_CHECK).
  uint16_t port(const std::string& name) const;
  const LinkSpec& spec(const std::string& name) const;
  void set_partitioned(const std::string& name, bool on);
  LinkStats stats(const std::string& name) const;
  // Stops every link (resets their connections, joins their threads). Idempotent.
  void stop();

 private:
  LinkEmulator() = default;
  LinkProxy& link(const std::string& name) const;
  std::vector<std::unique_ptr<LinkProxy>> links_;
};

}  // namespace meshrl::net
