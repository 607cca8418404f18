#include "actors/net/gateway.hpp"

#include <map>
#include <optional>
#include <set>

#include <caf/all.hpp>
#include <caf/io/middleman.hpp>

#include "actors/actor_board.hpp"
#include "actors/errors.hpp"
#include "actors/net/auth.hpp"
#include "actors/net/frame_channel.hpp"
#include "actors/net/frame_session.hpp"
#include "actors/net/front_door.hpp"
#include "actors/net/inspect_board.hpp"
#include "actors/net/inspect_command.hpp"
#include "actors/net/kv_store.hpp"
#include "actors/net/wire_values.hpp"
#include "actors/run_controls.hpp"
#include "log/log.hpp"

namespace bamboo {

namespace {

using clock_type = std::chrono::steady_clock;

struct gateway_state {
  static inline const char* name = "bamboo.gateway";

  explicit gateway_state(caf::event_based_actor* self) : self_(self) {}

  caf::behavior make_behavior(gateway_spec spec) {
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

private:
  using peer = caf::strong_actor_ptr;

  void reply(const schema::frame& f) {
    send_frame(self_, caf::actor_cast<caf::actor>(self_->current_sender()), f);
  }

  void on_frame(const wire_frame& w) {
    std::string why;
    auto f = open_frame(self_, w, spec_.frame_limit, "bamboo.gateway", &why);
    if (!f) {
      if (remember(told_, self_->current_sender()))
        reply(schema::frame_rejected{why});
      return;
    }
    std::visit([this](const auto& x) { handle(x); }, *f);
  }

  // A dropped message from a peer that may not send it: logged once per sender.
  void stranger(const char* what) {
    auto sender = self_->current_sender();
    if (remember(told_, sender))
      with_address(sender, [this, what = std::string(what)](const std::string& from) {
        logger_->warn("dropped {} from {}: only this process sends it", what, from);
      });
  }

  // A refused join, logged with where it came from.
  void refused(const peer& sender, const std::string& why) {
    with_address(sender, [this, why](const std::string& from) {
      logger_->warn("refused a join from {}: {}", from, why);
    });
  }

  // Calls `log` with the peer's address ("127.0.0.1:41234"), which the
  // middleman knows from the connection: a CAF node id alone tells a user
  // nothing. The node id stands in when no connection is known.
  template <class Log>
  void with_address(const peer& sender, Log log) {
    if (!sender || sender->node() == self_->node())
      return log(sender ? "this process" : "an anonymous sender");
    auto node = sender->node();
    if (auto known = peer_book::address(node)) // the front door's peer
      return log(*known);
    if (lookups_ >= max_lookups) // a flood of refusals holds no more requests
      return log("node " + caf::to_string(node));
    ++lookups_;
    auto mm = self_->home_system().middleman().actor_handle();
    self_->request(mm, std::chrono::seconds(5), caf::get_atom::value, node)
        .then(
            [this, log, node](const caf::node_id&, const std::string& host,
                              std::uint16_t port) {
              --lookups_;
              log(host.empty() ? "node " + caf::to_string(node)
                               : host + ":" + std::to_string(port));
            },
            [this, log, node](caf::error&) {
              --lookups_;
              log("node " + caf::to_string(node));
            });
  }

  static constexpr int max_lookups = 64;
  int lookups_ = 0; // address lookups in flight

  // Bounded state per unjoined peer: past max_strangers, nothing is remembered
  // (and nobody more is told), so no peer can make the manager grow.
  template <class Set>
  static bool remember(Set& set, const peer& p) {
    return set.size() < max_strangers && set.insert(p).second;
  }

  // One node slot per process: a member that asks to join again is refused.
  bool joined_already(const peer& sender) {
    auto it = members_.find(sender);
    if (it != members_.end())
      reply(schema::join_refused{"already joined as node " + std::to_string(it->second)});
    return it != members_.end();
  }

  void handle(const schema::challenge_request& r) {
    auto sender = self_->current_sender();
    if (joined_already(sender))
      return;
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
    if (!pending_.count(sender))
      make_room_for(sender);
    handshake h{r.nonce, make_nonce(), r.identity, caf::to_string(self_->node())};
    reply(schema::join_challenge{
        h.manager_nonce, prove(spec_.token, proof_role::manager, h), h.manager_id});
    pending_[sender] = std::move(h);
  }

  // Pending challenges are bounded per peer node and in all: a peer that asks
  // for many (from many sender ids) evicts its own, never an honest join.
  void make_room_for(const peer& sender) {
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

  // The sender's answer to its challenge: its handshake when it proves the
  // token in `role`; a refusal is answered and logged (`who` in the log).
  std::optional<handshake> proven(const peer& sender, proof_role role,
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

  // From now on every frame between the two processes carries the session's
  // MAC; the previous session of that process (a join before) is replaced.
  void open_session(const peer& sender, const handshake& h) {
    fenced_.erase(sender->node());
    session_book::open(self_->node(), sender->node(), session_key(spec_.token, h));
  }

  // A lost member's session stays a while, so that the frames it still sends
  // are authentic and answered (it was fenced: it joins again); then it goes.
  void fence(const caf::node_id& node) {
    if (auto s = session_book::find(self_->node(), node))
      fenced_[node] = {s.get(), clock_type::now()};
  }
  void close_fenced(clock_type::time_point now) {
    for (auto it = fenced_.begin(); it != fenced_.end();) {
      if (now - it->second.since < fenced_grace) {
        ++it;
        continue;
      }
      session_book::close(self_->node(), it->first, it->second.session);
      it = fenced_.erase(it);
    }
  }

  void handle(const schema::join_request& j) {
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
    reply(schema::join_accept{static_cast<std::uint32_t>(node), 1, spec_.store_port,
                              static_cast<std::uint32_t>(spec_.heartbeats.period.count()),
                              static_cast<std::uint32_t>(spec_.heartbeats.misses)});
    if (spec_.listener)
      self_->send(spec_.listener, joined_atom::value, node,
                  caf::actor_cast<caf::actor>(sender), j.zone);
  }

  void handle(const schema::heartbeat& hb) {
    auto it = members_.find(self_->current_sender());
    if (it == members_.end() || it->second != static_cast<int>(hb.node)) {
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

  void handle(const schema::preemption_notice& p) {
    auto it = members_.find(self_->current_sender());
    if (it == members_.end() || it->second != static_cast<int>(p.node))
      return stranger("a preemption notice");
    logger_->info("node {} has a preemption notice, deadline in {} ms", it->second,
                  p.deadline_ms);
    for (auto& proxy : proxies_[it->second])
      self_->send(proxy, notice_atom::value, p.deadline_ms);
  }

  // The rendezvous store, for members only. A get or wait for keys not there yet
  // is answered when a later change brings them, or with "timeout" at its
  // deadline (checked every tick).
  void handle(const schema::store_request& r) {
    auto sender = self_->current_sender();
    if (!members_.count(sender))
      return stranger("a store request");
    if (auto reply = store_.apply(r)) {
      reply_to(sender, *reply);
      if (reply->error.empty() && changes(r.op))
        answer_waiters();
      return;
    }
    if (waiters_.size() >= max_strangers) {
      reply_to(sender,
               schema::store_reply{r.request, {}, 0, "too many waiting requests"});
      return;
    }
    const auto timeout = std::chrono::milliseconds(r.timeout_ms);
    waiters_.push_back({sender, r, clock_type::now() + timeout});
  }

  static bool changes(schema::store_op op) {
    return op == schema::store_op::set || op == schema::store_op::add ||
           op == schema::store_op::compare_set;
  }

  void reply_to(const peer& p, const schema::store_reply& r) {
    send_frame(self_, caf::actor_cast<caf::actor>(p), r);
  }

  void answer_waiters() {
    for (auto it = waiters_.begin(); it != waiters_.end();) {
      if (auto reply = store_.apply(it->request)) {
        reply_to(it->who, *reply);
        it = waiters_.erase(it);
      } else {
        ++it;
      }
    }
  }

  void expire_waiters(clock_type::time_point now) {
    for (auto it = waiters_.begin(); it != waiters_.end();) {
      const bool gone = !members_.count(it->who);
      if (gone || now >= it->deadline) {
        if (!gone)
          reply_to(it->who, schema::store_reply{it->request.request, {}, 0, "timeout"});
        it = waiters_.erase(it);
      } else {
        ++it;
      }
    }
  }

  bool member_alive(int member) const {
    for (auto& [p, n] : members_)
      if (n == member)
        return true;
    return false;
  }

  // An observer: the same challenge as a worker, its proof under its own
  // role, never a node. Answered with a snapshot at once and at each request.
  void handle(const schema::observe_request& o) {
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
    if (op && (spec_.operator_token.empty() ||
               !check_proof(spec_.operator_token, proof_role::operator_, *h,
                            o.operator_proof))) {
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

  void handle(const schema::snapshot_request& r) {
    if (!observers_.count(self_->current_sender()))
      return stranger("a snapshot request");
    reply(snapshot(r.request));
  }

  // An operator's command. A member's preemption or notice is carried out by
  // the node itself on the manager's order (its process dies, or gets a
  // SIGTERM); a drain is a notice without deadline that the manager gives;
  // the rest go to the run's controls, which the manager reads.
  void handle(const schema::command& c) {
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

  run_controls::answer member_command(const inspect_command& cmd) {
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

  schema::cluster_snapshot snapshot(std::uint64_t request) {
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

  template <class T>
  void handle(const T&) {
    if (remember(told_, self_->current_sender()))
      logger_->warn("dropped a frame of a kind the gateway does not take from {}",
                    caf::to_string(self_->current_sender()));
  }

  // A member gone: it left (nullopt), or it was lost and its proxies end with why.
  void lose(const peer& p, std::optional<failover_cause> cause,
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

  void on_down(const caf::down_msg& dm) {
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

  void on_tick() {
    const auto now = clock_type::now();
    for (int node : tracker_.expired(now, spec_.heartbeats.timeout()))
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

  caf::event_based_actor* self_;
  gateway_spec spec_;
  std::shared_ptr<spdlog::logger> logger_;
  static constexpr std::size_t max_strangers = 1024;
  static constexpr std::size_t max_pending_per_node = 4;
  std::map<peer, handshake> pending_; // challenges asked for, not yet answered
  kv_store store_;
  struct waiter {
    peer who;
    schema::store_request request;
    clock_type::time_point deadline;
  };
  std::vector<waiter> waiters_;
  std::map<peer, int> members_;
  std::map<int, std::vector<caf::actor>> proxies_; // member -> actors standing for its
  std::set<peer> told_;
  static constexpr std::size_t max_observers = 16;
  std::map<peer, bool> observers_; // an observer, and whether it is an operator
  heartbeat_tracker tracker_;
  int next_node_ = 0;
  struct rows_at {
    std::vector<schema::actor_row> rows;
    clock_type::time_point at;
  };
  std::map<int, rows_at> member_rows_; // each member's actors, by its last heartbeat
  static constexpr auto fenced_grace = std::chrono::seconds(30);
  struct fenced_session {
    const frame_session* session;
    clock_type::time_point since;
  };
  std::map<caf::node_id, fenced_session> fenced_;
  actor_board::entry row_;
};

caf::behavior gateway_actor(caf::stateful_actor<gateway_state>* self, gateway_spec spec) {
  return self->state.make_behavior(std::move(spec));
}

} // namespace

caf::actor spawn_gateway(caf::actor_system& sys, gateway_spec spec) {
  return sys.spawn(gateway_actor, std::move(spec));
}

} // namespace bamboo
