// The gateway's admission: challenges, joins, and the sessions they open.
#include "actors/net/gateway_state.hpp"
#include "actors/net/inspect_board.hpp"
#include "actors/net/wire_values.hpp"

namespace bamboo {

// A member is its process (its CAF node), not the actor that joined: another
// actor of a member's process takes no second node slot.
bool gateway_state::joined_already(const peer& sender) {
  if (!sender)
    return false;
  for (const auto& [p, node] : members_)
    if (p->node() == sender->node()) {
      reply(schema::join_refused{"already joined as node " + std::to_string(node)});
      if (p != sender && remember(told_, sender))
        refused(sender, "a second join from the process of node " + std::to_string(node));
      return true;
    }
  return false;
}

void gateway_state::handle(const schema::challenge_request& r) {
  auto sender = self_->current_sender();
  if (r.nonce.size() != nonce_bytes || !sender ||
      r.identity != caf::to_string(sender->node())) {
    refused(sender, r.nonce.size() != nonce_bytes
                        ? "no nonce of its own (a worker before version 1.6)"
                        : "its identity is not the node it sends from (a relay?)");
    reply(schema::join_refused{r.nonce.size() != nonce_bytes
                                   ? "the join needs a nonce of " +
                                         std::to_string(nonce_bytes) + " bytes"
                                   : "the identity is not the sender's node"});
    return;
  }
  if (joined_already(sender))
    return;
  // A fenced node that asks afresh has dropped its old session: the handshake's
  // answers go unsealed, as to any newcomer.
  if (auto f = fenced_.find(sender->node()); f != fenced_.end()) {
    session_book::close(self_->node(), f->first, f->second.session);
    fenced_.erase(f);
  }
  if (!pending_.count(sender))
    make_room_for(sender);
  handshake h{r.nonce, make_nonce(), r.identity, caf::to_string(self_->node())};
  reply(schema::join_challenge{h.manager_nonce,
                               prove(spec_.token, proof_role::manager, h), h.manager_id});
  pending_[sender] = std::move(h);
}

void gateway_state::make_room_for(const peer& sender) {
  std::size_t own = 0;
  auto first_own = pending_.end();
  for (auto it = pending_.begin(); it != pending_.end(); ++it)
    if (it->first->node() == sender->node() && own++ == 0)
      first_own = it;
  if (own >= max_pending_per_node)
    pending_.erase(first_own);
  else if (pending_.size() >= max_strangers)
    pending_.erase(pending_.begin());
}

std::optional<handshake> gateway_state::proven(const peer& sender, proof_role role,
                                               const std::vector<std::uint8_t>& proof,
                                               const char* who) {
  auto it = pending_.find(sender);
  if (it == pending_.end()) {
    if (remember(told_, sender)) {
      refused(sender, std::string(who) + ": no challenge was asked for");
      reply(schema::join_refused{"ask for a challenge first"});
    }
    return std::nullopt;
  }
  const auto h = std::move(it->second);
  pending_.erase(it);
  if (!check_proof(spec_.token, role, h, proof)) {
    refused(sender, std::string(who) + ": wrong cluster token");
    reply(schema::join_refused{"wrong cluster token"});
    return std::nullopt;
  }
  return h;
}

void gateway_state::open_session(const peer& sender, const handshake& h) {
  fenced_.erase(sender->node());
  session_book::open(self_->node(), sender->node(), session_key(spec_.token, h));
}

void gateway_state::fence(const caf::node_id& node) {
  if (auto s = session_book::find(self_->node(), node))
    fenced_[node] = {s.get(), clock_type::now()};
}

void gateway_state::close_fenced(clock_type::time_point now) {
  for (auto it = fenced_.begin(); it != fenced_.end();) {
    if (now - it->second.since < fenced_grace) {
      ++it;
      continue;
    }
    session_book::close(self_->node(), it->first, it->second.session);
    it = fenced_.erase(it);
  }
}

void gateway_state::handle(const schema::join_request& j) {
  auto sender = self_->current_sender();
  auto h = proven(sender, proof_role::worker, j.proof, "a worker");
  if (!h)
    return;
  if (spec_.observers_only) {
    const std::string why = "this manager trains an embedded cluster: it takes "
                            "observers (bamboo-inspect), not workers";
    refused(sender, why);
    reply(schema::join_refused{why});
    return;
  }
  if (joined_already(sender)) // asked for two challenges, answers both
    return;
  if (auto why = model_mismatch(spec_.model, j.model, j.model_digest)) {
    refused(sender, *why);
    reply(schema::join_refused{*why});
    return;
  }
  const int node = next_node_++; // a node that comes back is a new node
  open_session(sender, *h);
  members_[sender] = node;
  self_->monitor(caf::actor_cast<caf::actor>(sender));
  peer_book::admit(sender->node());
  tracker_.watch(node, clock_type::now());
  logger_->info("node {} joined (zone '{}', version {})", node, j.zone, j.version);
  spec_.board->on_join(node, j.zone);
  reply(
      schema::join_accept{static_cast<std::uint32_t>(node), 1, spec_.store_port,
                          static_cast<std::uint32_t>(spec_.heartbeats.period.count()),
                          static_cast<std::uint32_t>(spec_.heartbeats.manager_misses())});
  if (spec_.listener)
    self_->send(spec_.listener, joined_atom::value, node,
                caf::actor_cast<caf::actor>(sender), j.zone);
}

} // namespace bamboo
