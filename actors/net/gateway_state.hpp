// The gateway's state (actors/net/gateway.hpp), one job per file: admission
// and sessions (gateway_join.cpp), the rendezvous store (gateway_store.cpp),
// observers and operators (gateway_observers.cpp), and the frame routing,
// heartbeats and losses (gateway.cpp). Included by those files only.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <set>

#include <caf/all.hpp>
#include <caf/io/middleman.hpp>

#include "actors/actor_board.hpp"
#include "actors/net/auth.hpp"
#include "actors/net/frame_channel.hpp"
#include "actors/net/frame_session.hpp"
#include "actors/net/front_door.hpp"
#include "actors/net/gateway.hpp"
#include "actors/net/inspect_command.hpp"
#include "actors/net/kv_store.hpp"
#include "actors/run_controls.hpp"
#include "log/log.hpp"

namespace bamboo {

struct gateway_state {
  using clock_type = std::chrono::steady_clock;

  static inline const char* name = "bamboo.gateway";

  explicit gateway_state(caf::event_based_actor* self) : self_(self) {}

  caf::behavior make_behavior(gateway_spec spec);

private:
  using peer = caf::strong_actor_ptr;

  void reply(const schema::frame& f);

  void on_frame(const wire_frame& w);

  // A dropped message from a peer that may not send it: logged once per sender.
  void stranger(const char* what);

  // A refused join, logged with where it came from.
  void refused(const peer& sender, const std::string& why);

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
  bool joined_already(const peer& sender);

  void handle(const schema::challenge_request& r);

  // Pending challenges are bounded per peer node and in all: a peer that asks
  // for many (from many sender ids) evicts its own, never an honest join.
  void make_room_for(const peer& sender);

  // The sender's answer to its challenge: its handshake when it proves the
  // token in `role`; a refusal is answered and logged (`who` in the log).
  std::optional<handshake> proven(const peer& sender, proof_role role,
                                  const std::vector<std::uint8_t>& proof,
                                  const char* who);

  // From now on every frame between the two processes carries the session's
  // MAC; the previous session of that process (a join before) is replaced.
  void open_session(const peer& sender, const handshake& h);

  // A lost member's session stays a while, so that the frames it still sends
  // are authentic and answered (it was fenced: it joins again); then it goes.
  void fence(const caf::node_id& node);
  void close_fenced(clock_type::time_point now);

  void handle(const schema::join_request& j);

  void handle(const schema::heartbeat& hb);

  void handle(const schema::preemption_notice& p);

  // The rendezvous store, for members only. A get or wait for keys not there yet
  // is answered when a later change brings them, or with "timeout" at its
  // deadline (checked every tick).
  void handle(const schema::store_request& r);

  static bool changes(schema::store_op op);

  void reply_to(const peer& p, const schema::store_reply& r);

  void answer_waiters();

  void expire_waiters(clock_type::time_point now);

  bool member_alive(int member) const;

  // An observer: the same challenge as a worker, its proof under its own
  // role, never a node. Answered with a snapshot at once and at each request.
  void handle(const schema::observe_request& o);

  void handle(const schema::snapshot_request& r);

  // An operator's command. A member's preemption or notice is carried out by
  // the node itself on the manager's order (its process dies, or gets a
  // SIGTERM); a drain is a notice without deadline that the manager gives;
  // the rest go to the run's controls, which the manager reads.
  void handle(const schema::command& c);

  run_controls::answer member_command(const inspect_command& cmd);

  schema::cluster_snapshot snapshot(std::uint64_t request);

  template <class T>
  void handle(const T&) {
    if (remember(told_, self_->current_sender()))
      logger_->warn("dropped a frame of a kind the gateway does not take from {}",
                    caf::to_string(self_->current_sender()));
  }

  // A member gone: it left (nullopt), or it was lost and its proxies end with why.
  void lose(const peer& p, std::optional<failover_cause> cause,
            const std::string& detail);

  void on_down(const caf::down_msg& dm);

  void on_tick();

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
  std::set<peer> beat_for_others_; // members told once (members are bounded)
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

} // namespace bamboo
