// Membership: leases, keys and node records. See membership.h.
#include "mesh/membership.h"

#include <cstdio>
#include <random>

#include "mesh/protocol.h"
#include "trust/signing_key.h"

namespace meshrl::mesh {

JoinDecision Membership::join(const v1::JoinRequest& req, const std::string& run_id, const std::string& model_config_hash, double now) {
  JoinDecision d;
  d.node = req.name().empty() ? "?" : req.name().substr(0, 64);
  // Before anything is checked: a node rejoining in a loop (or an impostor without TLS) cannot
  // grow the ledger faster than this.
  if (std::string busy = join_rate_.admit(d.node, now); !busy.empty()) {
    d.rate_limited = true;
    d.reason = "rate_limited: more than " + std::to_string(kMaxJoinsPerMinute) + " joins per minute as '" + d.node + "'; wait a minute";
    return d;
  }
  if (req.protocol_version() != kProtocolVersion)
    d.reason = "protocol version " + std::to_string(req.protocol_version()) + " is not this coordinator's (" +
               std::to_string(kProtocolVersion) + "); run the same meshrl release on every machine";
  else if (std::string bad = check_node_name(req.name()); !bad.empty())
    d.reason = bad;
  else if (!req.run_id().empty() && req.run_id() != run_id)
    d.reason = "node is configured for run " + req.run_id() + ", this coordinator runs " + run_id;
  else if (!req.model_config_hash().empty() && req.model_config_hash() != model_config_hash)
    d.reason = "node's model (config hash " + req.model_config_hash() + ") is not this run's (" + model_config_hash + ")";
  else if (req.signing_key().size() != trust::kPublicKeyBytes)
    d.reason = "join carries no Ed25519 signing key (" + std::to_string(trust::kPublicKeyBytes) + " bytes, got " +
               std::to_string(req.signing_key().size()) + ")";
  else if (auto it = members_.find(req.name()); it != members_.end()) {
    char b[160];
    std::snprintf(b, sizeof b, "a node named '%s' is already joined (its lease expires in %.1f s); use another --name",
                  req.name().c_str(), lease_s_ - (now - it->second.last_seen));
    d.reason = b;
  }
  if (!d.reason.empty()) return d;
  std::random_device rd;
  Lease m;
  m.session = ((uint64_t{rd()} << 32) ^ rd()) | 1;
  m.last_seen = m.joined_at = now;
  members_[req.name()] = m;
  d.rejoin = !ever_joined_.insert(req.name()).second;
  // The key arrives over the connection that authenticated this name (mutual TLS), so it is bound
  // to the node's identity; a new key (the node lost its key file) replaces the old one.
  std::string& key = signing_keys_[req.name()];
  if (!key.empty() && key != req.signing_key()) d.replaced_key = key;
  key = req.signing_key();
  records_[req.name()].name = req.name();
  records_[req.name()].left = false;
  d.accepted = true;
  d.session = m.session;
  return d;
}

bool Membership::session_ok(const std::string& name, uint64_t session, double now) {
  auto it = members_.find(name);
  if (it == members_.end() || it->second.session != session) return false;
  it->second.last_seen = now;
  return true;
}

void Membership::leave(const std::string& name, const v1::NodeProgress& progress) {
  members_.erase(name);
  NodeRecord& rec = records_[name];
  rec.last_progress = progress;
  rec.left = true;
}

std::vector<ExpiredLease> Membership::expire(double now) {
  std::vector<ExpiredLease> out;
  for (auto it = members_.begin(); it != members_.end();) {
    if (now - it->second.last_seen > lease_s_) {
      out.push_back({it->first, now - it->second.last_seen});
      it = members_.erase(it);
    } else {
      ++it;
    }
  }
  return out;
}

void Membership::restore(std::set<std::string> expected, std::set<std::string> not_left, double grace_until) {
  expected_ = std::move(expected);
  not_left_ = std::move(not_left);
  grace_until_ = grace_until;
}

int64_t Membership::quorum_nodes(double now, const std::function<bool(const std::string&)>& excluded) const {
  int64_t online = static_cast<int64_t>(members_.size());
  if (now < grace_until_) {
    std::set<std::string> known = expected_;
    for (const auto& [name, m] : members_) known.insert(name);
    online = static_cast<int64_t>(known.size());
  }
  // Excluded nodes may still train and send, but none of their updates counts: the quorum is of the others.
  for (const auto& [name, m] : members_)
    if (excluded(name)) --online;
  return online;
}

bool Membership::all_nodes_gone() const {
  if (!members_.empty()) return false;
  // Nodes of this run that have not said goodbye may be reconnecting (after our own restart).
  // (The caller gives up waiting after a linger time: a node may also be gone for good.)
  for (const auto* names : {&expected_, &ever_joined_, &not_left_})
    for (const std::string& name : *names)
      if (!records_.count(name) || !records_.at(name).left) return false;
  return true;
}

std::vector<LeaseView> Membership::leases(double now) const {
  std::vector<LeaseView> out;
  for (const auto& [name, m] : members_) out.push_back({name, now - m.last_seen, now - m.joined_at});
  return out;
}

const std::string& Membership::signing_key(const std::string& name) const {
  static const std::string kNone;
  auto it = signing_keys_.find(name);
  return it == signing_keys_.end() ? kNone : it->second;
}

NodeRecord* Membership::find_record(const std::string& name) {
  auto it = records_.find(name);
  return it == records_.end() ? nullptr : &it->second;
}

}  // namespace meshrl::mesh
