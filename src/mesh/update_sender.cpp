// Cutting, signing and sending updates. See update_sender.h.
#include "mesh/update_sender.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "mesh/audit_answer.h"
#include "mesh/protocol.h"
#include "mesh/update_signature.h"

namespace meshrl::mesh {

UpdateSender::UpdateSender(NodeSession& session, VersionFollower& follower, NodeTally& tally, ScoredRolloutBook& book,
                           ErrorFeedback& ef, NodeStateKeeper* keeper, const trust::SigningKey& key,
                           std::unique_ptr<UpdateCodec> codec, const UpdateDecodeLimits& limits, int64_t inner_steps,
                           std::string misbehave)
    : session_(session),
      follower_(follower),
      tally_(tally),
      book_(book),
      ef_(ef),
      keeper_(keeper),
      key_(key),
      codec_(std::move(codec)),
      limits_(limits),
      inner_steps_(inner_steps),
      misbehave_(std::move(misbehave)) {}

Result<OutgoingUpdate> UpdateSender::cut_update(int64_t samples, double reward) {
  MESHRL_ASSIGN_OR_RETURN(NamedTensors delta, follower_.take_unsent_progress());
  if (misbehave_.rfind("sign_flip_x10", 0) == 0)
    for (auto& t : delta.tensors) t = t * -10.0;  // the attack the robust aggregators must absorb
  NamedTensors comp = ef_.compensate(delta);
  const int64_t seq =
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  OutgoingUpdate out;
  MESHRL_ASSIGN_OR_RETURN(out.bytes, codec_->encode(comp, static_cast<uint64_t>(seq)));
  MESHRL_ASSIGN_OR_RETURN(NamedTensors sent, codec_->decode(out.bytes, limits_, "own update"));
  MESHRL_RETURN_IF_ERROR(ef_.update(comp, sent));
  if (keeper_) out.state = keeper_->snapshot();
  // The reported reward is the mean of the rollouts the update commits to, so an audit can hold
  // the node to it (equal to the steps' mean up to float rounding).
  const RolloutCommitment commit = book_.seal(follower_.held(), seq);
  if (commit.n > 0) reward = commit.claimed_mean;
  v1::UpdateHeader& h = out.header;
  h.set_protocol_version(kProtocolVersion);
  h.set_name(session_.name());
  h.set_base_version(follower_.held());
  h.set_seq(seq);
  h.set_n_samples(samples);
  h.set_declared_bytes(out.bytes.size());
  v1::RewardStats* stats = h.mutable_stats();
  stats->set_reward_mean(reward);
  stats->set_inner_steps(inner_steps_);
  stats->set_n_scored(commit.n);
  stats->set_scored_digest(commit.digest);
  // KL and entropy averaged over the steps since the last cut (dashboards, metrics.jsonl), and the
  // completions whose verifier failed (masked from the loss) by kind: signed with the rest.
  const CutStats cs = tally_.take_cut_stats();
  stats->set_kl(cs.kl_mean);
  stats->set_entropy(cs.entropy_mean);
  stats->set_verifier_timeouts(cs.failures.timeout);
  stats->set_verifier_crashes(cs.failures.crash);
  stats->set_verifier_garbage(cs.failures.garbage);
  // Last: the signature covers every field above; retries resend this header as it is.
  sign_update(h, session_.run_id(), out.bytes, key_);
  out.reward = reward;
  return out;
}

void UpdateSender::send_attack_copies(const v1::UpdateHeader& real, const std::string& bytes, int64_t inflate, int copies) {
  for (int k = 1; k <= copies; ++k) {
    v1::UpdateHeader h = real;
    h.set_seq(real.seq() + (inflate > 1 ? -k : k));
    h.set_n_samples(real.n_samples() * inflate);
    h.set_session(session_.session());
    sign_update(h, session_.run_id(), bytes, key_);
    auto r = session_.client().submit(h, bytes);
    session_.log("attack copy " + std::to_string(k) + " (n_samples " + std::to_string(h.n_samples()) + "): " +
                 (r.is_ok() ? (r.value().accepted() ? std::string("accepted") : r.value().code()) : r.status().message()));
  }
}

Status UpdateSender::send(OutgoingUpdate out) {
  v1::UpdateHeader& h = out.header;
  const bool repeat_attack = misbehave_ == "sign_flip_x10_repeat";
  if (repeat_attack) send_attack_copies(h, out.bytes, 1'000'000'000, 1);
  MESHRL_ASSIGN_OR_RETURN(v1::SubmitReply r, session_.with_retry("submit", [&]() -> Result<v1::SubmitReply> {
    h.set_session(session_.session());
    auto x = session_.client().submit(h, out.bytes);
    if (x.is_ok() && !x.value().accepted() && is_not_joined(x.value().reason())) return invalid_argument(x.value().reason());
    return x;
  }));
  if (repeat_attack) send_attack_copies(h, out.bytes, 1, 4);
  if (r.accepted()) last_accepted_base_ = std::max(last_accepted_base_.load(), h.base_version());
  tally_.add_update(out.bytes.size(), r.accepted(), r.code());
  // The integration tests match these lines against the ledger (exactly once).
  const std::string key = session_.name() + ".v" + std::to_string(h.base_version()) + ".s" + std::to_string(h.seq());
  char tail[96];
  std::snprintf(tail, sizeof tail, ", %zu bytes, reward %.4f", out.bytes.size(), out.reward);
  session_.log("update " + key + (r.accepted() ? " acknowledged" : " rejected: " + r.reason()) + (r.duplicate() ? " (duplicate)" : "") +
               tail);
  if (r.has_audit()) answer_audit(session_, book_, r.audit());
  if (r.accepted() && out.state && keeper_) keeper_->save(*out.state);
  return Status::ok();
}

}  // namespace meshrl::mesh

