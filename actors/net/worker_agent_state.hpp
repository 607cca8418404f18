// The state of a worker process's agent (spawn_worker_agent), in two files:
// worker_agent.cpp is the membership (the join handshake, the manager's
// heartbeats, the frames of the channel, leaving the process), worker_node.cpp
// the node the agent hosts (its assignment, the frames for the node's actors
// and their answers, replicas added later, leaving a plan).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <caf/actor.hpp>
#include <caf/behavior.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/response_promise.hpp>

#include "actors/actor_board.hpp"
#include "actors/net/auth.hpp"
#include "actors/net/frame_channel.hpp"
#include "actors/net/worker_agent.hpp"
#include "actors/node.hpp"

namespace spdlog {
class logger;
}

namespace bamboo {

class worker_agent_state {
public:
  static inline const char* name = "bamboo.worker";

  explicit worker_agent_state(caf::event_based_actor* self) : self_(self) {}

  caf::behavior make_behavior(worker_spec spec);

private:
  using target = schema::target;
  struct no_refusal {};

  // The membership (worker_agent.cpp).
  std::uint32_t member() const { return static_cast<std::uint32_t>(member_); }
  void ask_to_join();
  void check_manager();
  bool from_gateway() const {
    return self_->current_sender() ==
           caf::actor_cast<caf::strong_actor_ptr>(spec_.gateway);
  }
  void stranger();
  void send_gateway(const schema::frame& f);
  void on_frame(const wire_frame& w);
  void on_down(const caf::down_msg& dm);
  void finish(caf::error reason);
  void handle(const schema::heartbeat& hb);
  void handle(const schema::join_challenge& c);
  void handle(const schema::join_accept& a);
  void handle(const schema::order& o);
  void handle(const schema::join_refused& r);
  void handle(const schema::store_reply& r);
  void handle(const schema::frame_rejected& r);
  template <class T>
  void handle(const T&) {
    unexpected_frame();
  }
  void unexpected_frame();

  // The hosted node (worker_node.cpp).
  void to_manager(const schema::frame& f);
  stage_actor local() const;
  template <class... Ts>
  void to_local(Ts&&... xs);
  void learn_proxy();
  void add_local(target t, const stage_actor& a);
  stage_actor add_replica(int stage);
  void drop_local(target t);
  void reset();
  template <class Result, class Answer, class Refuse, class... Ts>
  void ask_local(const stage_actor& a, std::chrono::milliseconds timeout,
                 const char* what, Answer answer, Refuse refuse, Ts&&... xs);
  void handle(const schema::assign& a);
  void handle(const schema::attach& a);
  void handle(const schema::run_step& r);
  void handle(const schema::commit& c);
  void handle(const schema::shadow_link& l);
  void handle(const schema::resync& r);
  void handle(const schema::resume& r);
  void handle(const schema::progress_request& r);
  void handle(const schema::state_request& r);
  void handle(const schema::checkpoint_request& c);
  void handle(const schema::state_copy& c);
  void handle(const schema::generation_end& g);
  void handle(const schema::leave& l);

  caf::event_based_actor* self_;
  worker_spec spec_;
  std::shared_ptr<spdlog::logger> logger_;
  int member_ = -1;     // the gateway's number of this process, once joined
  handshake handshake_; // of the join under way
  int joins_ = 0, attempts_ = 0;
  std::chrono::milliseconds manager_timeout_{0}; // 0: the manager is not watched
  std::chrono::steady_clock::time_point manager_seen_, last_tick_;
  caf::actor detector_;
  actor_board::entry row_; // this agent on the process's board
  std::uint16_t store_port_ = 0;
  std::shared_ptr<transport_registry> registry_;
  std::shared_ptr<node_group> group_;
  // From the assignment: what a replica added later is made of.
  int node_ = -1;
  std::uint64_t generation_ = 0; // of the assignment
  node_resources res_;           // what the node's actors run with (a later replica too)
  std::vector<stage_range> parts_;
  target target_ = target::none; // of the frame being handled
  std::map<target, stage_actor> locals_;
  std::map<target, caf::actor> proxies_;
  std::map<caf::strong_actor_ptr, target> target_of_;
  std::map<target, std::vector<wire_frame>> held_; // for proxies not yet known
  // Actors of a newer plan that introduced themselves before its assignment.
  std::map<target, std::pair<std::uint64_t, caf::actor>> early_;
  std::set<caf::strong_actor_ptr> told_; // peers told of a bad frame
  std::uint64_t store_requests_ = 0;
  std::map<std::uint64_t, caf::response_promise> store_waits_;
};

} // namespace bamboo
