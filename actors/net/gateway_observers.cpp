// The gateway's observers (bamboo-inspect): snapshots, and operators' commands.
#include "actors/net/gateway_state.hpp"
#include "actors/net/inspect_board.hpp"

namespace bamboo {

void gateway_state::handle(const schema::observe_request& o) {
  auto sender = self_->current_sender();
  auto h = proven(sender, proof_role::observer, o.proof, "an observer");
  if (!h)
    return;
  if (!observers_.count(sender) && observers_.size() >= max_observers) {
    reply(schema::join_refused{"too many observers (" + std::to_string(max_observers) +
                               ")"});
    return;
  }
  // An operator proves the operator token over the same handshake; a proof
  // that does not check out is refused, not taken as a watcher's.
  const bool op = !o.operator_proof.empty();
  if (op &&
      (spec_.operator_token.empty() ||
       !check_proof(spec_.operator_token, proof_role::operator_, *h, o.operator_proof))) {
    const std::string why = spec_.operator_token.empty()
                                ? "this manager takes no operator token"
                                : "wrong operator token";
    refused(sender, "an operator: " + why);
    reply(schema::join_refused{why});
    return;
  }
  open_session(sender, *h);
  if (!observers_.count(sender)) {
    self_->monitor(caf::actor_cast<caf::actor>(sender));
    peer_book::admit(sender->node());
    with_address(sender, [this, op](const std::string& from) {
      logger_->info("{} attached from {}", op ? "an operator" : "an observer", from);
    });
  }
  observers_[sender] = op;
  reply(snapshot(0));
}

void gateway_state::handle(const schema::snapshot_request& r) {
  if (!observers_.count(self_->current_sender()))
    return stranger("a snapshot request");
  reply(snapshot(r.request));
}

void gateway_state::handle(const schema::command& c) {
  auto who = observers_.find(self_->current_sender());
  if (who == observers_.end())
    return stranger("a command");
  auto parsed = parse_command(c.words);
  if (!parsed.command)
    return reply(schema::command_answer{c.request, false, parsed.error});
  const auto& cmd = *parsed.command;
  using kind = inspect_command::kind;
  if (cmd.what == kind::help)
    return reply(schema::command_answer{c.request, true, command_help()});
  if (!who->second) {
    with_address(who->first, [this](const std::string& from) {
      logger_->warn("refused a command from {}: an observer without the operator token",
                    from);
    });
    return reply(schema::command_answer{
        c.request, false,
        spec_.operator_token.empty()
            ? "refused: commands need the operator token, and this manager has none "
              "(start it with --operator-token-file or BAMBOO_OPERATOR_TOKEN)"
            : "refused: commands need the operator token (bamboo-inspect "
              "--operator-token-file, or BAMBOO_OPERATOR_TOKEN)"});
  }
  run_controls::answer a;
  const bool for_node =
      cmd.what == kind::preempt || cmd.what == kind::notice || cmd.what == kind::drain;
  if (for_node && !spec_.observers_only)
    a = member_command(cmd);
  else if (!spec_.controls)
    a = {false, "not available in this run"};
  else if (for_node) {
    a = spec_.controls->order(
        cmd.what == kind::preempt  ? run_controls::node_action::preempt
        : cmd.what == kind::notice ? run_controls::node_action::notice
                                   : run_controls::node_action::drain,
        cmd.node, cmd.seconds);
    if (a.ok && cmd.what == kind::drain)
      spec_.board->on_draining(cmd.node);
  } else if (cmd.what == kind::pause)
    a = spec_.controls->pause();
  else if (cmd.what == kind::resume)
    a = spec_.controls->resume();
  else if (cmd.what == kind::checkpoint)
    a = spec_.controls->checkpoint();
  else
    a = spec_.controls->redundancy(cmd.mode);
  if (a.ok) {
    logger_->warn("an operator's command: {}", a.text);
    spec_.board->event("operator: " + a.text);
  }
  reply(schema::command_answer{c.request, a.ok, a.text});
}

run_controls::answer gateway_state::member_command(const inspect_command& cmd) {
  const auto n = "node " + std::to_string(cmd.node);
  for (auto& [p, node] : members_) {
    if (node != cmd.node)
      continue;
    const auto to = caf::actor_cast<caf::actor>(p);
    if (cmd.what == inspect_command::kind::drain) {
      auto& proxies = proxies_[node];
      if (proxies.empty()) { // a standby member: nothing to move
        send_frame(self_, to, schema::leave{"drained by an operator"});
        return {true, n + " holds no stage: it leaves now"};
      }
      for (auto& proxy : proxies)
        self_->send(proxy, notice_atom::value, std::int64_t{-1});
      spec_.board->on_draining(node);
      return {true, n + " drains: its stages move at the next step boundary, then it "
                        "leaves"};
    }
    const bool kill = cmd.what == inspect_command::kind::preempt;
    send_frame(self_, to,
               schema::order{kill ? "preempt" : "notice", cmd.seconds,
                             "an operator's command (bamboo-inspect)"});
    return {true, n + (kill ? " preempted: its process is killed"
                            : " has a preemption notice")};
  }
  return {false, n + " is not a member (the snapshot lists them)"};
}

schema::cluster_snapshot gateway_state::snapshot(std::uint64_t request) {
  const auto now = clock_type::now();
  std::map<int, std::int64_t> ages;
  for (const auto& [p, node] : members_)
    if (auto seen = tracker_.last_seen(node))
      ages[node] =
          std::chrono::duration_cast<std::chrono::milliseconds>(now - *seen).count();
  auto snap = spec_.board->snapshot(request, ages, now);
  if (spec_.actors)
    snap.actors = spec_.actors->rows(now);
  for (const auto& [node, r] : member_rows_) {
    const auto since =
        std::chrono::duration_cast<std::chrono::milliseconds>(now - r.at).count();
    for (auto row : actor_board::renumbered(r.rows, node)) {
      row.age_ms += since;
      snap.actors.push_back(std::move(row));
    }
  }
  if (spec_.controls) {
    snap.paused = spec_.controls->paused();
    snap.redundancy = to_string(spec_.controls->redundancy());
  }
  return snap;
}

} // namespace bamboo
