// The manager's front door for worker processes: challenge-response joins with
// the cluster token, node ids, heartbeats and the detection of lost workers (a
// dropped connection or missed heartbeats). A node declared lost is fenced: its
// later frames are refused, and it must join again as a new node.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include <caf/actor.hpp>
#include <caf/fwd.hpp>

#include "actors/plan/heartbeat_tracker.hpp"
#include "actors/protocol.hpp"
#include "schema/codec.hpp"

namespace bamboo {

class inspect_board;
class run_controls;
class actor_board;

// Messages (atoms in actors/protocol.hpp):
//  (attach_atom, member) from a proxy of one of the member's actors: the gateway
//    ends it (errc::node_lost, with the cause) when the member is lost, and hands
//    it the member's preemption notice as (notice_atom, deadline_ms);
//  (broadcast_atom, wire_frame): to every member (the end of a generation);
//  to the listener: (joined_atom, member, agent, zone) and (lost_atom, member).
// The node number of the manager's own heartbeats to its workers.
inline constexpr std::uint32_t manager_node = 0xffffffffu;

struct gateway_spec {
  std::string token;
  // What an operator proves besides the token to send commands (preempt,
  // drain, pause...); observers without it only watch. Empty: no commands.
  std::string operator_token;
  std::size_t frame_limit = schema::default_frame_limit;
  std::uint16_t store_port = 0; // the tensor transport's rendezvous store
  heartbeat_policy heartbeats;
  caf::actor listener; // told of joins and losses (may be invalid)
  // The run's custom model: a worker that does not build it (another name or
  // digest, or the built-in models only) is refused at join. Null: GPT or BERT.
  std::shared_ptr<const model_definition> model;
  // What observers (bamboo-inspect) are shown; the gateway adds joins and
  // losses, the run its steps and events. Null: one of the gateway's own.
  std::shared_ptr<inspect_board> board;
  // An operator's commands beyond a member's preemption or notice (pause,
  // resume, checkpoint, redundancy; in embedded mode the node orders too).
  // Null: those commands are answered as not available here.
  std::shared_ptr<run_controls> controls;
  // This process's actors (the manager's, the gateway's own, and in embedded
  // mode every node's); the members' come with their heartbeats. May be null.
  std::shared_ptr<actor_board> actors;
  // Embedded mode: the run's nodes are actors of this process, so workers are
  // refused and node commands go to the manager through `controls`.
  bool observers_only = false;
};

caf::actor spawn_gateway(caf::actor_system& sys, gateway_spec spec);

} // namespace bamboo
