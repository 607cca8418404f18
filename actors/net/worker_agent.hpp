// The agent of a worker process: it stands between the manager's frames and
// the node's actors. On its assignment it spawns the node's stage actor, the
// replica of the successor stage and a failure detector (spawn_node, as in
// embedded mode), joins the manager's transport store, and from then on turns
// frames into the actors' messages and their replies into frames, each to the
// manager-side actor that stands for the sender. The end of a generation
// (a frame from the manager) aborts every transfer of it at once. Messages
// (atoms in actors/protocol.hpp): (notice_atom, deadline_ms) to the agent.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <caf/actor.hpp>
#include <caf/fwd.hpp>

#include "actors/plan/heartbeat_tracker.hpp"
#include "schema/codec.hpp"

namespace bamboo {

// How a worker's leaving on a silent manager (stopped, cut off) begins: the
// launcher counts such a manager as lost even if it comes back.
inline constexpr const char* manager_silent_words = "the manager sent no heartbeat for ";

class model_definition;
class actor_board;

struct worker_spec {
  caf::actor gateway; // the manager's front door
  std::string token;  // proven by challenge-response, never sent
  std::string zone = "default";
  std::string store_host = "127.0.0.1"; // the manager's host
  std::string advertise = "127.0.0.1";  // where this node's tensor transport listens
  std::size_t frame_limit = schema::default_frame_limit;
  // The heartbeat period until the manager sets one in its join acceptance.
  std::chrono::milliseconds heartbeat_period = default_heartbeat_period;
  // How long the manager may take to answer a join, before the worker gives up.
  std::chrono::milliseconds join_timeout = std::chrono::seconds(10);
  // How long a local actor may take to report its progress (the manager's
  // --progress-timeout-s bounds the whole exchange).
  std::chrono::milliseconds progress_timeout = default_progress_timeout;
  // How long one tensor transfer may take (Gloo's own deadline; a lost peer
  // ends its generation's transfers long before).
  std::chrono::milliseconds transport_timeout = std::chrono::seconds(30);
  // Called on the agent's thread when the manager accepts the join (again:
  // after a fence, as a new node). The app says so; the library prints nothing.
  std::function<void(int node, bool again)> on_joined;
  // The trainer's own model, when this worker builds one (announced at join:
  // a manager training another model refuses the worker).
  std::shared_ptr<const model_definition> model;
  // The manager's order, for an operator's command: "preempt" (end this
  // process at once) or "notice" (a preemption notice; `seconds` > 0 sets its
  // deadline). The program carries it out (bamboo-worker raises SIGKILL or
  // SIGTERM on itself); unset, orders are logged and ignored.
  std::function<void(const std::string& kind, double seconds)> on_order;
  // Where this process's actors say what they do; its rows ride on the
  // heartbeats to the manager (bamboo-inspect). Null: the agent makes one.
  std::shared_ptr<actor_board> actors;
};

// (notice_atom, deadline_ms) to the agent: this process has a preemption
// notice (SIGTERM); the agent tells the manager and goes on until told to leave.
// The agent joins first (then calls on_joined), and heartbeats through a
// failure_detector actor of its own for the whole process. A member fenced
// before it held a stage joins again as a new node. It ends
// normally when the manager lets the node go; with errc::invalid_config when
// the join is refused (a wrong token); with errc::node_lost when it was fenced
// holding a stage, its actors failed, or the manager did not answer.
caf::actor spawn_worker_agent(caf::actor_system& sys, worker_spec spec);

} // namespace bamboo
