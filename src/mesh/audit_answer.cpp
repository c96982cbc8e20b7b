// Answering reward audits. See audit_answer.h.
#include "mesh/audit_answer.h"

#include <vector>

namespace meshrl::mesh {

std::optional<v1::AuditAnswer> make_audit_answer(const std::string& node, const ScoredRolloutBook& book, const v1::AuditRequest& q) {
  auto rollouts = book.sealed(q.base_version(), q.seq());
  if (!rollouts) return std::nullopt;
  v1::AuditAnswer a;
  a.set_name(node);
  a.set_base_version(q.base_version());
  a.set_seq(q.seq());
  std::vector<bool> drawn(rollouts->size(), false);
  for (int64_t i : q.indices())
    if (i >= 0 && i < static_cast<int64_t>(drawn.size())) drawn[static_cast<size_t>(i)] = true;
  for (size_t i = 0; i < rollouts->size(); ++i) {
    const ScoredRollout& r = (*rollouts)[i];
    v1::ScoredRollout* m = a.add_rollouts();
    m->set_prompt_id(r.prompt_id);
    m->set_completion_hash(completion_hash(r.completion));
    m->set_claimed_reward(r.claimed_reward);
    if (drawn[i]) m->set_completion(r.completion);
  }
  return a;
}

void answer_audit(NodeSession& session, const ScoredRolloutBook& book, const v1::AuditRequest& q) {
  const std::string key = session.name() + ".v" + std::to_string(q.base_version()) + ".s" + std::to_string(q.seq());
  std::optional<v1::AuditAnswer> a = make_audit_answer(session.name(), book, q);
  if (!a) {
    session.log("audit of " + key + ": its rollouts are no longer kept; not answering");
    return;
  }
  auto v = session.with_retry("audit", [&]() -> Result<v1::AuditVerdict> {
    a->set_session(session.session());
    auto x = session.client().answer_audit(*a);
    if (x.is_ok() && !x.value().passed() && is_not_joined(x.value().reason())) return invalid_argument(x.value().reason());
    return x;
  });
  if (!v.is_ok()) session.log("audit of " + key + ": " + v.status().message());
  else if (v.value().passed()) session.log("audit of " + key + " passed (" + std::to_string(q.indices_size()) + " rollouts re-scored)");
  else session.log("audit of " + key + " failed: " + v.value().code() + ": " + v.value().reason());
}

}  // namespace meshrl::mesh
