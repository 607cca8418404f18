#include "actors/net/gateway.hpp"

#include "actors/errors.hpp"
#include "actors/net/gateway_state.hpp"
#include "actors/net/inspect_board.hpp"
#include "actors/net/wire_values.hpp"

namespace bamboo {

caf::behavior gateway_state::make_behavior(gateway_spec spec) {
  spec_ = std::move(spec);
  logger_ = log::get("bamboo.gateway");
  if (!spec_.board) // admission only: the members, no run
    spec_.board = std::make_shared<inspect_board>();
  if (spec_.actors)
    row_ = spec_.actors->enter("gateway", -1, -1, "listening");
  self_->set_down_handler([this](caf::down_msg& dm) { on_down(dm); });
  guard_from_strangers(self_, [this](const char* what) { stranger(what); });
  self_->delayed_send(self_, spec_.heartbeats.period, tick_atom::value);
  // Only frames come from other processes; the atoms are this process's own
  // (a peer that sends one is dropped, and cannot start a timer).
  return {
      [this](const wire_frame& w) { on_frame(w); },
      [this](tick_atom) {
        if (self_->current_sender() == self_->ctrl())
          on_tick();
        else
          stranger("a tick");
      },
      [this](attach_atom, int member) {
        if (!from_this_process(self_))
          return stranger("an attach");
        auto proxy = caf::actor_cast<caf::actor>(self_->current_sender());
        if (!member_alive(member))
          self_->send_exit(proxy, make_loss(failover_cause::connection_lost,
                                            "lost before it started"));
        else
          proxies_[member].push_back(proxy);
      },
      [this](broadcast_atom, const wire_frame& w) {
        if (!from_this_process(self_))
          return stranger("a broadcast");
        for (auto& [p, n] : members_) {
          auto to = caf::actor_cast<caf::actor>(p);
          self_->send(to, sealed_for(self_->node(), to, w));
        }
      },
  };
}

void gateway_state::reply(const schema::frame& f) {
  send_frame(self_, caf::actor_cast<caf::actor>(self_->current_sender()), f);
}

void gateway_state::on_frame(const wire_frame& w) {
  std::string why;
  auto f = open_frame(self_, w, spec_.frame_limit, "bamboo.gateway", &why);
  if (!f) {
    if (remember(told_, self_->current_sender()))
      reply(schema::frame_rejected{why});
    return;
  }
  std::visit([this](const auto& x) { handle(x); }, *f);
}

void gateway_state::stranger(const char* what) {
  auto sender = self_->current_sender();
  if (remember(told_, sender))
    with_address(sender, [this, what = std::string(what)](const std::string& from) {
      logger_->warn("dropped {} from {}: only this process sends it", what, from);
    });
}

void gateway_state::refused(const peer& sender, const std::string& why) {
  with_address(sender, [this, why](const std::string& from) {
    logger_->warn("refused a join from {}: {}", from, why);
  });
}

void gateway_state::handle(const schema::heartbeat& hb) {
  auto it = members_.find(self_->current_sender());
  if (it != members_.end() && it->second != static_cast<int>(hb.node)) {
    // A member speaks for itself only: another node's heartbeat keeps no one alive.
    if (beat_for_others_.insert(self_->current_sender()).second)
      logger_->warn("dropped a heartbeat for node {} from node {} (a member beats for "
                    "itself only)",
                    hb.node, it->second);
    return;
  }
  if (it == members_.end()) {
    // A fenced (or never joined) sender: it must join again as a new node.
    if (remember(told_, self_->current_sender())) {
      logger_->warn("dropped a heartbeat from fenced node {}", hb.node);
      reply(schema::join_refused{"node " + std::to_string(hb.node) +
                                 " was declared lost: join again as a new node"});
    }
    return;
  }
  const auto now = clock_type::now();
  tracker_.seen(it->second, now);
  // Its actors as it saw them (bounded: the board keeps at most max_rows).
  auto& rows = member_rows_[it->second];
  rows.rows = hb.actors;
  if (rows.rows.size() > actor_board::max_rows)
    rows.rows.resize(actor_board::max_rows);
  rows.at = now;
}

void gateway_state::handle(const schema::preemption_notice& p) {
  auto it = members_.find(self_->current_sender());
  if (it == members_.end() || it->second != static_cast<int>(p.node))
    return stranger("a preemption notice");
  logger_->info("node {} has a preemption notice, deadline in {} ms", it->second,
                p.deadline_ms);
  for (auto& proxy : proxies_[it->second])
    self_->send(proxy, notice_atom::value, p.deadline_ms);
}

bool gateway_state::member_alive(int member) const {
  for (auto& [p, n] : members_)
    if (n == member)
      return true;
  return false;
}

void gateway_state::lose(const peer& p, std::optional<failover_cause> cause,
                         const std::string& detail) {
  auto it = members_.find(p);
  if (it == members_.end())
    return;
  const int member = it->second;
  if (!cause)
    logger_->info("node {} left", member);
  else
    logger_->warn("node {} lost: {}{}", member, to_string(*cause),
                  detail.empty() ? "" : " (" + detail + ")");
  tracker_.forget(member);
  peer_book::forget(p->node());
  fence(p->node());
  members_.erase(it);
  member_rows_.erase(member);
  spec_.board->on_gone(member, cause ? "lost" : "left");
  for (auto& proxy : proxies_[member])
    self_->send_exit(proxy, make_loss(cause.value_or(failover_cause::connection_lost),
                                      cause ? detail : "it left"));
  proxies_.erase(member);
  if (spec_.listener)
    self_->send(spec_.listener, lost_atom::value, member);
}

void gateway_state::on_down(const caf::down_msg& dm) {
  if (observers_.erase(caf::actor_cast<peer>(dm.source)) > 0) {
    peer_book::forget(dm.source.node());
    session_book::close(self_->node(), dm.source.node());
    return; // an observer detached
  }
  if (dm.reason)
    lose(caf::actor_cast<peer>(dm.source), failover_cause::connection_lost,
         exit_words(dm.reason));
  else
    lose(caf::actor_cast<peer>(dm.source), std::nullopt, "");
}

void gateway_state::on_tick() {
  const auto now = clock_type::now();
  const auto& hb = spec_.heartbeats;
  // The gateway's own pause (its process stopped or starved) is nobody's silence.
  if (auto late = tracker_.tick(now, hb.period, hb.late_tick()); late.count() > 0)
    logger_->warn(
        "the gateway's tick came {} ms after the previous one: this process was "
        "paused or starved, and that much of every member's silence is forgiven",
        std::chrono::duration_cast<std::chrono::milliseconds>(late).count());
  for (int node : tracker_.expired(now, hb.timeout(), hb.timeout()))
    for (auto& [p, n] : members_)
      if (n == node) {
        auto victim = p;
        const auto silent = std::chrono::duration_cast<std::chrono::milliseconds>(
            now - tracker_.last_seen(node).value_or(now));
        lose(victim, failover_cause::missed_heartbeats,
             "silent for " + std::to_string(silent.count()) + " ms");
        break;
      }
  expire_waiters(now);
  // The manager's own heartbeat: a worker that stops hearing it (the manager
  // stopped, or cut off) gives up instead of waiting forever.
  const schema::heartbeat beat{manager_node, 0, 0, 0, {}};
  for (auto& [p, n] : members_)
    send_frame(self_, caf::actor_cast<caf::actor>(p), beat);
  close_fenced(now);
  row_.set("listening",
           std::to_string(members_.size()) + " member(s), " +
               std::to_string(observers_.size()) + " observer(s)",
           self_->mailbox().size());
  self_->delayed_send(self_, spec_.heartbeats.period, tick_atom::value);
}

namespace {

caf::behavior gateway_actor(caf::stateful_actor<gateway_state>* self, gateway_spec spec) {
  return self->state.make_behavior(std::move(spec));
}

} // namespace

caf::actor spawn_gateway(caf::actor_system& sys, gateway_spec spec) {
  return sys.spawn(gateway_actor, std::move(spec));
}

} // namespace bamboo
